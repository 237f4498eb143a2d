"""Synthetic clusters for the planner bench, written in the planning job's storage contract.

A cluster is ``brokers`` brokers, ids 1..n, in ``racks`` racks (broker i in rack (i - 1) mod racks), of which the
first ``existing`` hold all the replicas (the rest are new, for scale-out). Topics all have the same number of
partitions; a partition's size is lognormal (median ``median_bytes``, sigma ``sigma``) times its topic's popularity
(lognormal, sigma ``popularity_sigma``), so a few topics are much heavier than the rest, as in real clusters. Each
topic's replication factor is drawn from ``replication_factors`` (by a hash of the topic; one entry: every topic).

Placement is Kafka-like and rack-aware: a partition's replicas sit at ``start, start + step, start + 2 step`` (mod
existing) with ``step = 1 + racks * m``, which keeps them in distinct racks. Skew: a fraction ``skew`` of partitions
start on one of the first tenth of the brokers ("hot" brokers), so those brokers lead more partitions and hold more
bytes than the rest.

Uneven racks: with ``rack_sizes`` (e.g. 6, 6, 2) the racks hold consecutive brokers (rack-0 is 1..6, rack-1 7..12,
rack-2 13..14) and every broker holds replicas. The leader sits on ``start`` (chosen as above), replica j in the rack
j after the leader's (mod racks), on a broker of that rack drawn by a hash. ``dead`` brokers are listed with
``alive: false``; the placement does not know it (they died after it), so their replicas are the ones to recover.

Sizes (issue 27): ``sizes="pareto"`` draws each partition's size from a Pareto law of index ``pareto_alpha`` with
the same median (heavy tail: a handful of partitions far above the rest) instead of the lognormal. A *dominant*
topic (``dominant_share`` > 0) is added on top: ``dominant_partitions`` partitions of one topic, ``topic-dominant``,
that hold that share of all bytes (equal sizes), placed like the others; the rest keep their relative sizes.

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
    replication_factors: tuple[int, ...] = (3,)
    partitions_per_topic: int = 100
    median_bytes: float = 256 * 1024**2
    sigma: float = 1.0
    popularity_sigma: float = 0.75
    skew: float = 0.05
    seed: int = 7
    rack_sizes: tuple[int, ...] = ()
    dead: tuple[int, ...] = ()
    sizes: str = "lognormal"  # or "pareto"
    pareto_alpha: float = 1.2
    dominant_share: float = 0.0
    dominant_partitions: int = 4

    def rack_index(self, broker: int) -> int:
        if not self.rack_sizes:
            return (broker - 1) % self.racks
        first = 1
        for index, size in enumerate(self.rack_sizes):
            if broker < first + size:
                return index
            first += size
        raise ValueError(f"broker {broker} is beyond the racks {self.rack_sizes}")

    def broker_infos(self) -> list[BrokerInfo]:
        return [BrokerInfo(id=i, rack=f"rack-{self.rack_index(i)}", alive=i not in self.dead)
                for i in range(1, self.brokers + 1)]

    def check(self) -> None:
        if self.rack_sizes:
            if sum(self.rack_sizes) != self.brokers or len(self.rack_sizes) != self.racks:
                raise ValueError(f"rack sizes {self.rack_sizes} must add up to {self.brokers} brokers in {self.racks}"
                                 " racks")
            if self.existing != self.brokers or max(self.replication_factors) > self.racks:
                raise ValueError("uneven racks: every broker holds replicas, at most one replica per rack")
        elif self.existing % self.racks:
            raise ValueError("existing brokers must fill whole racks, or the rack of a wrapped replica changes")
        if self.sizes not in ("lognormal", "pareto"):
            raise ValueError(f"sizes must be lognormal or pareto, not {self.sizes!r}")
        if not 0.0 <= self.dominant_share < 1.0:
            raise ValueError("dominant_share is a fraction of all bytes, below 1")
        if any(not 1 <= b <= self.brokers for b in self.dead):
            raise ValueError(f"dead brokers {self.dead} are not among 1..{self.brokers}")


def _uniform(*keys: Column) -> Column:
    return (F.pmod(F.xxhash64(*keys), F.lit(2**53)) + 1) / F.lit(float(2**53 + 2))


def _normal(*keys: Column) -> Column:
    """Box-Muller on two hash-derived uniforms."""
    u1, u2 = _uniform(*keys, F.lit(1)), _uniform(*keys, F.lit(2))
    return F.sqrt(-2 * F.log(u1)) * F.cos(2 * math.pi * u2)


def _replication_factor(spec: ClusterSpec, seed: Column, topic_no: Column) -> Column:
    if len(spec.replication_factors) == 1:
        return F.lit(spec.replication_factors[0])
    choices = F.array(*[F.lit(f) for f in spec.replication_factors])
    return F.element_at(choices, (F.pmod(F.xxhash64(seed, F.lit("rf"), topic_no),
                                         F.lit(len(spec.replication_factors))) + 1).cast("int"))


def _uneven_replicas(spec: ClusterSpec, seed: Column, g: Column) -> Column:
    """Replica j of a partition led by ``start``: in the rack j after the leader's, on a broker drawn by a hash."""
    firsts = [1 + sum(spec.rack_sizes[:k]) for k in range(len(spec.rack_sizes))]
    rack_of = F.array(*[F.lit(spec.rack_index(b)) for b in range(1, spec.brokers + 1)])
    first_of = F.array(*[F.lit(f) for f in firsts])
    size_of = F.array(*[F.lit(n) for n in spec.rack_sizes])
    leader_rack = F.element_at(rack_of, (F.col("start") + 1).cast("int"))

    def replica(j: Column) -> Column:
        rack = (F.pmod(leader_rack + j, F.lit(spec.racks)) + 1).cast("int")
        drawn = F.element_at(first_of, rack) + F.pmod(F.xxhash64(seed, F.lit("in-rack"), g, j),
                                                      F.element_at(size_of, rack))
        return F.when(j == 0, F.col("start") + 1).otherwise(drawn).cast("int")

    return F.transform(F.sequence(F.lit(0), F.col("rf") - 1), replica)


