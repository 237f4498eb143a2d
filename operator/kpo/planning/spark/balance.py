"""Broker-level arithmetic of a plan: the allowed band, the movement lower bound and the per-broker quotas.

Everything here works on per-broker totals (a few hundred numbers at most), never on partitions, so it runs on the
driver in plain Python and is unit-tested without Spark. The partition-level work that follows from these numbers is
in :mod:`kpo.planning.spark.moves`.

The band. With ``mean`` the load per broker after the change over the brokers that take part, a broker is balanced
when its load lies in ``[mean * (1 - tolerance), mean * (1 + tolerance)]``. Counts (replicas, leaders) are integers:
their band is the whole numbers inside it, widened only when it holds none on one side of the mean (a mean of 2.5
with 5 % tolerance allows 2 and 3).

The lower bound on movement (issue 7). Bytes leave brokers above the band and arrive on brokers below it, so no plan
that ends inside the band moves less than ``LB = max(sum max(0, L_i - hi_i), sum max(0, lo_i - L_i))``, with
``hi_i = 0`` for a removed broker. Two refinements keep it a true lower bound: a broker cannot shed bytes it is not
allowed to move (topics outside the selection), so ``hi_i`` is raised to its fixed bytes; and replicas that must be
created (a replication-factor increase) arrive somewhere without leaving anywhere, so their bytes join the shedding
side: ``LB = max(S + new, D)``.

The quotas ("water filling"). A plan that moves exactly the lower bound sheds from each broker above the band down to
its top edge and fills each broker below the band up to its bottom edge; the larger of the two sides decides the
total, and the other side takes up the difference as evenly as it can: the receivers rise to a common level ``lam``
(or the senders fall to a common level ``mu``). That is both the least movement and, for that movement, the most even
result. The planner aims at a band a little inside the real one (by half an average replica), so that whole replicas,
which never add up exactly to a quota, still land inside.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Band:
    mean: float
    lo: float
    hi: float

    def narrowed(self, margin: float) -> Band:
        """The band ``margin`` inside this one on both sides (never past the mean)."""
        margin = max(0.0, min(margin, (self.hi - self.mean) / 2, (self.mean - self.lo) / 2))
        return Band(self.mean, self.lo + margin, self.hi - margin)

    def holds(self, value: float) -> bool:
        return self.lo - 1e-9 <= value <= self.hi + 1e-9


def band(total: float, brokers: int, tolerance: float, *, integral: bool = False) -> Band:
    if brokers <= 0:
        raise ValueError("no broker takes part in the plan")
    mean = total / brokers
    lo, hi = mean * (1 - tolerance), mean * (1 + tolerance)
    if integral:
        # Whole numbers strictly within the tolerance, widened only as far as needed to hold the mean.
        lo = float(min(math.floor(mean + 1e-9), math.ceil(lo - 1e-9)))
        hi = float(max(math.ceil(mean - 1e-9), math.floor(hi + 1e-9)))
    return Band(mean, lo, hi)


@dataclass(frozen=True)
class BrokerTotals:
    """One broker's load before the change: all of it, and the part the plan may not move (unselected topics)."""

    load: float
    fixed: float = 0.0


def lower_bound(brokers: Mapping[int, BrokerTotals], eligible: frozenset[int], removed: frozenset[int],
                tolerance: float, *, created: float = 0.0, integral: bool = False,
                edges: Callable[[Band], Band] | None = None) -> float:
    """The least movement of any plan that ends inside the band (see the module docstring).

    ``eligible`` are the brokers that take part after the change; ``removed`` must end empty; any other broker keeps
    what it has and takes no part. ``created`` is the load of replicas that must be created. ``edges`` turns the
    band of these brokers into the one the bound is for (a band widened to what a plan reached, or to a rack's own
    mean).
    """
    movable_from_removed = sum(brokers[b].load - brokers[b].fixed for b in removed if b in brokers)
    total = sum(brokers[b].load for b in eligible if b in brokers) + movable_from_removed + created
    edges_ = band(total, len(eligible), tolerance, integral=integral)
    if edges is not None:
        edges_ = edges(edges_)
    shed = created + sum(max(0.0, t.load - max(edges_.hi, t.fixed)) for b, t in brokers.items() if b in eligible)
    shed += movable_from_removed
    fill = sum(max(0.0, edges_.lo - brokers.get(b, BrokerTotals(0.0)).load) for b in eligible)
    return max(shed, fill)


