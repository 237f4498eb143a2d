"""Planning: how a generated plan (``spec.plan``) is computed, from the operator's side to the Spark job.

- :mod:`kpo.planning.backends` runs planning jobs for the operator: writes each generation's snapshot through the
  storage contract (:mod:`kpo.domain.plan_contract`), starts the job on the configured backend (``local``:
  spark-submit supervised by the operator; ``sparkApplication``: a Kubeflow SparkApplication) and reports its state.
  It decides nothing: the reassignment's plan life cycle acts on what it reports.
- :mod:`kpo.planning.spark` is the job itself (PySpark: snapshot and goal in, plan and metrics out), with the local
  runner and the work directory helpers, which import no pyspark.

The layers: ``backends`` sits over the Kubernetes adapters and the job; the job knows neither. Only
``kpo.planning.spark`` imports pyspark (an import-linter contract).
"""
