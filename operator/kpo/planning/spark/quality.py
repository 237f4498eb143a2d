"""What a plan costs and achieves, measured the same way for kpo's plan and for any other assignment.

``original`` is the snapshot, ``replicas`` the target. Two passes over the state measure everything: one sums bytes,
replicas and leaders per broker before and after, the other counts what changes and what breaks a rule. The bench
scores Kafka's own placer with these same functions, so both sides of its table are measured alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kpo.domain.plan_contract import Balance, BrokerLoad
from kpo.planning.spark.balance import (
    Band,
    BrokerTotals,
    DomainLimits,
    Reach,
    band,
    even_levels,
    lower_bound,
    max_over_mean,
    reach,
    widened,
)
from kpo.planning.spark.cluster import Cluster
from kpo.planning.spark.exprs import int_array, table
from kpo.planning.spark.exprs import members as id_set
from kpo.planning.spark.rounds import BrokerStats


def broker_loads(state: DataFrame, cluster: Cluster) -> tuple[tuple[BrokerLoad, ...], tuple[BrokerLoad, ...]]:
    """Bytes, replicas and leaders per broker before (``original``) and after (``replicas``), every known broker."""
    sides = F.array(F.struct(F.lit(0).alias("after"), F.col("original").alias("list")),
                    F.struct(F.lit(1).alias("after"), F.col("replicas").alias("list")))
    rows = (state.select("size", F.inline(sides)).select("size", "after", F.posexplode("list").alias("slot", "broker"))
            .filter(F.col("broker").isNotNull())
            .groupBy("after", "broker").agg(F.sum("size").alias("bytes"), F.count(F.lit(1)).alias("replicas"),
                                            F.sum(F.when(F.col("slot") == 0, 1).otherwise(0)).alias("leaders"))
            .collect())
    found: list[dict[int, BrokerLoad]] = [{}, {}]
    for r in rows:
        found[r["after"]][int(r["broker"])] = BrokerLoad(broker=int(r["broker"]), bytes=int(r["bytes"]),
                                                          replicas=int(r["replicas"]), leaders=int(r["leaders"]))
    for side in found:
        for b in cluster.racks:
            side.setdefault(b, BrokerLoad(broker=b, bytes=0, replicas=0, leaders=0))
    before, after = (tuple(side[b] for b in sorted(side)) for side in found)
    return before, after


def balance(loads: tuple[BrokerLoad, ...], cluster: Cluster) -> Balance:
    taking_part = [b for b in loads if b.broker in cluster.eligible]
    sizes = [b.bytes for b in taking_part]
    mean = sum(sizes) / len(sizes) if sizes else 0.0
    return Balance(bytes=max_over_mean(sizes),
                   replicas=max_over_mean([b.replicas for b in taking_part]),
                   leaders=max_over_mean([b.leaders for b in taking_part]),
                   bytes_min=round(min(sizes) / mean, 4) if mean else 1.0)


def band_report(loads: tuple[BrokerLoad, ...], cluster: Cluster, tolerance: float, bound: Reach | None = None,
                stopped: str = "") -> tuple[bool | None, str]:
    """Whether the brokers taking part end within ``tolerance`` of their mean bytes, and if not, which do not and
    what can be said of it: that no plan does better, only when ``bound`` (:func:`reach_of`) shows it; otherwise how
    far the plan is from the bound and why it stopped (``stopped``, from the planner; empty for an assignment scored
    as given)."""
    if not cluster.balancing:
        return None, ""
    taking_part = [b for b in loads if b.broker in cluster.eligible]
    mean = sum(b.bytes for b in taking_part) / len(taking_part) if taking_part else 0.0
    if not mean:
        return True, ""
    outside = sorted((b for b in taking_part if abs(b.bytes - mean) > tolerance * mean + 1e-9),
                     key=lambda b: -abs(b.bytes - mean))
    if not outside:
        return True, ""
    shown = ", ".join(f"broker {b.broker} at {b.bytes / mean:.2f} x mean" for b in outside[:5])
    more = f" and {len(outside) - 5} more" if len(outside) > 5 else ""
    head = f"the band of +-{tolerance:.0%} around the mean bytes was not reached: {shown}{more}"
    if bound is None:
        return False, f"{head}; no bound on what a plan can reach was computed, so a better plan may exist"
    low = min(b.bytes for b in taking_part) / mean
    high = max(b.bytes for b in taking_part) / mean
    if bound.met_by(low, high, tolerance):
        return False, f"{head}; no plan can do better: {_proof(bound, tolerance)}"
    gaps = []
    if low < min(1 - tolerance, bound.lowest.value) - 1e-6:
        best = min(1 - tolerance, bound.lowest.value)
        at, allows = _apart(low, best)
        gaps.append(f"the lowest broker is at {at} x mean where the bound allows {allows}")
    if high > max(1 + tolerance, bound.highest.value) + 1e-6:
        best = max(1 + tolerance, bound.highest.value)
        at, allows = _apart(high, best)
        gaps.append(f"the highest is at {at} x mean where the bound allows {allows}")
    why = f"; the planner stopped because {stopped}" if stopped else ""
    return False, f"{head}; a better plan may exist: {' and '.join(gaps)} ({_limits(bound)}){why}"


def _apart(value: float, bound: float) -> tuple[str, str]:
    """Both figures with as many decimals (3 to 6) as it takes for them to read differently: a gap of 0.0001 x mean
    shown as "1.151 where the bound allows 1.151" reads as a contradiction."""
    for places in range(3, 7):
        shown = f"{value:.{places}f}", f"{bound:.{places}f}"
        if shown[0] != shown[1]:
            return shown
    return shown


def _proof(bound: Reach, tolerance: float) -> str:
    """The sides of the bound that keep the band out of reach, as the plan meets them."""
    parts = []
    if bound.highest.value > 1 + tolerance:
        parts.append(f"no broker can end below {bound.highest.value:.3f} x mean at the top ({bound.highest.because})")
    if bound.lowest.value < 1 - tolerance:
        parts.append(f"none above {bound.lowest.value:.3f} x mean at the bottom ({bound.lowest.because})")
    return "; ".join(parts) + "; this plan reaches that bound"


def _limits(bound: Reach) -> str:
    return (f"bound: lowest at most {bound.lowest.value:.3f} x mean, {bound.lowest.because}; highest at least "
            f"{bound.highest.value:.3f} x mean, {bound.highest.because}")


def reach_of(state: DataFrame, cluster: Cluster, initial: Mapping[int | None, BrokerStats],
             after: tuple[BrokerLoad, ...]) -> Reach:
    """The bound of :func:`kpo.planning.spark.balance.reach` for this state (``initial``: the per-broker sums before any
    move, for each broker's bytes outside the selection; ``after``: the loads, for the mean)."""
    fixed = _fixed(initial, cluster)
    taking_part = [b.bytes for b in after if b.broker in cluster.eligible]
    mean = sum(taking_part) / len(taking_part) if taking_part else 0.0
    limits, largest, copies = domain_limits(state, cluster, fixed)
    return reach(mean, list(limits.values()), fixed, largest, largest_copies=copies, brokers=len(cluster.eligible))


def _fixed(stats: Mapping[int | None, BrokerStats], cluster: Cluster) -> dict[int, float]:
    """Each broker's bytes the plan may not move (partitions outside the selection)."""
    return {b: float(s.bytes - s.movable_bytes - s.forced_bytes) for b, s in stats.items()
            if b is not None and b in cluster.eligible}


def rack_levels(state: DataFrame, cluster: Cluster, stats: Mapping[int | None, BrokerStats]) -> dict[int, float]:
    """Each broker's most even load as its rack allows (:func:`kpo.planning.spark.balance.even_levels`), in bytes,
    for the rounds to aim at where the racks keep the band out of reach; empty where they cannot: without racks,
    and with racks of one size holding no bytes outside the selection (every rack then has the same limits)."""
    fixed = _fixed(stats, cluster)
    if not cluster.rack_mode or (len({len(bs) for bs in cluster.domains.values()}) == 1
                                 and not any(x > 0 for x in fixed.values())):
        return {}
    # What the brokers taking part hold once the plan is done: theirs, and what must come to them (replicas on
    # removed brokers, replicas to create).
    total = sum(float(s.bytes) for b, s in stats.items() if b in cluster.eligible) + sum(
        float(s.forced_bytes) for b, s in stats.items() if b not in cluster.eligible)
    limits, _, _ = domain_limits(state, cluster, fixed)
    levels = dict(zip(limits, even_levels(list(limits.values()), total), strict=True))
    return {b: levels[d] for d, bs in cluster.domains.items() for b in bs}


def domain_limits(state: DataFrame, cluster: Cluster, fixed: Mapping[int, float],
                  ) -> tuple[dict[int, DomainLimits], float, int]:
    """Each domain's floor and ceiling (:class:`kpo.planning.spark.balance.DomainLimits`), the largest selected
    partition that stays on the brokers taking part and how many of its replicas do. One pass over the partitions
    sums the selected partitions' bytes by replication factor and by the domains of their replicas kept on brokers
    that take no part and are not removed (such a replica holds part of its rack's share, which the rack's eligible
    brokers then need not hold)."""
    eligible = id_set(cluster.eligible)
    removed = id_set(cluster.removed)
    domain = table(cluster.domain_of, "int")
    kept = F.filter("original", lambda b: b.isNotNull() & ~eligible.has(b) & ~removed.has(b))
    rows = (state.filter("selected")
            .groupBy(F.size("replicas").alias("rf"), F.array_sort(F.transform(kept, lambda b: domain[b])).alias("kept"))
            .agg(F.sum("size").alias("bytes"),
                 F.max(F.when(F.exists("replicas", eligible.has), F.col("size"))).alias("largest"))
            .collect())
    domains = cluster.domains
    spread = len(domains)
    names = sorted({r for r in cluster.racks.values() if r is not None})
    floor = {d: sum(fixed.get(b, 0.0) for b in bs) for d, bs in domains.items()}
    ceiling = dict(floor)
    largest, copies = 0.0, 1
    for r in rows:
        rf, size = int(r["rf"]), float(r["bytes"] or 0)
        held = list(r["kept"] or [])
        if float(r["largest"] or 0) > largest:
            largest, copies = float(r["largest"]), max(1, rf - len(held))
        for d, bs in domains.items():
            # A replica kept on a broker of this domain that takes no part holds part of the domain's share.
            elsewhere = held.count(d)
            ceiling[d] += size * max(0, min(-(-rf // spread), len(bs)) - elsewhere)
            floor[d] += size * max(0, min(rf // spread, len(bs)) - elsewhere)
    limits = {d: DomainLimits(name=f"rack {names[d]}" if cluster.rack_mode else f"broker {d}", brokers=len(bs),
                              floor=floor[d], ceiling=ceiling[d]) for d, bs in domains.items()}
    return limits, largest, copies


def _crowded(column: str, cluster: Cluster, *, after: bool) -> Column:
    """A partition whose replicas share a rack although there are enough racks to avoid it: racks of alive brokers
    before the change, and after it without the brokers being removed (a rack that is going away entirely leaves
    fewer racks to spread over, which is no violation of the plan's)."""
    names = sorted({r for r in cluster.racks.values() if r is not None})
    index = {b: names.index(r) for b, r in cluster.racks.items() if r is not None}
    staying = cluster.alive - cluster.removed if after else cluster.alive
    racks_alive = len({cluster.racks[b] for b in staying if cluster.racks.get(b) is not None})
    if racks_alive < 2:
        return F.lit(False)
    rack_of = table(index, "int")
    racks = F.transform(column, lambda b: rack_of[b])
    known = F.forall(racks, lambda r: r.isNotNull())
    return known & (F.size(F.array_distinct(racks)) < F.least(F.size(column), F.lit(racks_alive)))


def broken(cluster: Cluster, replication_factor: int | None) -> Column:
    """A target that breaks a hard constraint: a broker twice, an unplaced replica, a selected replica left on a
    removed broker, or the wrong replication factor."""
    removed = int_array(sorted(cluster.removed))
    bad = ((F.size(F.array_distinct("replicas")) != F.size("replicas"))
           | F.exists("replicas", lambda b: b.isNull())
           | (F.col("selected") & F.exists("replicas", lambda b: F.array_contains(removed, b))))
    if replication_factor is not None:
        bad = bad | (F.col("selected") & (F.size("replicas") != replication_factor))
    return bad


def counters(state: DataFrame, cluster: Cluster, replication_factor: int | None = None) -> dict[str, int]:
    """Everything that is counted over partitions, in one pass."""
    added = F.size(F.array_except("replicas", "original"))
    removed = int_array(sorted(cluster.removed))

    def count(condition: Column) -> Column:
        return F.sum(F.when(condition, 1).otherwise(0))

    row = state.agg(
        F.count(F.lit(1)).alias("partitions"),
        count(F.col("selected")).alias("partitions_selected"),
        count(F.col("replicas") != F.col("original")).alias("partitions_changed"),
        F.sum(added).alias("replicas_to_move"),
        F.sum(added * F.col("size")).alias("bytes_to_move"),
        count(F.element_at("replicas", 1) != F.element_at("original", 1)).alias("leader_changes"),
        count(_crowded("original", cluster, after=False)).alias("rack_violations_before"),
        count(_crowded("replicas", cluster, after=True)).alias("rack_violations_after"),
        # All topics: what a selection left out stays on the removed brokers, and the user must see it.
        F.sum(F.size(F.array_intersect("replicas", removed))).alias("replicas_left_on_removed_brokers"),
        count(broken(cluster, replication_factor)).alias("broken"),
    ).first()
    assert row is not None
    return {k: int(v or 0) for k, v in row.asDict().items()}


@dataclass(frozen=True)
class Spread:
    """The lowest and highest broker relative to the mean, in bytes and in replicas, over the brokers taking part."""

    bytes: tuple[float, float]
    replicas: tuple[float, float]


def spread(loads: tuple[BrokerLoad, ...], cluster: Cluster) -> Spread:
    taking_part = [b for b in loads if b.broker in cluster.eligible]

    def relative(values: list[int]) -> tuple[float, float]:
        mean = sum(values) / len(values) if values else 0.0
        return (min(values) / mean, max(values) / mean) if mean else (1.0, 1.0)

    return Spread(bytes=relative([b.bytes for b in taking_part]), replicas=relative([b.replicas for b in taking_part]))


def _bound(by: dict[int, BrokerTotals], cluster: Cluster, tolerance: float, *, created: float, integral: bool,
           closed: bool, reached: tuple[float, float] | None) -> float:
    """One lower bound. With ``closed`` (every partition in every rack) each rack balances on its own, so the bound is
    the sum of the racks' bounds, each for the band widened to the rack's own mean where that lies outside it."""
    total = (sum(by[b].load for b in cluster.eligible if b in by) + created
             + sum(by[b].load - by[b].fixed for b in cluster.removed if b in by))
    everyone = band(total, len(cluster.eligible), tolerance, integral=integral)
    if reached is not None:
        everyone = widened(*reached)(everyone)
    rackless = any(cluster.domain_of.get(b) not in cluster.domains for b in cluster.removed)
    if not closed or created or rackless:  # a rack going away entirely sends its replicas to other racks
        return lower_bound(by, cluster.eligible, cluster.removed, tolerance, created=created, integral=integral,
                           edges=lambda _: everyone)
    bound = 0.0
    for d, members in cluster.domains.items():
        gone = frozenset(b for b in cluster.removed if cluster.domain_of.get(b) == d)

        def rack_edges(own: Band) -> Band:
            return Band(everyone.mean, min(everyone.lo, own.mean), max(everyone.hi, own.mean))

        bound += lower_bound({b: t for b, t in by.items() if b in members or b in gone}, frozenset(members), gone,
                             tolerance, integral=integral, edges=rack_edges)
    return bound


def lower_bounds(stats: Mapping[int | None, BrokerStats], cluster: Cluster, tolerance: float, *,
                 closed: bool = False, reached: Spread | None = None) -> tuple[int, int]:
    """The movement lower bound in bytes and in replicas, from the state before the first round: for the band, or
    with ``reached`` for the band a plan reached (the least any plan at least as even must move)."""
    placed = {b: s for b, s in stats.items() if b is not None}
    created = stats.get(None, BrokerStats(broker=None))
    if not cluster.balancing:
        # Only what must move moves (new replicas, replicas beyond a rack's share): that is the bound, and the plan.
        return (sum(s.forced_bytes for s in stats.values()), sum(s.forced_replicas for s in stats.values()))
    by_bytes = {b: BrokerTotals(s.bytes, s.bytes - s.movable_bytes - s.forced_bytes) for b, s in placed.items()}
    by_count = {b: BrokerTotals(s.replicas, s.replicas - s.movable_replicas - s.forced_replicas)
                for b, s in placed.items()}
    lb_bytes = _bound(by_bytes, cluster, tolerance, created=created.forced_bytes, integral=False, closed=closed,
                      reached=reached.bytes if reached else None)
    lb_count = _bound(by_count, cluster, tolerance, created=created.forced_replicas, integral=True, closed=closed,
                      reached=reached.replicas if reached else None)
    return round(lb_bytes), round(lb_count)
