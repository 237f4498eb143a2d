"""The greedy candidate: on inputs small enough for the driver, the job also plans with :mod:`kpo.domain.greedy` and
keeps whichever plan is better.

Why. The rounds (:mod:`kpo.planning.spark.plan`) move replicas in bulk, by per-broker quotas, each replica at most once;
that is what plans a million replicas in a minute, and where the band is reachable it moves within a few per mille of
the lower bound. On some shapes it stops short: racks of very different sizes, a heavy tail of partition sizes, one
topic holding most of the bytes (issue 27), where a plain greedy -- the largest replica that fits from the fullest
broker to the emptiest one that keeps the racks even, one at a time -- comes closer to the band, or reaches it moving
less. One replica at a time is a loop over replicas on the driver, so the candidate runs only where that is cheap:
at most :data:`MAX_REPLICAS` replicas in the snapshot (the greedy took about 3 s for 20,000 replicas on the bench's
shapes). Larger inputs get the rounds' plan alone.

It runs where the request does not balance too (a ``ReplicationFactor`` increase without ``rebalanceExisting``): then
both plans place only the new and the forced replicas and move the same bytes, and the rounds' quotas, filled in bulk,
can leave a broker far lower than the greedy's one replica at a time onto the least loaded broker (0.117 against 0.508
x mean on the small RF 2 -> 3 shape of ``tests/test_planner_shapes.py``). No band is asked for there, but the same
rules pick the plan whose brokers end closer to it.

Which plan is better (:func:`better`), with each plan's per-broker bytes over the brokers taking part and the bytes it
moves:

1. a plan inside the band beats one outside it;
2. of two plans inside the band, the one that moves fewer bytes;
3. of two plans outside the band, one whose lowest broker is as high and highest as low as the other's, and one of
   them better, whatever the bytes: a user who compares the two ends sees it closer at one, as close at the other;
4. else (each closer at one end), the smaller sum of how far its lowest broker is below the band and its highest
   above it (relative to the mean); on a tie (within 0.001), or the same ends, the one that moves fewer bytes.

On equal standing the rounds' plan stays. The candidate must keep every hard rule the rounds keep: no broker twice,
nothing left on a removed broker, the replication factor, and no more rack violations than the rounds' plan; the job
checks that on the candidate before it may win.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kpo.domain.greedy import Key, Partition, Setup, place
from kpo.domain.plan_contract import PlanRequest
from kpo.planning.spark.cluster import Cluster
from kpo.planning.spark.schemas import ASSIGNMENT, STATE_COLUMNS

MAX_REPLICAS = 100_000
CLOSER = 1e-3


@dataclass(frozen=True)
class Standing:
    """What the comparison reads of a plan: bytes moved, and its lowest and highest broker over the mean."""

    bytes_moved: int
    low: float
    high: float

    def outside(self, tolerance: float) -> float:
        """How far the plan's ends are outside the band, relative to the mean (0: inside)."""
        return max(0.0, (1 - tolerance) - self.low) + max(0.0, self.high - (1 + tolerance))


def standing(loads: Mapping[int, float], bytes_moved: int) -> Standing:
    """``loads``: bytes per broker taking part after the plan."""
    mean = sum(loads.values()) / len(loads) if loads else 0.0
    if not mean:
        return Standing(bytes_moved, 1.0, 1.0)
    return Standing(bytes_moved, min(loads.values()) / mean, max(loads.values()) / mean)


def better(candidate: Standing, incumbent: Standing, tolerance: float) -> bool:
    """Whether ``candidate`` is strictly better than ``incumbent`` by the rules of the module docstring."""
    mine, theirs = candidate.outside(tolerance), incumbent.outside(tolerance)
    if mine == 0 or theirs == 0:
        if (mine == 0) != (theirs == 0):
            return mine == 0
        return candidate.bytes_moved < incumbent.bytes_moved
    as_low, as_high = candidate.low >= incumbent.low, candidate.high <= incumbent.high
    at_most_low, at_most_high = candidate.low <= incumbent.low, candidate.high >= incumbent.high
    if (as_low and as_high) != (at_most_low and at_most_high):
        return as_low and as_high
    if not (as_low and as_high) and abs(mine - theirs) > CLOSER:
        return mine < theirs
    return candidate.bytes_moved < incumbent.bytes_moved


