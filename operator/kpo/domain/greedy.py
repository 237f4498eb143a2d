"""A plain greedy placement: the planner's reference for what a simple, obvious algorithm reaches on a shape.

Two users, one set of rules. The bench (``bench/planner/greedy.py``) runs it on the planning job's input and scores its
answer beside kpo's plan and Kafka's placer. The planning job runs it as a *candidate* on inputs small enough for the
driver (:mod:`kpo.planning.spark.candidate`): the rounds of :mod:`kpo.planning.spark.plan` work in bulk, quota by quota,
and on some shapes (racks of very different sizes, a heavy tail of partition sizes, one dominant topic) they stop
further from the band, or move more, than this one-replica-at-a-time greedy does (issue 27); the job keeps whichever
plan is better. Pure: values in, values out, no I/O.

The rules, the same facts kpo's planner decides (``kpo.planning.spark.cluster``), in plain Python:

- brokers taking part (*eligible*): alive, not removed (``RemoveBrokers``), among the named ones for a ``Rebalance``
  that names brokers;
- a selected partition with no replica on an alive broker is *offline*: it is left as it is and reported;
- a ``ReplicationFactor`` request adds empty slots (or drops replicas: those on brokers not taking part first, never
  the leader unless it must go, then the most loaded);
- racks, when in force (asked for, every eligible broker has a rack, at least two racks): a partition's replicas are
  spread as evenly as the racks allow, every rack its floor share (``n // racks``, at most the rack's brokers) before
  any rack gets more, none beyond the ceiling share. :class:`Spread` counts how far a replica list is from that;
  a placement or move may never make that count worse;
- *forced* replicas: on a dead or removed broker, an empty slot, or beyond a rack's share. Largest partition first,
  each goes to the least loaded broker that keeps the partition valid;
- balancing (every goal but a ``ReplicationFactor`` change without ``rebalanceExisting``, as in kpo): while some
  eligible broker is outside ``mean * (1 +- tolerance)`` bytes, take the most loaded broker above the mean and move
  its largest movable replica that does not carry either broker past the mean to the least loaded valid broker;
  when none fits, the smallest replica that still narrows the pair's worst deviation. Each move lowers the sum of
  squared deviations, so the loop ends; it ends when every broker is inside the band or no move helps.
- lifting (the planning job's candidate only, :meth:`Greedy.lift`; the bench's reference stays the plain greedy): while
  the lowest broker is below the band, a replica from any heavier broker that may give it one, even from below the
  mean (where racks keep the band out of reach, a large rack's brokers end below it at uneven levels).

:func:`plan` applies the request's rules itself (the bench); :func:`place` starts from facts and replica lists the
planning job has already decided (its selection, offline partitions left out, replication factor applied).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kpo.domain.plan_contract import BrokerInfo, Goal, PlanRequest

Key = tuple[str, int]
# Replicas :meth:`Greedy._frugal_move` tries per broker before it gives way to the plain rule.
FRUGAL_TRIES = 64
Slots = list[int | None]


@dataclass(frozen=True)
class Partition:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    size: int

    @property
    def key(self) -> Key:
        return self.topic, self.partition


@dataclass(frozen=True)
class Setup:
    """What the request means on these brokers (the rules of ``kpo.planning.spark.cluster.Cluster.of``)."""

    alive: frozenset[int]
    eligible: frozenset[int]
    removed: frozenset[int]
    rack_of: Mapping[int, str]  # eligible brokers' racks when racks are in force, else empty
    balancing: bool
    replication_factor: int | None
    tolerance: float
    # Whether replicas on dead brokers must move (the bench's reference drains them). The planning job leaves a dead
    # broker's replicas where they are unless the request removes it, and says so with False; then the replicas on
    # brokers that keep them (taking no part, not removed) stay and count in their rack (``kept_rack_of``), as the
    # job's rounds count them.
    drain_dead: bool = True
    kept_rack_of: Mapping[int, str] = field(default_factory=dict)


def setup(request: PlanRequest, brokers: Iterable[BrokerInfo]) -> Setup:
    known = {b.id: b for b in brokers}
    alive = frozenset(b for b, info in known.items() if info.alive)
    concerned = frozenset(request.brokers)
    removed: frozenset[int] = frozenset()
    if request.goal is Goal.REMOVE_BROKERS:
        removed = concerned
        eligible = alive - removed
    elif request.goal is Goal.REBALANCE and concerned:
        eligible = alive & concerned
    else:
        eligible = alive
    if not eligible:
        raise ValueError("no alive broker is left to hold the replicas")
    racks = {b: known[b].rack for b in eligible}
    in_force = request.rack_aware and all(r is not None for r in racks.values()) and len(set(racks.values())) >= 2
    rack_of = {b: r for b, r in racks.items() if r is not None} if in_force else {}
    balancing = request.goal is not Goal.REPLICATION_FACTOR or request.rebalance_existing
    return Setup(alive=alive, eligible=eligible, removed=removed, rack_of=rack_of, balancing=balancing,
                 replication_factor=request.replication_factor, tolerance=request.tolerance)


def selected(request: PlanRequest, topic: str) -> bool:
    """The request's topic selection (a pattern matches the whole name)."""
    chosen = not request.topics and not request.topic_pattern
    chosen = chosen or topic in request.topics
    chosen = chosen or bool(request.topic_pattern and re.fullmatch(request.topic_pattern, topic))
    return chosen and topic not in request.exclude_topics


