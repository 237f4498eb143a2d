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

The count rounds end the same way on such inputs: when replica counts are outside their band after the byte rounds,
the partitions holding a replica on a broker outside it or on one of the :data:`GIVERS` brokers with most replicas
go to :mod:`kpo.domain.count_greedy` (the smallest replicas, the byte band kept), in place of Spark count rounds of a
few hundred replicas and then a few.
The count greedy only ever tries a broker's smallest replicas, so of its senders only the partitions holding one of
the :data:`SMALLEST` smallest replicas are collected. When the byte finish leaves every broker's bytes inside the
band, it runs the count greedy itself, on the rows it collected (with the count greedy's) as its greedy left them:
one collection and one join of the state instead of two.

Both hand their changes back with the per-broker sums' changes worked out here (:func:`deltas`) from the collected
rows, so no aggregate over the whole state follows them.

Smaller inputs never get here: the greedy candidate plans them whole (:mod:`kpo.planning.spark.candidate`), and their
golden plans stay the rounds' own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from kpo.domain.count_greedy import Range, balance_counts
from kpo.domain.greedy import Greedy, Key, Partition
from kpo.domain.plan_contract import PlanRequest
from kpo.planning.spark.balance import aim, band
from kpo.planning.spark.candidate import facts_of
from kpo.planning.spark.cluster import Cluster
from kpo.planning.spark.rounds import STAT_FIELDS, BrokerStats, count_quotas

#: A round under this hands over. At 500 the skewed 1M input ran one more byte round (218 replicas, ~8 s) after one
#: of 4,261; at 5,000 the finish takes over after that one: 7 rounds instead of 8, 115 CPU s against 132 in the same
#: hour, the same or fewer bytes on the bench's four large shapes (1.00042 / 1.00027 / 1.00024 / 1.00055 x LB).
FEW_MOVES = 5000
GIVERS = 16
MAX_MOVES = 2000
#: The count greedy tries a broker's smallest replicas, :data:`kpo.domain.count_greedy.TRIES` at a time, and moves
#: a few hundred on the skewed 1M input: collecting each sender's smallest 512 instead of all its partitions (85,000
#: rows there) leaves it the same choices.
SMALLEST = 512


@dataclass(frozen=True)
class Row:
    """A selected partition the finish may change, as it stands after the rounds so far."""

    topic: str
    partition: int
    size: int
    replicas: tuple[int, ...]
    # The partition's replicas before the plan (a replica in its original slot is one the rounds may still move).
    original: tuple[int, ...] = ()


def outside_band(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float,
                 levels: Mapping[int, float] | None = None) -> frozenset[int]:
    """Brokers taking part whose bytes are outside the band, stretched to their rack's level where the racks keep
    the band out of reach (``levels``, :func:`kpo.planning.spark.balance.aim`)."""
    loads = {b: stats[b].bytes if b in stats else 0 for b in cluster.eligible}
    real = band(float(sum(loads.values())), len(loads), tolerance)
    return frozenset(b for b, x in loads.items() if not aim(real, real, (levels or {}).get(b)).real.holds(x))


def sources(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float,
            levels: Mapping[int, float] | None = None) -> frozenset[int]:
    """The brokers whose partitions the finish collects: those outside the band and the fullest above the mean
    (a broker below the band is filled from them); empty when every broker is inside the band."""
    outside = outside_band(stats, cluster, tolerance, levels)
    if not outside:
        return frozenset()
    loads = {b: stats[b].bytes if b in stats else 0 for b in cluster.eligible}
    mean = sum(loads.values()) / len(loads)
    fullest = sorted((b for b, x in loads.items() if x > mean), key=lambda b: (-loads[b], b))[:GIVERS]
    return outside | frozenset(fullest)


@dataclass(frozen=True)
class Finished:
    """The greedy's new replica lists for the partitions it changed, and whether it stopped at :data:`MAX_MOVES`
    (with moves left that bring a broker closer) rather than for want of such a move."""

    targets: dict[Key, tuple[int, ...]] = field(default_factory=dict)
    capped: bool = False


def finish(rows: Iterable[Row], stats: Mapping[int | None, BrokerStats], cluster: Cluster, request: PlanRequest,
           ) -> Finished:
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
    changed = {key: after for key, after in greedy.result().assignment.items() if after != before[key]}
    return Finished(changed, capped=greedy.moves >= MAX_MOVES)


def count_sources(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float) -> frozenset[int]:
    """The brokers whose partitions the count finish collects: those outside the count band and the ones with most
    replicas above the mean (a broker below the band takes from them); empty when every count is inside the band."""
    count_band, counts = count_quotas(stats, cluster, tolerance)
    outside = frozenset(b for b, c in counts.items() if not count_band.holds(c))
    if not outside:
        return frozenset()
    fullest = sorted((b for b, c in counts.items() if c > count_band.mean), key=lambda b: (-counts[b], b))[:GIVERS]
    return outside | frozenset(fullest)


def count_finish(rows: Iterable[Row], stats: Mapping[int | None, BrokerStats], cluster: Cluster,
                 request: PlanRequest) -> dict[Key, tuple[int, ...]]:
    """The count greedy's new replica lists for the partitions it changed, at most :data:`MAX_MOVES` moves."""
    parts = [Partition(topic=r.topic, partition=r.partition, replicas=r.replicas, size=r.size) for r in rows]
    count_band, _ = count_quotas(stats, cluster, request.tolerance)
    loads = {b: stats[b].bytes if b in stats else 0 for b in cluster.eligible}
    bytes_band = band(float(sum(loads.values())), len(loads), request.tolerance)
    base_count = {b: s.replicas for b, s in stats.items() if b is not None}
    base_bytes = {b: s.bytes for b, s in stats.items() if b is not None}
    for p in parts:
        for b in p.replicas:
            base_count[b] = base_count.get(b, 0) - 1
            base_bytes[b] = base_bytes.get(b, 0) - p.size
    return balance_counts(facts_of(cluster, request), parts, base_count=base_count, base_bytes=base_bytes,
                          counts=Range(count_band.lo, count_band.hi), bytes_band=Range(bytes_band.lo, bytes_band.hi),
                          max_moves=MAX_MOVES)


def as_placed(rows: Iterable[Row], targets: Mapping[Key, tuple[int, ...]]) -> list[Row]:
    """``rows`` with the replica lists ``targets`` gives them (``original`` kept)."""
    return [replace(r, replicas=after) if (after := targets.get((r.topic, r.partition))) is not None else r
            for r in rows]


def replicas_moved(rows: Iterable[Row], targets: Mapping[Key, tuple[int, ...]]) -> int:
    """Slots whose broker ``targets`` changes."""
    return sum(sum(old != new for old, new in zip(row.replicas, after, strict=True))
               for row in rows if (after := targets.get((row.topic, row.partition))) is not None)


def deltas(rows: Iterable[Row], targets: Mapping[Key, tuple[int, ...]], cluster: Cluster,
           ) -> dict[int | None, BrokerStats]:
    """How ``targets`` change the per-broker sums, slot by slot (a finish keeps slot order). A replica is movable
    where the rounds' replica view says so: on a broker taking part, in its original slot, when the plan balances;
    nothing is forced (a finish runs only when nothing is, and keeps every rack spread as even as it was)."""
    sums: dict[int, dict[str, int]] = {}

    def add(broker: int, row: Row, slot: int, sign: int) -> None:
        movable = (cluster.balancing and broker in cluster.eligible and slot < len(row.original)
                   and row.original[slot] == broker)
        s = sums.setdefault(broker, dict.fromkeys(STAT_FIELDS, 0))
        s["bytes"] += sign * row.size
        s["replicas"] += sign
        s["leaders"] += sign * (slot == 0)
        s["movable_bytes"] += sign * row.size * movable
        s["movable_replicas"] += sign * movable

    for row in rows:
        after = targets.get((row.topic, row.partition))
        if after is None:
            continue
        if len(after) != len(row.replicas):
            raise ValueError(f"a finish changed the replica count of {row.topic}-{row.partition}")
        for slot, (old, new) in enumerate(zip(row.replicas, after, strict=True)):
            if old != new:
                add(old, row, slot, -1)
                add(new, row, slot, +1)
    return {b: BrokerStats(broker=b, **s) for b, s in sums.items()}
