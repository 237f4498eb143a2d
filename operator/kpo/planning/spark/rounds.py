"""The driver's decision for one round of moves, from per-broker totals only.

A plan is built in a few rounds. Each round Spark sums the replicas per broker (a few hundred rows come back), this
module turns those sums into quotas -- how much each broker sends and receives, and how large its movers should be --
and Spark then picks and places the replicas that meet the quotas (:mod:`kpo.planning.spark.moves`). The next round
starts from the new totals, so whatever one round could not place (a partition that already has a replica in the
receiving rack, two movers of one partition aiming at the same rack) is picked up by the next, and the quotas never ask
for more than what is still out of balance.

Rounds in order: bytes (forced moves and byte balance), then replica counts if they are still out of their band, then
leaders (a reorder within each partition, which moves no data).

Where racks of different sizes keep the band out of reach (a rack of 8 brokers that can hold at most one replica of
every partition, 0.72 x mean each, beside a rack of 2 that must hold one of every RF 3 partition), the byte quotas aim
at each rack's most even level (``levels``, :func:`kpo.planning.spark.balance.aim`) instead of the band: aiming at the
band filled the large rack's first brokers towards a level the rack as a whole cannot hold, and the driver's finish
then spent its 2,000 moves undoing it (issue 27: 21.6 TB for 0.666-1.500 x mean, now 20.3 TB for 0.716-1.379, the
bound, in 26 s instead of 62).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from kpo.planning.spark.balance import Aim, Band, Quotas, aim, band, level_where, water_fill
from kpo.planning.spark.cluster import Cluster


@dataclass(frozen=True)
class BrokerStats:
    """One broker's replicas as a round sees them (``broker`` None collects replicas still to be created)."""

    broker: int | None
    bytes: int = 0
    replicas: int = 0
    leaders: int = 0
    movable_bytes: int = 0
    movable_replicas: int = 0
    forced_bytes: int = 0
    forced_replicas: int = 0


def with_deltas(stats: Mapping[int | None, BrokerStats], deltas: Mapping[int | None, BrokerStats],
                ) -> dict[int | None, BrokerStats]:
    """The per-broker sums after a round, from the sums before and the round's changes."""
    out = dict(stats)
    for b, d in deltas.items():
        s = out.get(b, BrokerStats(broker=b))
        out[b] = BrokerStats(broker=b, **{name: getattr(s, name) + getattr(d, name) for name in STAT_FIELDS})
    return out


STAT_FIELDS = ("bytes", "replicas", "leaders", "movable_bytes", "movable_replicas", "forced_bytes", "forced_replicas")


@dataclass(frozen=True)
class RoundPlan:
    """What Spark acts on in one round. Quotas are in the round's unit: bytes, or replicas for a count round."""

    unit: str  # "bytes" | "replicas"
    out: dict[int, float] = field(default_factory=dict)
    into: dict[int, float] = field(default_factory=dict)
    # The average size a sender's movers should have, so that it meets its byte and its count quota together.
    mover_size: dict[int, float] = field(default_factory=dict)
    forced: int = 0

    @property
    def idle(self) -> bool:
        return not self.out and not self.into and self.forced == 0


def _domain_groups(cluster: Cluster, closed: bool) -> list[frozenset[int]]:
    """Brokers that balance among themselves: every eligible broker, or one rack at a time when no partition can
    change rack (every partition of the request holds a replica in every rack)."""
    if not closed:
        return [cluster.eligible]
    return [frozenset(bs) for bs in cluster.domains.values()]