def is_offline(replicas: Iterable[int], alive: frozenset[int]) -> bool:
    return not any(b in alive for b in replicas)


class Spread:
    """How far a partition's replicas are from "as evenly as the racks allow" (0: even).

    With ``n`` replicas over ``R`` racks, rack r should hold between ``min(n // R, size_r)`` and
    ``min(ceil(n / R), size_r)`` of them (``size_r``: its eligible brokers). The count is the replicas beyond a rack's
    ceiling plus the replicas missing below a floor that the list's empty slots (``None``) cannot fill any more, plus
    the empty slots that no rack has room for. Replicas on brokers outside the racks (not taking part) are ignored.
    Without racks every list is even.
    """

    def __init__(self, rack_of: Mapping[int, str], kept_rack_of: Mapping[int, str] | None = None) -> None:
        self.sizes: dict[str, int] = {}
        for r in rack_of.values():
            self.sizes[r] = self.sizes.get(r, 0) + 1
        # Brokers that keep their replicas count in their rack (if it takes part) but add no room to it.
        self.rack_of = {b: r for b, r in (kept_rack_of or {}).items() if r in self.sizes} | dict(rack_of)

    def uneven(self, replicas: Sequence[int | None]) -> int:
        if not self.sizes:
            return 0
        n, racks = len(replicas), len(self.sizes)
        counts = dict.fromkeys(self.sizes, 0)
        pending = 0
        for b in replicas:
            if b is None:
                pending += 1
            elif b in self.rack_of:
                counts[self.rack_of[b]] += 1
        low, high = n // racks, -(-n // racks)
        excess = deficit = room = 0
        for r, c in counts.items():
            cap, floor = min(high, self.sizes[r]), min(low, self.sizes[r])
            excess += max(0, c - cap)
            deficit += max(0, floor - c)
            room += max(0, cap - c)
        return excess + max(0, deficit - pending) + max(0, pending - room)


@dataclass
class Result:
    assignment: dict[Key, tuple[int, ...]]  # every partition, changed or not
    offline: tuple[Key, ...]
    moves: int
    unplaced: int  # forced replicas no broker could take (left where they were, or the slot dropped)


