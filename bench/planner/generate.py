"""Synthetic clusters for the planner bench, written in the planning job's storage contract.

A cluster is ``brokers`` brokers, ids 1..n, in ``racks`` racks (broker i in rack (i - 1) mod racks), of which the
first ``existing`` hold all the replicas (the rest are new, for scale-out). Topics all have the same number of
partitions; a partition's size is lognormal (median ``median_bytes``, sigma ``sigma``) times its topic's popularity
(lognormal, sigma ``popularity_sigma``), so a few topics are much heavier than the rest, as in real clusters.

Placement is Kafka-like and rack-aware: a partition's replicas sit at ``start, start + step, start + 2 step`` (mod
existing) with ``step = 1 + racks * m``, which keeps them in distinct racks. Skew: a fraction ``skew`` of partitions
start on one of the first tenth of the brokers ("hot" brokers), so those brokers lead more partitions and hold more
bytes than the rest.

Generation runs on Spark (rows come from ``spark.range``, randomness from hashes of the row's keys, so a scenario is a
pure function of its seed) because the largest scenario has a million partitions.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from kpo.domain.plan_contract import BROKERS_FILE, PARTITIONS_PATH, REQUEST_FILE, BrokerInfo, PlanRequest, brokers_json


@dataclass(frozen=True)
class ClusterSpec:
    brokers: int
    existing: int
    racks: int
    partitions: int
    replication_factor: int = 3
    partitions_per_topic: int = 100
    median_bytes: float = 256 * 1024**2
    sigma: float = 1.0
    popularity_sigma: float = 0.75
    skew: float = 0.05
    seed: int = 7

    def broker_infos(self) -> list[BrokerInfo]:
        return [BrokerInfo(id=i, rack=f"rack-{(i - 1) % self.racks}", alive=True) for i in range(1, self.brokers + 1)]


def _uniform(*keys: Column) -> Column:
    return (F.pmod(F.xxhash64(*keys), F.lit(2**53)) + 1) / F.lit(float(2**53 + 2))


def _normal(*keys: Column) -> Column:
    """Box-Muller on two hash-derived uniforms."""
    u1, u2 = _uniform(*keys, F.lit(1)), _uniform(*keys, F.lit(2))
    return F.sqrt(-2 * F.log(u1)) * F.cos(2 * math.pi * u2)


def write_cluster(spark: SparkSession, spec: ClusterSpec, request: PlanRequest, directory: Path) -> None:
    if spec.existing % spec.racks:
        raise ValueError("existing brokers must fill whole racks, or the rack of a wrapped replica changes")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / REQUEST_FILE).write_text(request.to_json())
    (directory / BROKERS_FILE).write_text(brokers_json(spec.broker_infos()))
    seed = F.lit(spec.seed)
    g = F.col("id")
    topic_no = (g / spec.partitions_per_topic).cast("long")
    popularity = F.exp(spec.popularity_sigma * _normal(seed, F.lit("topic"), topic_no))
    size = F.lit(spec.median_bytes) * F.exp(spec.sigma * _normal(seed, F.lit("size"), g)) * popularity
    hot = max(1, spec.existing // 10)
    start = F.when(_uniform(seed, F.lit("skew"), g) < spec.skew,
                   F.pmod(F.xxhash64(seed, F.lit("hot"), g), F.lit(hot))).otherwise(
        F.pmod(F.xxhash64(seed, F.lit("start"), g), F.lit(spec.existing)))
    step = 1 + spec.racks * F.pmod(F.xxhash64(seed, F.lit("step"), g), F.lit(max(1, spec.existing // spec.racks)))
    replicas = F.transform(F.sequence(F.lit(0), F.lit(spec.replication_factor - 1)),
                           lambda j: (F.pmod(F.col("start") + j * F.col("step"), F.lit(spec.existing)) + 1).cast("int"))
    rows = (spark.range(spec.partitions)
            .select(g, F.format_string("topic-%05d", topic_no).alias("topic"),
                    F.pmod(g, F.lit(spec.partitions_per_topic)).cast("int").alias("partition"),
                    size.cast("long").alias("size_bytes"), start.alias("start"), step.alias("step"))
            .select("topic", "partition", replicas.alias("replicas"), replicas[0].alias("leader"),
                    replicas.alias("isr"), "size_bytes"))
    rows.write.mode("overwrite").option("compression", "none").json(str(directory / PARTITIONS_PATH))


def describe(directory: Path) -> dict[str, object]:
    return json.loads((directory / REQUEST_FILE).read_text())  # type: ignore[no-any-return]