def widened(lo: float, hi: float) -> Callable[[Band], Band]:
    """A band widened to hold ``[lo, hi]`` (relative to its mean): the bound for a plan at least that even."""
    return lambda b: Band(b.mean, min(b.lo, lo * b.mean), max(b.hi, hi * b.mean))


@dataclass(frozen=True)
class Quotas:
    """How much each broker should send (``out``) and receive (``into``) in one round; both sides in load units."""

    out: dict[int, float] = field(default_factory=dict)
    into: dict[int, float] = field(default_factory=dict)

    @property
    def total_out(self) -> float:
        return sum(self.out.values())

    @property
    def total_in(self) -> float:
        return sum(self.into.values())


@dataclass(frozen=True)
class Aim:
    """Where one broker's load should end in a round: its band (``real``), the band the quotas aim at (``inner``),
    and how far it may usefully rise (``rise_to``) or fall (``fall_to``) when the spread of the totals needs it."""

    real: Band
    inner: Band
    rise_to: float = math.inf
    fall_to: float = -math.inf


def aim(real: Band, inner: Band, level: float | None = None) -> Aim:
    """A broker's aim given ``level``, its rack's most even level (:func:`even_levels`).

    - A level inside the inner band changes nothing: the band as it is.
    - A level inside the band but not the inner band stretches the inner band to it on that side: the rack can hold
      no more (or must hold no less) than that, and the band is still in reach.
    - A level outside the band: the rack cannot be inside the band, and its brokers aim at the level itself (within
      a hundredth of the tolerance), from both sides: one broker of a rack above it means another below it, and a rack
      filled to the most it can hold lifts its lowest broker only if its brokers end even.
    """
    if level is None or inner.lo <= level <= inner.hi:
        return Aim(real, inner)
    if real.lo <= level < inner.lo:
        return Aim(real, Band(inner.mean, level, inner.hi), rise_to=level)
    if inner.hi < level <= real.hi:
        return Aim(real, Band(inner.mean, inner.lo, level), fall_to=level)
    slack = (real.hi - real.mean) / 100
    return Aim(Band(real.mean, level - slack, level + slack), Band(inner.mean, level, level), rise_to=level,
               fall_to=level)


def water_fill(loads: Mapping[int, float], *, forced: float, real: Band, inner: Band,
               movable: Mapping[int, float] | None = None, levels: Mapping[int, float] | None = None) -> Quotas:
    """Per-broker quotas that bring every broker of ``loads`` inside ``real`` while moving the least.

    ``loads`` are the brokers that take part, without the load that must move anyway (``forced``: replicas on removed
    brokers, replicas to create), which has to be received on top. Brokers outside ``real`` are brought to ``inner``;
    brokers already inside ``real`` only help when the other side needs it. ``movable`` caps what a broker can send.
    ``levels`` are the racks' even levels per broker where the racks keep the band out of reach (:func:`aim`).
    """
    if not loads:
        return Quotas()
    cap = {b: (movable[b] if movable is not None else x) for b, x in loads.items()}
    aims = {b: aim(real, inner, (levels or {}).get(b)) for b in loads}
    total = sum(loads.values()) + forced
    n = len(loads)
    # A band the totals cannot fit (one rack of a rack-bound cluster, say) is widened to what is possible. The
    # racks' levels are what is possible already: they are for the whole cluster, whose mean is inside the band.
    top = {b: a.inner.hi if levels else max(a.inner.hi, total / n) for b, a in aims.items()}
    bottom = {b: a.inner.lo if levels else min(a.inner.lo, total / n) for b, a in aims.items()}
    shed = {b: min(cap[b], x - top[b]) for b, x in loads.items() if x > aims[b].real.hi and x > top[b]}
    fill = {b: bottom[b] - x for b, x in loads.items() if x < aims[b].real.lo and x < bottom[b]}
    need_out, need_in = sum(shed.values()), sum(fill.values())
    if need_out == 0 and need_in == 0 and forced == 0:
        return Quotas()
    if need_out + forced >= need_in:
        takers = {b: x for b, x in loads.items() if b not in shed}

        def taken_at(level: float) -> float:
            return sum(max(0.0, min(level, aims[b].rise_to) - x) for b, x in takers.items())

        lam = level_where(taken_at, need_out + forced, rising=True)
        into = {b: min(lam, aims[b].rise_to) - x for b, x in takers.items() if min(lam, aims[b].rise_to) > x}
        return Quotas(out={b: q for b, q in shed.items() if q > 0}, into=into)
    givers = {b: x for b, x in loads.items() if b not in fill}
    target = need_in - forced

    def shed_at(level: float) -> float:
        return sum(min(cap[b], max(0.0, x - max(level, aims[b].fall_to))) for b, x in givers.items())

    mu = level_where(shed_at, target, rising=False)
    out = {b: min(cap[b], x - max(mu, aims[b].fall_to)) for b, x in givers.items()
           if x > max(mu, aims[b].fall_to) and cap[b] > 0}
    return Quotas(out=out, into=fill)