def decide_bytes(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float, *, closed: bool,
                 forced_by_domain: Mapping[int, float] | None = None, broad: bool = False,
                 levels: Mapping[int, float] | None = None) -> RoundPlan:
    """Byte quotas for a round. ``broad`` opens every broker with room below the top of the inner band as a
    receiver (for the full room), for when the most even receivers share too many partitions with the senders.
    ``levels`` are the racks' most even levels per broker (:func:`kpo.planning.spark.quality.rack_levels`): where
    they lie outside the band, the quotas aim at them instead, so that no round moves bytes towards a band the
    racks keep out of reach (bytes a later round would have to move back)."""
    eligible = cluster.eligible
    forced_total = sum(s.forced_bytes for s in stats.values())
    kept = {b: float(stats[b].bytes - stats[b].forced_bytes) if b in stats else 0.0 for b in eligible}
    total = sum(kept.values()) + forced_total
    real = band(total, len(eligible), tolerance)
    placed = [s for b, s in stats.items() if b in eligible and s.replicas]
    average = sum(s.bytes for s in placed) / max(1, sum(s.replicas for s in placed))
    inner = real.narrowed(average / 2)
    counts = count_quotas(stats, cluster, tolerance)
    out: dict[int, float] = {}
    into: dict[int, float] = {}
    for group in _domain_groups(cluster, closed):
        forced_here = forced_total if not closed else float((forced_by_domain or {}).get(
            cluster.domain_of[next(iter(group))], 0.0))
        movable = {b: float(stats[b].movable_bytes) if b in stats else 0.0 for b in group}
        q = water_fill({b: kept[b] for b in group}, forced=forced_here, real=real, inner=inner, movable=movable,
                       levels=levels)
        out |= q.out
        into |= q.into
        if broad and q.out:
            room = {b: min(inner.hi, aim(real, inner, (levels or {}).get(b)).rise_to) for b in group}
            into |= {b: room[b] - kept[b] for b in group if b not in q.out and kept[b] < room[b]}
    sizes = {b: _mover_size(stats[b], q_out, counts) for b, q_out in out.items() if b in stats}
    return RoundPlan(unit="bytes", out=_positive(out), into=_positive(into), mover_size=sizes,
                     forced=sum(s.forced_replicas for s in stats.values()))


def count_quotas(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float) -> tuple[Band, dict[
        int, int]]:
    counts = {b: stats[b].replicas - stats[b].forced_replicas if b in stats else 0 for b in cluster.eligible}
    total = sum(counts.values()) + sum(s.forced_replicas for s in stats.values())
    return band(total, len(cluster.eligible), tolerance, integral=True), counts


def _mover_size(s: BrokerStats, quota: float, counts: tuple[Band, dict[int, int]]) -> float:
    """The average size a sender's movers should have: its own average replica, unless that would push its replica
    count out of the count band, in which case fewer larger (or more smaller) replicas carry the same bytes."""
    count_band, kept = counts
    own = s.movable_bytes / s.movable_replicas if s.movable_replicas else quota
    c = kept.get(s.broker, 0) if s.broker is not None else 0
    fewest = max(0.0, c - count_band.hi)
    most = max(fewest, c - count_band.lo)
    wanted = min(max(quota / own if own > 0 else 1.0, fewest), most)
    return quota / max(1.0, wanted)


def decide_counts(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float) -> RoundPlan:
    """A replica-count round: only when a broker's count is outside its band after the byte rounds. It moves the
    smallest replicas, and only between brokers whose bytes have room for it (a receiver not near the top of the
    byte band, a sender not near its bottom), so that fixing counts does not break the byte balance."""
    count_band, counts = count_quotas(stats, cluster, tolerance)
    if all(count_band.holds(c) for c in counts.values()):
        return RoundPlan(unit="replicas")
    loads = {b: float(stats[b].bytes) if b in stats else 0.0 for b in counts}
    placed = [s for b, s in stats.items() if b in counts and s.replicas]
    average = sum(s.bytes for s in placed) / max(1, sum(s.replicas for s in placed))
    bytes_band = band(sum(loads.values()), len(loads), tolerance)
    movable = {b: float(stats[b].movable_replicas) if b in stats else 0.0 for b in counts}
    inner = count_band.narrowed(max(1.0, math.floor(tolerance * count_band.mean / 5)))
    q = water_fill({b: float(c) for b, c in counts.items()}, forced=0.0, real=count_band, inner=inner,
                   movable=movable)
    out = {b: n for b, n in q.out.items() if loads[b] >= bytes_band.lo}
    into = {b: n for b, n in q.into.items() if loads[b] <= bytes_band.hi - average}
    return RoundPlan(unit="replicas", out=_whole(out, up=False), into=_whole(into, up=True))


def _byte_aims(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float,
               levels: Mapping[int, float] | None) -> tuple[dict[int, float], dict[int, Aim]]:
    """Each broker's bytes and its aim: the band, or its rack's level where the racks keep the band out of reach."""
    loads = {b: float(stats[b].bytes) if b in stats else 0.0 for b in cluster.eligible}
    placed = [s for b, s in stats.items() if b in cluster.eligible and s.replicas]
    average = sum(s.bytes for s in placed) / max(1, sum(s.replicas for s in placed))
    real = band(sum(loads.values()), len(loads), tolerance)
    inner = real.narrowed(average / 2)
    return loads, {b: aim(real, inner, (levels or {}).get(b)) for b in loads}