@dataclass(frozen=True)
class Candidate:
    """The greedy plan: changed partitions' targets, its per-broker bytes (brokers taking part) and bytes moved."""

    targets: dict[Key, tuple[int, ...]]
    loads: dict[int, float]
    bytes_moved: int
    unplaced: int


def facts_of(cluster: Cluster, request: PlanRequest) -> Setup:
    """The greedy's facts from the job's own (:class:`Cluster`): the same brokers, racks and rules."""
    racks = {b: r for b, r in cluster.racks.items() if r is not None} if cluster.rack_mode else {}
    rack_of = {b: r for b, r in racks.items() if b in cluster.eligible}
    kept = {b: r for b, r in racks.items() if b not in cluster.eligible and b not in cluster.removed}
    return Setup(alive=cluster.alive, eligible=cluster.eligible, removed=cluster.removed, rack_of=rack_of,
                 balancing=cluster.balancing, replication_factor=request.replication_factor,
                 tolerance=request.tolerance, drain_dead=False, kept_rack_of=kept)


def greedy_plan(state: DataFrame, cluster: Cluster, request: PlanRequest) -> Candidate:
    """The greedy plan of the job's initial state (selection, offline partitions and replication factor applied)."""
    rows = state.select("topic", "partition", "size", "selected", "original", "replicas").collect()
    parts: list[Partition] = []
    start: dict[Key, list[int | None]] = {}
    active: list[Key] = []
    for r in rows:
        p = Partition(topic=r["topic"], partition=int(r["partition"]), replicas=tuple(int(b) for b in r["original"]),
                      size=int(r["size"]))
        parts.append(p)
        if r["selected"]:
            active.append(p.key)
            start[p.key] = [None if b is None else int(b) for b in r["replicas"]]
    result = place(facts_of(cluster, request), cluster.racks.keys(), parts, active, start, lift=True)
    by_key = {p.key: p for p in parts}
    targets: dict[Key, tuple[int, ...]] = {}
    loads = dict.fromkeys(cluster.eligible, 0.0)
    moved = 0
    for key, replicas in result.assignment.items():
        p = by_key[key]
        if replicas != p.replicas:
            targets[key] = replicas
            moved += p.size * len(set(replicas) - set(p.replicas))
        for b in replicas:
            if b in loads:
                loads[b] += p.size
    return Candidate(targets=targets, loads=loads, bytes_moved=moved, unplaced=result.unplaced)


def with_targets(state: DataFrame, targets: Mapping[Key, tuple[int, ...]], unchanged: str = "original") -> DataFrame:
    """The state with ``targets`` as the selected partitions' replicas; the selected partitions ``targets`` does not
    name get their ``unchanged`` column (the candidate starts from ``original``; the finish keeps ``replicas``), the
    others keep theirs."""
    spark = state.sparkSession
    rows = [(topic, partition, list(replicas)) for (topic, partition), replicas in sorted(targets.items())]
    assigned = spark.createDataFrame(rows, ASSIGNMENT).withColumnRenamed("replicas", "assigned")
    replicas = F.when(F.col("selected"), F.coalesce("assigned", unchanged)).otherwise(F.col("replicas"))
    return (state.join(F.broadcast(assigned), ["topic", "partition"], "left")
            .withColumn("replicas", replicas).select(*STATE_COLUMNS))


def bytes_moved(state: DataFrame) -> int:
    row = state.agg(F.sum(F.size(F.array_except("replicas", "original")) * F.col("size")).alias("moved")).first()
    return int(row["moved"] or 0) if row is not None else 0