def level_where(amount: Callable[[float], float], target: float, *, rising: bool) -> float:
    """Where the monotone ``amount(level)`` reaches ``target``: the lowest such level when ``amount`` rises with the
    level, the highest when it falls. Bisection: the inputs are a few hundred brokers."""

    def reached(level: float) -> bool:
        return amount(level) >= target

    outer = 1.0  # a level on the side where the target is reached
    while not reached(outer if rising else -outer) and outer < 1e300:
        outer *= 2
    inner = 1.0  # a level on the side where it is not
    while reached(-inner if rising else inner) and inner < 1e300:
        inner *= 2
    yes, no = (outer, -inner) if rising else (-outer, inner)
    for _ in range(200):
        mid = (yes + no) / 2
        if reached(mid):
            yes = mid
        else:
            no = mid
    return yes


def max_over_mean(values: Sequence[float]) -> float:
    if not values:
        return 1.0
    mean = sum(values) / len(values)
    return max(values) / mean if mean > 0 else 1.0


@dataclass(frozen=True)
class Limit:
    """One side of what no plan can beat, relative to the mean: a value and what sets it."""

    value: float
    because: str


@dataclass(frozen=True)
class Reach:
    """How even any valid plan can be, relative to the mean load of the brokers taking part: the lowest broker ends
    at most at ``lowest`` x mean, the highest at least at ``highest`` x mean. These are bounds, not promises: a plan
    that meets both is as even as any plan can be at both ends; one that does not may or may not be improvable."""

    lowest: Limit
    highest: Limit

    def met_by(self, low: float, high: float, tolerance: float) -> bool:
        """Whether a plan ending at ``low`` .. ``high`` x mean is as close to the band as the bound lets any plan be:
        each end inside the band or at the bound."""
        return (low >= min(1 - tolerance, self.lowest.value) - REACH_SLACK
                and high <= max(1 + tolerance, self.highest.value) + REACH_SLACK)


# Relative slack for "meets the bound": the loads are whole bytes and the bound a float, nothing more.
REACH_SLACK = 1e-6


@dataclass(frozen=True)
class DomainLimits:
    """What one placement domain (a rack, or a broker without racks) must and can hold over its eligible brokers:
    ``floor`` the least any valid plan leaves there (its replicas outside the selection, and the share of every
    selected partition the racks' even spread requires of it), ``ceiling`` the most (one replica of a partition per
    rack, or the ceiling share when a partition has more replicas than there are racks)."""

    name: str
    brokers: int
    floor: float
    ceiling: float


