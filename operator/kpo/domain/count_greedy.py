"""Replica counts evened out one small replica at a time: the count rounds' finish on the driver.

Why. After the byte rounds of a large plan a handful of brokers are often a few replicas outside the count band (a
byte round moves large replicas where they fit, which says nothing of how many). The planning job's count rounds fix
that in bulk, but a Spark round costs its 5-6 s whether it moves 500 replicas or 3, and on the skewed million-replica
input of issue 27 they ran two (547, then 3). Which small replica goes where is a question about single replicas; this
module answers it on the driver, on the partitions the job collects (those on the brokers furthest from the count
band), with the counts and bytes of every other partition given as base values.

The rules are the count rounds' own (``kpo.planning.spark.rounds.decide_counts``) made exact per move:

- the smallest movable replicas go first (fewest bytes copied for a replica of count);
- a move takes one replica from a broker with more replicas to one with at least two fewer, so the sum of squared
  count deviations falls with every move and the loop ends;
- a move never takes a broker's bytes out of the byte band, nor further from it when it is outside already;
- a move never puts a partition twice on a broker nor makes its rack spread worse (:class:`Spread`), and only brokers
  taking part (*eligible*) receive.

It stops when every eligible broker is inside the count band, or when no single move brings one closer. Pure: values
in, values out.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kpo.domain.greedy import Key, Partition, Setup, Spread

# Smallest replicas tried per sending broker before the next broker is asked.
TRIES = 64


@dataclass(frozen=True)
class Range:
    """An inclusive band of values."""

    lo: float
    hi: float

    def distance(self, value: float) -> float:
        return max(0.0, self.lo - value, value - self.hi)


class CountGreedy:
    """Replica lists, per-broker counts and bytes (given partitions plus ``base_*``), movable replicas by size."""

    def __init__(self, facts: Setup, partitions: Iterable[Partition], *, base_count: Mapping[int, int],
                 base_bytes: Mapping[int, int], counts: Range, bytes_band: Range) -> None:
        self.facts = facts
        self.spread = Spread(facts.rack_of, facts.kept_rack_of)
        self.counts = counts
        self.bytes_band = bytes_band
        self.count: dict[int, int] = dict.fromkeys(facts.eligible, 0) | dict(base_count)
        self.bytes: dict[int, int] = dict.fromkeys(facts.eligible, 0) | dict(base_bytes)
        self.slots: dict[Key, list[int]] = {}
        self.size: dict[Key, int] = {}
        self.movable: dict[int, list[tuple[int, Key]]] = {b: [] for b in facts.eligible}
        for p in partitions:
            self.slots[p.key] = list(p.replicas)
            self.size[p.key] = p.size
            for b in p.replicas:
                self.count[b] = self.count.get(b, 0) + 1
                self.bytes[b] = self.bytes.get(b, 0) + p.size
                if b in self.movable:
                    self.movable[b].append((p.size, p.key))
        for items in self.movable.values():
            items.sort()
        self.moves = 0

    def _bytes_allow(self, broker: int, delta: int) -> bool:
        now = self.bytes[broker]
        return self.bytes_band.distance(now + delta) <= self.bytes_band.distance(now)

    def _spread_allows(self, key: Key, source: int, target: int) -> bool:
        slots = self.slots[key]
        if target in slots:
            return False
        index = slots.index(source)
        return self.spread.uneven([*slots[:index], target, *slots[index + 1:]]) <= self.spread.uneven(slots)

    def _shed(self, source: int, order: Sequence[int]) -> tuple[Key, int, int] | None:
        """The smallest replica of ``source`` that a broker with at least two fewer replicas may take (the one with
        fewest, then least bytes)."""
        for size, key in self.movable[source][:TRIES]:
            if not self._bytes_allow(source, -size):
                continue
            for target in order:
                if self.count[target] >= self.count[source] - 1 or self.count[target] + 1 > self.counts.hi:
                    break
                if self._bytes_allow(target, size) and self._spread_allows(key, source, target):
                    return key, source, target
        return None

    def _lift(self, target: int, order: Sequence[int]) -> tuple[Key, int, int] | None:
        """The smallest replica ``target`` may take from a broker with at least two more replicas (most first)."""
        for source in reversed(order):
            if self.count[source] <= self.count[target] + 1 or self.count[source] - 1 < self.counts.lo:
                break
            for size, key in self.movable[source][:TRIES]:
                if (self._bytes_allow(source, -size) and self._bytes_allow(target, size)
                        and self._spread_allows(key, source, target)):
                    return key, source, target
        return None

    def _next_move(self) -> tuple[Key, int, int] | None:
        order = sorted(self.facts.eligible, key=lambda b: (self.count[b], self.bytes[b], b))
        for source in reversed(order):
            if self.count[source] <= self.counts.hi:
                break
            if (move := self._shed(source, order)) is not None:
                return move
        for target in order:
            if self.count[target] >= self.counts.lo:
                break
            if (move := self._lift(target, order)) is not None:
                return move
        return None

    def balance(self, max_moves: int) -> None:
        while self.moves < max_moves and (move := self._next_move()) is not None:
            key, source, target = move
            size = self.size[key]
            slots = self.slots[key]
            slots[slots.index(source)] = target
            self.count[source] -= 1
            self.count[target] += 1
            self.bytes[source] -= size
            self.bytes[target] += size
            item = (size, key)
            del self.movable[source][bisect.bisect_left(self.movable[source], item)]
            bisect.insort(self.movable[target], item)
            self.moves += 1

    def changed(self, before: Mapping[Key, Sequence[int]]) -> dict[Key, tuple[int, ...]]:
        return {key: tuple(slots) for key, slots in self.slots.items() if tuple(slots) != tuple(before[key])}


def balance_counts(facts: Setup, partitions: Sequence[Partition], *, base_count: Mapping[int, int],
                   base_bytes: Mapping[int, int], counts: Range, bytes_band: Range, max_moves: int,
                   ) -> dict[Key, tuple[int, ...]]:
    """The new replica lists of the partitions the count greedy changed (slot order kept)."""
    greedy = CountGreedy(facts, partitions, base_count=base_count, base_bytes=base_bytes, counts=counts,
                         bytes_band=bytes_band)
    greedy.balance(max_moves)
    return greedy.changed({p.key: p.replicas for p in partitions})
