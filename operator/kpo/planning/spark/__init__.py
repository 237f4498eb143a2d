"""The planning job: a PySpark job that turns a cluster snapshot and a goal into a reassignment plan.

kpo.planning.spark is the only package of kpo that imports pyspark, and only its job modules do, so the operator can
import the runner without loading Spark.

The storage contract (types and JSON in :mod:`kpo.domain.plan_contract`):

Input directory -- a local path or any Hadoop-compatible URI Spark reads:
  ``request.json``   goal (Rebalance | RemoveBrokers | AddBrokers | ReplicationFactor), brokers concerned, topics /
                     topicPattern / excludeTopics, replicationFactor, tolerance, rackAware;
  ``brokers.json``   ``[{"id": 1, "rack": "a" | null, "alive": true}, ...]``;
  ``partitions``     Parquet or JSON lines: topic, partition, replicas (array<int>, leader first), leader, isr,
                     size_bytes (the partition's size from DescribeLogDirs: the leader's replica).

Output directory:
  ``plan.json``      ``{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..],"log_dirs":["any",..]}]}``,
                     only the partitions whose replica list changes (kafka-reassign-partitions' shape);
  ``metrics.json``   replicas and bytes to move, the lower bound on bytes (and replicas) to move, per-broker bytes /
                     replicas / leaders before and after, rack violations before and after, planning time, the number
                     of partitions, and ``status`` (``ok``, or ``failed`` with a message).
A failed job writes ``metrics.json`` with status failed AND exits non-zero, so both the local runner and a
SparkApplication report the failure with the job's own message.

Lower bound on bytes to move, with L_i the bytes on broker i and [lo_i, hi_i] its allowed band after the change
(band = mean * (1 +- tolerance) over the brokers that remain; hi = 0 for a removed broker):
``LB = max(sum_i max(0, L_i - hi_i), sum_i max(0, lo_i - L_i))``; bytes of replicas a replication-factor increase must
create join the first sum, and a broker is never asked to shed bytes it may not move (unselected topics). See
:mod:`kpo.planning.spark.balance`.

Modules: ``schemas`` (DataFrame schemas), ``storage`` (contract I/O on any Hadoop file system), ``cluster`` (what the
request means for the brokers), ``prepare`` (selection, replication factor), ``balance``, ``rounds`` and ``flow``
(driver-side arithmetic on per-broker totals: band, lower bound, quotas, leader chains), ``exprs`` (literal lookups),
``moves`` and ``leaders`` (the DataFrame transforms of a round), ``candidate`` and ``finish`` (the greedy of
:mod:`kpo.domain.greedy` on the driver: the whole plan of a small input, the last few replicas of a large one),
``disks`` and ``relieve`` (log-dir plans, capacity relief), ``quality`` (the proposal's figures: bytes,
leaders, balance), ``demote``, ``plan`` (the pipeline), ``job`` (entry
point), ``evaluate`` (scores any given assignment the same way, for the bench), ``runner`` (the local backend:
spark-submit in local mode, supervised), ``workdir`` (writing inputs and reading outputs on a local file system).
Only ``balance``, ``rounds``, ``flow``, ``cluster``, ``runner`` and ``workdir`` can be imported without pyspark.
"""