class Greedy:
    """The planner's state: replica lists, per-broker bytes, each eligible broker's movable replicas by size.

    ``start`` are the replica lists to start from where they differ from the partitions' own (the planning job's,
    resized to the requested factor, ``None`` for a replica still to create); ``active`` the partitions the plan may
    change, in the order given; ``offline`` the selected ones left out. ``base_load`` is bytes per broker held by
    partitions not given (the planning job's finish hands over only the partitions it may move). ``frugal`` first
    tries, for the broker furthest outside the band, the smallest replica that brings it inside (:meth:`_frugal_move`):
    the finish starts where a few brokers are a little outside, and there the largest replica that fits moves far
    more bytes than needed."""

    def __init__(self, facts: Setup, brokers: Iterable[int], partitions: Iterable[Partition], active: Iterable[Key],
                 *, offline: Iterable[Key] = (), start: Mapping[Key, Sequence[int | None]] | None = None,
                 base_load: Mapping[int, int] | None = None, frugal: bool = False) -> None:
        self.facts = facts
        self.frugal = frugal
        self.spread = Spread(self.facts.rack_of, self.facts.kept_rack_of)
        self.parts: dict[Key, Partition] = {}
        self.slots: dict[Key, Slots] = {}
        self.load: dict[int, int] = dict.fromkeys(brokers, 0) | dict(base_load or {})
        for p in partitions:
            self.parts[p.key] = p
            slots: Slots = list(start[p.key]) if start is not None and p.key in start else list(p.replicas)
            self.slots[p.key] = slots
            for b in slots:
                if b is not None:
                    self.load[b] = self.load.get(b, 0) + p.size
        self.offline: list[Key] = list(offline)
        self.active: list[Key] = list(active)  # selected, not offline: the partitions the plan may change
        self.moves = 0
        self.unplaced = 0
        self._allowed_cache: dict[Key, dict[int, tuple[int, ...]]] = {}

    # -- helpers -------------------------------------------------------------------------------------------------

    def _drop(self, key: Key, index: int) -> None:
        b = self.slots[key][index]
        if b is not None:
            self.load[b] -= self.parts[key].size
        self.slots[key][index] = None

    def _put(self, key: Key, index: int, broker: int) -> None:
        self.slots[key][index] = broker
        self.load[broker] += self.parts[key].size

    def _valid_targets(self, key: Key, index: int) -> list[tuple[int, int, int]]:
        """(unevenness after, load, broker) for every eligible broker slot ``index`` of ``key`` could go to."""
        slots = self.slots[key]
        out = []
        for b in self.facts.eligible:
            if b in slots:
                continue
            trial = list(slots)
            trial[index] = b
            out.append((self.spread.uneven(trial), self.load[b], b))
        return out

    # -- phases --------------------------------------------------------------------------------------------------

    def resize(self) -> None:
        """A ReplicationFactor request: empty slots to fill, or replicas dropped."""
        factor = self.facts.replication_factor
        if factor is None:
            return
        for key in self.active:
            slots = self.slots[key]
            while len(slots) > factor:
                def cost(i: int, slots: Slots = slots) -> tuple[int, int, int]:
                    b = slots[i]
                    assert b is not None
                    return (b in self.facts.eligible, i == 0, -self.load[b])
                drop = min(range(len(slots)), key=cost)
                self._drop(key, drop)
                del slots[drop]
            slots.extend([None] * (factor - len(slots)))

    def free_forced(self) -> None:
        """Empty the slots whose replica must move: not on a broker taking part and dead or removed, or beyond its
        rack's share (the most loaded broker of the crowded rack gives it up)."""
        dead = frozenset(self.load) - self.facts.alive if self.facts.drain_dead else frozenset()
        must_leave = self.facts.removed | dead
        for key in self.active:
            slots = self.slots[key]
            for i, b in enumerate(slots):
                if b is not None and b in must_leave:
                    self._drop(key, i)
            while (now := self.spread.uneven(slots)) > 0:
                better = [(self.load[b], i) for i, b in enumerate(slots)
                          if b is not None and (self.facts.drain_dead or b in self.facts.eligible)
                          and self.spread.uneven([*slots[:i], None, *slots[i + 1:]]) < now]
                if not better:
                    break
                self._drop(key, max(better)[1])

    def place_forced(self) -> None:
        """Every empty slot, largest partition first, to the least loaded broker that keeps the spread even."""
        for key in sorted(self.active, key=lambda k: -self.parts[k].size):
            slots = self.slots[key]
            for i, b in enumerate(slots):
                if b is not None:
                    continue
                before = self.spread.uneven(slots)
                targets = self._valid_targets(key, i)
                if not targets:
                    self.unplaced += 1
                    continue
                chosen = min(targets)
                if chosen[0] > before:
                    self.unplaced += 1  # the spread cannot stay as even as it should; the best there is
                self._put(key, i, chosen[2])
        for key in self.active:
            original = self.parts[key].replicas
            slots = self.slots[key]
            if None in slots:
                # Nowhere to go: what was there stays (a replica on a removed broker), an empty slot is dropped.
                for i, b in enumerate(slots):
                    if b is None and i < len(original) and original[i] not in slots:
                        self._put(key, i, original[i])
                self.slots[key] = [b for b in self.slots[key] if b is not None]

    def band(self) -> tuple[float, float, float]:
        total = sum(self.load[b] for b in self.facts.eligible)
        mean = total / len(self.facts.eligible)
        return mean, mean * (1 - self.facts.tolerance), mean * (1 + self.facts.tolerance)

    def _movable(self) -> dict[int, list[tuple[int, Key]]]:
        """Each eligible broker's replicas of the partitions the plan may change, (size, key) ascending."""
        movable: dict[int, list[tuple[int, Key]]] = {b: [] for b in self.facts.eligible}
        for key in self.active:
            for b in self.slots[key]:
                if b in movable:
                    movable[b].append((self.parts[key].size, key))
        for items in movable.values():
            items.sort()
        return movable

    def _run(self, pick: Callable[[Mapping[int, list[tuple[int, Key]]]], tuple[Key, int, int] | None],
             max_moves: int | None) -> None:
        """Make the moves ``pick`` chooses, one at a time, until it finds none or ``max_moves`` are made (by default
        ten per movable replica: every move lowers the sum of squared loads, the limit only guards that)."""
        if not self.facts.balancing:
            return
        movable = self._movable()
        limit = max_moves if max_moves is not None else 10 * sum(len(v) for v in movable.values()) + 10
        while self.moves < limit:
            move = pick(movable)
            if move is None:
                return
            self._move(move, movable)

    def _move(self, move: tuple[Key, int, int], movable: Mapping[int, list[tuple[int, Key]]]) -> None:
        key, source, target = move
        index = self.slots[key].index(source)
        self._drop(key, index)
        self._put(key, index, target)
        self._allowed_cache.pop(key, None)
        item = (self.parts[key].size, key)
        del movable[source][bisect.bisect_left(movable[source], item)]
        bisect.insort(movable[target], item)
        self.moves += 1

    def balance(self, max_moves: int | None = None) -> None:
        mean, lo, hi = self.band()

        def pick(movable: Mapping[int, list[tuple[int, Key]]]) -> tuple[Key, int, int] | None:
            order = sorted(self.facts.eligible, key=lambda b: (self.load[b], b))
            if self.load[order[-1]] <= hi and self.load[order[0]] >= lo:
                return None
            return self._best_move(order, movable, mean, lo, hi)

        self._run(pick, max_moves)

    def lift(self, max_moves: int | None = None) -> None:
        """Raise the lowest broker while it is below the band, from any broker heavier than it.

        :meth:`balance` gives only from brokers above the mean. Where the racks keep the band out of reach, brokers of a
        large rack end below the band at uneven levels, and no broker above the mean may give them anything without
        breaking the spread; their rack-mates below the mean may. Each move goes to the lowest broker, from the
        heaviest broker that has a replica it may give: the largest no more than half their gap (the pair ends
        closest), else the smallest that still narrows it. The giver ends above the old lowest and the taker below the
        giver's old load, so the lowest broker never drops, the highest never rises, and the sum of squared loads falls
        with every move: the loop ends. It ends when the lowest broker is inside the band or nobody may give it
        anything. At most :data:`FRUGAL_TRIES` replicas are tried on each side of the half gap per giver.
        """
        _, lo, _ = self.band()

        def pick(movable: Mapping[int, list[tuple[int, Key]]]) -> tuple[Key, int, int] | None:
            bottom = min(self.facts.eligible, key=lambda b: (self.load[b], b))
            return self._lift_move(bottom, movable) if self.load[bottom] < lo else None

        self._run(pick, max_moves)

    def _lift_move(self, bottom: int, movable: Mapping[int, list[tuple[int, Key]]]) -> tuple[Key, int, int] | None:
        floor = self.load[bottom]
        for source in sorted(self.facts.eligible, key=lambda b: (-self.load[b], b)):
            gap = self.load[source] - floor
            if gap <= 0:
                return None
            items = movable[source]
            half = bisect.bisect_right(items, (gap // 2, ("\uffff", 2**31)))
            for size, key in reversed(items[max(0, half - FRUGAL_TRIES):half]):
                if size <= 0:
                    break
                if bottom in self._allowed(key, source):
                    return key, source, bottom
            for size, key in items[half:half + FRUGAL_TRIES]:
                if size >= gap:
                    break
                if bottom in self._allowed(key, source):
                    return key, source, bottom
        return None

    def _allowed(self, key: Key, source: int) -> tuple[int, ...]:
        """Brokers that may take ``key``'s replica from ``source`` without making its spread worse (cached until the
        partition changes)."""
        per_source = self._allowed_cache.setdefault(key, {})
        found = per_source.get(source)
        if found is None:
            slots = self.slots[key]
            index = slots.index(source)
            before = self.spread.uneven(slots)
            found = tuple(sorted(b for b in self.facts.eligible if b not in slots
                                 and self.spread.uneven([*slots[:index], b, *slots[index + 1:]]) <= before))
            per_source[source] = found
        return found

    def _receiver(self, key: Key, source: int, lo: float, needed: bool) -> int | None:
        """The least loaded allowed broker lighter than ``source``; with ``needed``, only one below the band."""
        best: tuple[int, int] | None = None
        for b in self._allowed(key, source):
            load = self.load[b]
            if load >= self.load[source] or (needed and load >= lo):
                continue
            if best is None or (load, b) < best:
                best = (load, b)
        return None if best is None else best[1]

    def _frugal_move(self, order: Sequence[int], movable: Mapping[int, list[tuple[int, Key]]], mean: float,
                     lo: float, hi: float) -> tuple[Key, int, int] | None:
        """The smallest replica that brings the highest broker down into the band (the least loaded broker that may
        take it staying inside it), else the smallest that lifts the lowest broker into the band from a broker
        above the mean (which stays inside it); None when neither exists. At most :data:`FRUGAL_TRIES` replicas are
        tried per broker."""
        top, bottom = order[-1], order[0]
        if self.load[top] > hi:
            items = movable[top]
            start = bisect.bisect_left(items, (math.ceil(self.load[top] - hi), ("", -1)))
            for size, key in items[start:start + FRUGAL_TRIES]:
                if self.load[top] - size < lo:
                    break
                target = self._receiver(key, top, lo, needed=False)
                if target is not None and self.load[target] + size <= hi:
                    return key, top, target
        if self.load[bottom] < lo:
            for source in reversed(order):
                if self.load[source] <= mean:
                    break
                items = movable[source]
                start = bisect.bisect_left(items, (math.ceil(lo - self.load[bottom]), ("", -1)))
                for size, key in items[start:start + FRUGAL_TRIES]:
                    after = self.load[bottom] + size
                    if self.load[source] - size < lo or after > hi or after >= self.load[source]:
                        break
                    if bottom in self._allowed(key, source):
                        return key, source, bottom
        return None

    def _best_move(self, order: Sequence[int], movable: Mapping[int, list[tuple[int, Key]]], mean: float,
                   lo: float, hi: float) -> tuple[Key, int, int] | None:
        if self.frugal and (move := self._frugal_move(order, movable, mean, lo, hi)) is not None:
            return move
        for source in reversed(order):
            load = self.load[source]
            if load <= mean:
                return None
            needed = load <= hi  # inside the band itself: it only gives to a broker below the band
            items = movable[source]
            # Largest first among replicas that do not carry the source below the mean ...
            top = bisect.bisect_right(items, (int(load - mean), ("\uffff", 2**31)))
            for size, key in reversed(items[:top]):
                target = self._receiver(key, source, lo, needed)
                if target is None:
                    continue
                # ... nor the receiver past the mean (past the middle of the two, when it is above the mean already)
                gap = self.load[target] - mean
                if size <= (-gap if gap < 0 else (load - self.load[target]) / 2):
                    return key, source, target
            # ... else the smallest that still narrows the pair's worst deviation.
            for size, key in items:
                target = self._receiver(key, source, lo, needed)
                if target is None:
                    continue
                worst = max(load - mean, mean - self.load[target])
                after = max(abs(load - size - mean), abs(self.load[target] + size - mean))
                if after < worst - 1e-9:
                    return key, source, target
        return None

    def result(self) -> Result:
        assignment = {key: tuple(b for b in slots if b is not None) for key, slots in self.slots.items()}
        return Result(assignment=assignment, offline=tuple(self.offline), moves=self.moves, unplaced=self.unplaced)


def plan(request: PlanRequest, brokers: Sequence[BrokerInfo], partitions: Iterable[Partition],
         max_moves: int | None = None) -> Result:
    """The greedy plan of a request, its rules applied here (the bench's reference)."""
    facts = setup(request, brokers)
    parts = list(partitions)
    offline = [p.key for p in parts if selected(request, p.topic) and is_offline(p.replicas, facts.alive)]
    active = [p.key for p in parts if selected(request, p.topic) and not is_offline(p.replicas, facts.alive)]
    g = Greedy(facts, (b.id for b in brokers), parts, active, offline=offline)
    g.resize()
    g.free_forced()
    g.place_forced()
    g.balance(max_moves)
    return g.result()


def place(facts: Setup, brokers: Iterable[int], partitions: Iterable[Partition], active: Iterable[Key],
          start: Mapping[Key, Sequence[int | None]], *, max_moves: int | None = None, lift: bool = False) -> Result:
    """The greedy plan from replica lists the caller has resized already (``start``, ``None`` for a replica still to
    create) and the partitions it may change (``active``): forced replicas placed, then the balancing moves, then,
    with ``lift`` (the planning job's candidate; the bench's reference stays plain), :meth:`Greedy.lift`."""
    g = Greedy(facts, brokers, partitions, active, start=start)
    g.free_forced()
    g.place_forced()
    g.balance(max_moves)
    if lift:
        g.lift(max_moves)
    return g.result()


def uneven_partitions(assignment: Mapping[Key, Sequence[int]], original: Mapping[Key, Partition],
                      request: PlanRequest, brokers: Sequence[BrokerInfo]) -> int:
    """How many partitions of an assignment (offline ones aside) are not spread as evenly as the racks allow."""
    facts = setup(request, brokers)
    spread = Spread(facts.rack_of)
    return sum(1 for key, p in original.items()
               if not is_offline(p.replicas, facts.alive) and spread.uneven(list(assignment.get(key, p.replicas))))
