"""Score a given target assignment exactly as the job scores its own plan: same lower bound, same metrics.

``python -m kpo.planning.spark.evaluate --input DIR --assignment PATH --output DIR`` (or under spark-submit) reads a
planning input and an assignment (JSON lines or Parquet: topic, partition, replicas; partitions it does not list keep
their replicas) and writes ``metrics.json``. The bench runs Kafka's own placer on the same input and scores its answer
with this, so the two sides of the bench table are measured by the same code. Unlike the job, it does not refuse an
assignment that breaks a hard constraint: it reports the breakage (rack violations, replicas left behind).
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import functions as F

from kpo.domain.plan_contract import METRICS_FILE
from kpo.planning.spark import moves, storage
from kpo.planning.spark.cluster import Cluster
from kpo.planning.spark.job import session
from kpo.planning.spark.plan import checkpoint, measure, read_snapshot, referenced_brokers, selected_factors
from kpo.planning.spark.prepare import rack_bound, to_state
from kpo.planning.spark.schemas import STATE_COLUMNS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kpo.planning.spark.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--assignment", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    spark = session("kpo-evaluate")
    try:
        snapshot = read_snapshot(spark, args.input)
        partitions = checkpoint(snapshot.partitions)
        cluster = Cluster.of(snapshot.request, snapshot.brokers, referenced_brokers(partitions))
        state = checkpoint(to_state(partitions, snapshot.request, cluster))
        initial = moves.broker_stats(state, cluster)
        closed = rack_bound(state, cluster, selected_factors(state)[0])
        assigned = storage.read_assignment(spark, args.assignment).withColumnRenamed("replicas", "assigned")
        target = (state.join(assigned, ["topic", "partition"], "left")
                  .withColumn("replicas", F.coalesce("assigned", "original")).select(*STATE_COLUMNS))
        scored = measure(checkpoint(target), cluster, snapshot.request, initial=initial, closed=closed, rounds=0,
                         planning_seconds=0.0, check=False)
        storage.write_document(spark, storage.join(args.output, METRICS_FILE), scored.to_json())
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
