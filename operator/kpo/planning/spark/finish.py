"""The byte rounds' finish on the driver, for inputs too large for the greedy candidate.

Why. A byte round costs the same few seconds whether it moves 150,000 replicas or 2: a scan of the state, a shuffle,
a checkpoint. On a skewed million-replica input the first rounds bring all but a handful of brokers inside the band,
and then seven more rounds moved 13, 3, 2, 1, 2, 2 and 0 replicas, 4 to 8 s each, for brokers a hair outside it
(issue 27: 44 s of a 118 s plan). Quotas are the wrong tool for the last few replicas: which replica fits where is a
question about single replicas, the one the plain greedy (:mod:`kpo.domain.greedy`) answers.

So once a byte round moves fewer than :data:`FEW_MOVES` replicas and nothing is forced any more, the job collects the
selected partitions that hold a replica on a broker outside the band or on one of the :data:`GIVERS` fullest brokers
above the mean (a few tens of thousands of rows on a million replicas), hands them to the greedy with the bytes every
broker holds in all other partitions (``base_load``), and takes the greedy's moves, at most :data:`MAX_MOVES`. The
greedy runs *frugal*: it first tries the smallest replica that brings the highest broker into the band, or lifts the
lowest into it, where its plain rule (the largest replica that fits) moved 1.0059 x the lower bound on a 300,000
replica removal that the rounds alone moved at 1.0003 x (now 1.0002 x). It keeps the rules the rounds keep (no
broker twice, racks as even as before or better, only selected partitions, only brokers taking part) and stops when
every broker is inside the band or no single move brings one closer.

Smaller inputs never get here: the greedy candidate plans them whole (:mod:`kpo.planning.spark.candidate`), and their
golden plans stay the rounds' own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kpo.domain.greedy import Greedy, Key, Partition
from kpo.domain.plan_contract import PlanRequest
from kpo.planning.spark.balance import band
from kpo.planning.spark.candidate import facts_of
from kpo.planning.spark.cluster import Cluster
from kpo.planning.spark.rounds import BrokerStats

#: A round under this hands over. At 500 the skewed 1M input ran one more byte round (218 replicas, ~8 s) after one
#: of 4,261; at 5,000 the finish takes over after that one: 7 rounds instead of 8, 115 CPU s against 132 in the same
#: hour, the same or fewer bytes on the bench's four large shapes (1.00042 / 1.00027 / 1.00024 / 1.00055 x LB).
FEW_MOVES = 5000
GIVERS = 16
MAX_MOVES = 2000


@dataclass(frozen=True)
class Row:
    """A selected partition the finish may change, as it stands after the rounds so far."""

    topic: str
    partition: int
    size: int
    replicas: tuple[int, ...]


def outside_band(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float) -> frozenset[int]:
    """Brokers taking part whose bytes are outside the band."""
    loads = {b: stats[b].bytes if b in stats else 0 for b in cluster.eligible}
    real = band(float(sum(loads.values())), len(loads), tolerance)
    return frozenset(b for b, x in loads.items() if not real.holds(x))


def sources(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float) -> frozenset[int]:
    """The brokers whose partitions the finish collects: those outside the band and the fullest above the mean
    (a broker below the band is filled from them); empty when every broker is inside the band."""
    outside = outside_band(stats, cluster, tolerance)
    if not outside:
        return frozenset()
    loads = {b: stats[b].bytes if b in stats else 0 for b in cluster.eligible}
    mean = sum(loads.values()) / len(loads)
    fullest = sorted((b for b, x in loads.items() if x > mean), key=lambda b: (-loads[b], b))[:GIVERS]
    return outside | frozenset(fullest)


def finish(rows: Iterable[Row], stats: Mapping[int | None, BrokerStats], cluster: Cluster, request: PlanRequest,
           ) -> dict[Key, tuple[int, ...]]:
    """The greedy's new replica lists for the partitions it changed (slot order kept: a moved leader's replacement
    is the preferred leader)."""
    parts = [Partition(topic=r.topic, partition=r.partition, replicas=r.replicas, size=r.size) for r in rows]
    base = {b: s.bytes for b, s in stats.items() if b is not None}
    for p in parts:
        for b in p.replicas:
            base[b] = base.get(b, 0) - p.size
    brokers = set(cluster.eligible) | set(base)
    greedy = Greedy(facts_of(cluster, request), brokers, parts, [p.key for p in parts], base_load=base,
                    frugal=True)
    greedy.balance(MAX_MOVES)
    before = {p.key: p.replicas for p in parts}
    return {key: after for key, after in greedy.result().assignment.items() if after != before[key]}