def decide_lift(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float, *,
                closed: bool, exhausted: Collection[int] = (), levels: Mapping[int, float] | None = None,
                ) -> RoundPlan:
    """A round for brokers left below the band when the byte rounds stopped: they are filled by the brokers above
    the mean, those inside the band too, each giving down to a common level (never below the mean). The byte rounds
    fill them only from brokers above the band, whose replicas may have nowhere to go (a rack they cannot leave).
    ``exhausted`` brokers gave little in an earlier lift and are not asked again. ``levels``: as for
    :func:`decide_bytes` (a broker at the most its rack can hold is not below its band)."""
    loads, aims = _byte_aims(stats, cluster, tolerance, levels)
    counts = count_quotas(stats, cluster, tolerance)
    out: dict[int, float] = {}
    into: dict[int, float] = {}
    for group in _domain_groups(cluster, closed):
        low = {b: aims[b].inner.lo - loads[b] for b in group if loads[b] < aims[b].real.lo}
        mean = sum(loads[b] for b in group) / len(group)
        givers = {b: loads[b] for b in group if loads[b] > mean and b not in low and b not in exhausted}
        if not low or not givers:
            continue
        cap = {b: float(stats[b].movable_bytes) if b in stats else 0.0 for b in givers}

        def shed_at(level: float, givers: dict[int, float] = givers, cap: dict[int, float] = cap) -> float:
            return sum(min(cap[b], max(0.0, x - level)) for b, x in givers.items())

        level = max(mean, level_where(shed_at, sum(low.values()), rising=False))
        out |= {b: min(cap[b], x - level) for b, x in givers.items() if x > level}
        into |= low
    sizes = {b: _mover_size(stats[b], q, counts) for b, q in out.items() if b in stats}
    return RoundPlan(unit="bytes", out=_positive(out), into=_positive(into), mover_size=sizes)


def decide_relieve(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float, *,
                   levels: Mapping[int, float] | None = None) -> RoundPlan:
    """A round for brokers left above the band when the byte rounds stopped: they shed to every broker with room
    below the top of the band, and to the brokers of their own rack even above it, up to half the gap between the
    two. A replica bound to its rack (its partition has one in every rack) can only go there, and evening out the
    rack lowers the worst broker even where the band cannot be reached. ``levels``: as for :func:`decide_bytes`."""
    loads, aims = _byte_aims(stats, cluster, tolerance, levels)
    high = {b: min(float(stats[b].movable_bytes), x - aims[b].inner.hi) for b, x in loads.items()
            if x > aims[b].real.hi and b in stats}
    out = _positive(high)
    if not out:
        return RoundPlan(unit="bytes")
    room = {b: min(a.real.hi, a.rise_to) for b, a in aims.items()}
    into = {b: room[b] - x for b, x in loads.items() if b not in out and x < room[b]}
    if cluster.rack_mode:
        for members in cluster.domains.values():
            senders = [b for b in members if b in out]
            if not senders:
                continue
            top = max(senders, key=lambda b: loads[b])
            for b in members:
                if b != top and loads[b] < loads[top]:
                    # Below the rack's fullest sender: it takes from it instead of sending itself (both above the
                    # band, the lower one would otherwise never help the higher one down).
                    out.pop(b, None)
                    into[b] = max(into.get(b, 0.0), min((loads[top] - loads[b]) / 2, aims[b].rise_to - loads[b]))
    counts = count_quotas(stats, cluster, tolerance)
    sizes = {b: _mover_size(stats[b], q, counts) for b, q in out.items()}
    return RoundPlan(unit="bytes", out=out, into=_positive(into), mover_size=sizes)


def decide_leaders(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float) -> Quotas:
    """Leaders to hand over (``out``) and take (``into``) per broker, as whole numbers."""
    leaders = {b: float(stats[b].leaders) if b in stats else 0.0 for b in cluster.eligible}
    edges = band(sum(leaders.values()), len(leaders), tolerance, integral=True)
    if all(edges.holds(c) for c in leaders.values()):
        return Quotas()
    # Aim at the mean, not the band's edge: leaders move no data, and the slack lets brokers inside the band pass
    # leadership on between brokers that share no partition.
    middle = Band(edges.mean, math.floor(edges.mean), math.ceil(edges.mean))
    q = water_fill(leaders, forced=0.0, real=edges, inner=middle)
    return Quotas(out=_whole(q.out, up=False), into=_whole(q.into, up=True))


def _positive(quotas: dict[int, float]) -> dict[int, float]:
    return {b: q for b, q in quotas.items() if q > 0.5}


def _whole(quotas: dict[int, float], *, up: bool) -> dict[int, float]:
    """Whole counts: senders give what they must (rounded), receivers may take up to the next whole number, which
    never lifts them past an integral band's top."""
    out = {b: float(math.ceil(q - 1e-9) if up else round(q)) for b, q in quotas.items()}
    return {b: q for b, q in out.items() if q >= 1}
