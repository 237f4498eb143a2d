"""Work the operator does per Kafka cluster in the background, beside the resources' ticks.

:mod:`.loop` is the one loop per cluster (interval, backoff after a failure, one log line per outage, wake-ups);
:mod:`.balance_sampler` samples each cluster's balance score for the ``kpo_cluster_*`` gauges, and
:mod:`.broker_changes` watches each cluster's brokers and proposes AddBrokers / RemoveBrokers PartitionReassignments.
Their pure rules are in :mod:`kpo.domain` (``balance_score``, ``auto_propose``), their Kubernetes I/O in
:mod:`kpo.k8s` (``auto_proposals``).
"""