def _size(spec: ClusterSpec, seed: Column, g: Column, topic_no: Column) -> Column:
    """A partition's size: lognormal or Pareto around ``median_bytes``, times its topic's popularity."""
    popularity = F.exp(spec.popularity_sigma * _normal(seed, F.lit("topic"), topic_no))
    if spec.sizes == "pareto":
        # Inverse CDF of Pareto(x_m, alpha); its median is x_m * 2^(1/alpha).
        scale = spec.median_bytes / 2 ** (1 / spec.pareto_alpha)
        drawn = F.lit(scale) * F.pow(_uniform(seed, F.lit("pareto"), g), F.lit(-1 / spec.pareto_alpha))
    else:
        drawn = F.lit(spec.median_bytes) * F.exp(spec.sigma * _normal(seed, F.lit("size"), g))
    return drawn * popularity


def write_cluster(spark: SparkSession, spec: ClusterSpec, request: PlanRequest, directory: Path) -> None:
    spec.check()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / REQUEST_FILE).write_text(request.to_json())
    (directory / BROKERS_FILE).write_text(brokers_json(spec.broker_infos()))
    seed = F.lit(spec.seed)
    g = F.col("id")
    extra = spec.dominant_partitions if spec.dominant_share else 0
    dominant = g >= spec.partitions
    topic_no = (g / spec.partitions_per_topic).cast("long")
    size = _size(spec, seed, g, topic_no)
    if extra:
        # The dominant topic's partitions share dominant_share of all bytes: rest * share / (1 - share), equally.
        rest = spark.range(spec.partitions).select(F.sum(size.cast("long")).alias("rest")).first()
        assert rest is not None
        each = float(rest["rest"]) * spec.dominant_share / (1 - spec.dominant_share) / extra
        size = F.when(dominant, F.lit(each)).otherwise(size)
    hot = max(1, spec.existing // 10)
    start = F.when(_uniform(seed, F.lit("skew"), g) < spec.skew,
                   F.pmod(F.xxhash64(seed, F.lit("hot"), g), F.lit(hot))).otherwise(
        F.pmod(F.xxhash64(seed, F.lit("start"), g), F.lit(spec.existing)))
    step = 1 + spec.racks * F.pmod(F.xxhash64(seed, F.lit("step"), g), F.lit(max(1, spec.existing // spec.racks)))
    if spec.rack_sizes:
        replicas = _uneven_replicas(spec, seed, g)
    else:
        replicas = F.transform(F.sequence(F.lit(0), F.col("rf") - 1),
                               lambda j: (F.pmod(F.col("start") + j * F.col("step"), F.lit(spec.existing)) + 1)
                               .cast("int"))
    topic = F.when(dominant, F.lit("topic-dominant")).otherwise(F.format_string("topic-%05d", topic_no))
    partition = F.when(dominant, g - spec.partitions).otherwise(F.pmod(g, F.lit(spec.partitions_per_topic)))
    rows = (spark.range(spec.partitions + extra)
            .select(g, topic.alias("topic"), partition.cast("int").alias("partition"),
                    size.cast("long").alias("size_bytes"), start.alias("start"), step.alias("step"),
                    _replication_factor(spec, seed, topic_no).alias("rf"))
            .select("topic", "partition", replicas.alias("replicas"), replicas[0].alias("leader"),
                    replicas.alias("isr"), "size_bytes"))
    rows.write.mode("overwrite").option("compression", "none").json(str(directory / PARTITIONS_PATH))


def describe(directory: Path) -> dict[str, object]:
    return json.loads((directory / REQUEST_FILE).read_text())  # type: ignore[no-any-return]