def reach(mean: float, domains: Sequence[DomainLimits], fixed: Mapping[int, float], largest: float,
          *, largest_copies: int = 1, brokers: int = 0) -> Reach:
    """The bound of :class:`Reach` from what every plan must respect.

    - Some broker of a domain holds at least the domain's average, and the domains hold the total together, each
      between its ``floor`` and ``ceiling``: the highest broker is at least the highest of the domains' most even
      levels (:func:`even_levels`), the lowest at most the lowest of them.
    - A partition's replica sits whole on one broker: the highest broker holds at least the largest partition that
      stays on the brokers taking part (``largest``).
    - A broker keeps its replicas outside the selection (``fixed``): the highest holds at least the largest of those.
    - The ``largest_copies`` brokers holding the largest partition hold at least ``largest`` each, so the other
      ``brokers - largest_copies`` brokers share at most what is left of the total: the lowest is at most that share.
    - And the lowest is never above the mean, the highest never below it.
    """
    if mean <= 0:
        return Reach(Limit(1.0, "nothing to balance"), Limit(1.0, "nothing to balance"))
    high = Limit(1.0, "the mean")
    low = Limit(1.0, "the mean")
    if largest / mean > high.value:
        high = Limit(largest / mean, f"the largest partition alone is {largest / mean:.3f} x mean")
    if brokers > largest_copies >= 1 and largest > mean:
        rest = (brokers * mean - largest_copies * largest) / (brokers - largest_copies) / mean
        if rest < low.value:
            low = Limit(max(0.0, rest), f"the {largest_copies} brokers holding the largest partition leave the "
                                        f"{brokers - largest_copies} others {max(0.0, rest):.3f} x mean each at most")
    if fixed:
        broker, kept = max(fixed.items(), key=lambda item: (item[1], -item[0]))
        if kept / mean > high.value:
            high = Limit(kept / mean, f"broker {broker} keeps {kept / mean:.3f} x mean of replicas outside the "
                                      "selection")
    counted = [d for d in domains if d.brokers > 0]
    levels = even_levels(counted, mean * sum(d.brokers for d in counted))
    for d, level in zip(counted, levels, strict=True):
        share = level / mean
        if share > high.value:
            high = Limit(share, _held(d, share, d.floor / d.brokers / mean >= share - REACH_SLACK, must=True))
        if share < low.value:
            low = Limit(share, _held(d, share, d.ceiling / d.brokers / mean <= share + REACH_SLACK, must=False))
    return Reach(lowest=low, highest=high)


def _held(d: DomainLimits, share: float, own: bool, *, must: bool) -> str:
    """Why a domain's even level is what it is: its own floor or ceiling, or what the other domains leave it."""
    if own and must:
        return (f"{d.name} ({d.brokers} brokers) must hold {share:.3f} x mean per broker (its share of every "
                "partition, racks kept)")
    if own:
        return (f"{d.name} ({d.brokers} brokers) can hold at most {share:.3f} x mean per broker (its share of every "
                "partition, racks kept)")
    if must:
        return (f"{d.name} ({d.brokers} brokers) holds at least {share:.3f} x mean per broker: the racks that can "
                "hold no more of every partition leave it the rest")
    return (f"{d.name} ({d.brokers} brokers) holds at most {share:.3f} x mean per broker: the racks that must hold "
            "more of every partition leave it no more")


def even_levels(domains: Sequence[DomainLimits], total: float) -> list[float]:
    """The most even load per broker each domain can have, in the order of ``domains``: every domain at one common
    level per broker, clamped to what it must and can hold (``floor`` and ``ceiling``), the level chosen so that the
    domains hold ``total`` together. A domain's load can be anything between its floor and ceiling for all these
    limits know, so no plan has a highest broker below the highest of these levels, or a lowest above the lowest:
    some broker of a domain holds at least its average. (Racks of 8, 4 and 2 brokers with RF 2 and 3: the 8 brokers
    can hold at most one replica of every partition, and the 4 and the 2 then share the rest evenly, above what the
    2 must hold alone.)"""
    if not domains:
        return []

    def held_at(level: float) -> float:
        return sum(min(max(level * d.brokers, d.floor), d.ceiling) for d in domains)

    common = level_where(held_at, total, rising=True)
    return [min(max(common * d.brokers, d.floor), d.ceiling) / d.brokers for d in domains]
