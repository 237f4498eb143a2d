"""Which pending replica moves to start now: the decision of kpo's cluster-wide move scheduler.

kafka-reassign-partitions starts every move at once, so the brokers share their throttled bandwidth among hundreds of
partitions and the last one finishes at the very end; scripts that submit batches wait for the slowest move of each
batch before starting the next. kpo keeps a bounded number of moves in flight and refills a slot as soon as any move
finishes. The operator calls `moves_to_start` whenever something changed (a move finished, a CR appeared, limits
changed) with the complete picture, and starts what it returns. The function keeps no state between calls: everything
it needs is in its arguments, so the operator can be restarted at any moment and decide the same.

Rules, in the order they are applied:

1. **A partition moves once at a time.** A pending move whose partition is already in flight (started by anyone) or
   was picked earlier in the same call is not started; conflicts are reported elsewhere, never overridden here.
2. **Limits.** A move starts only if afterwards
   - the cluster holds at most `SchedulerConfig.max_moves` moves in flight (all CRs and foreign moves together);
   - its own CR holds at most `max_moves` of its moves in flight (the CR's `spec.execution.maxMoves`, else the
     operator's default);
   - every broker it touches is touched by at most `max_moves_per_broker` moves in flight, counting every CR's moves
     and foreign ones, because a broker's disks and network do not care who asked. The bound is the CR's own
     `maxMovesPerBroker` (else the default), never above the operator's cluster-wide cap.
3. **Which brokers a move touches.** By default (`Touch.DATA_PATH`) the brokers that carry its data: the new replicas
   receive (they fetch the whole log from the leader) and the leader sends. Replicas that stay or are only removed
   move no data and are not counted, so a move that only drops or reorders replicas touches no broker at all. The
   leader is the move's `leader` when the operator knows it (DescribeTopics), else the first current replica.
   `Touch.ALL_REPLICAS` counts every broker of current and target instead, for those who want moves kept apart entirely.
4. **Order within a CR.** `AsGiven` (spec order), `SmallestFirst` or `LargestFirst` (by the partition's size in bytes,
   spec order among equals). The order is a priority, not a barrier: when the next move cannot start because one of
   its brokers is busy, a later one that fits starts instead, so no slot stays empty while work could run. (A move
   is never skipped for good: it is first in line again at the next call.)
5. **Fair turns between CRs.** Slots go one at a time to the CR with the fewest moves in flight, the older CR (by
   creation) first among equals. Starting from an idle cluster this is round-robin in creation order; when one CR's
   move finishes, that CR gets the freed slot back. It needs no memory of whose turn it was.

Refill is continuous because the function only looks at what is in flight now; there is no batch to wait for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from kpo.domain.model import Replicas, TopicPartition


class Order(StrEnum):
    """The order in which one CR's moves are started (`spec.execution.order`)."""

    AS_GIVEN = "AsGiven"
    SMALLEST_FIRST = "SmallestFirst"
    LARGEST_FIRST = "LargestFirst"


class Touch(StrEnum):
    """Which brokers count as busy with a move."""

    DATA_PATH = "DataPath"
    ALL_REPLICAS = "AllReplicas"


@dataclass(frozen=True, order=True)
class Owner:
    """A PartitionReassignment (or a foreign reassignment) that moves belong to; sorts by creation order."""

    created: datetime
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Limits:
    """In-flight limits; None means unlimited (for the defaults) or "use the default" (in a CR)."""

    max_moves: int | None = None
    max_moves_per_broker: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_moves", "max_moves_per_broker"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")


@dataclass(frozen=True)
class Execution:
    """One CR's execution settings as far as scheduling is concerned."""

    order: Order = Order.AS_GIVEN
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class SchedulerConfig:
    """The operator's configuration for one Kafka cluster."""

    #: Limits for CRs that do not set their own.
    defaults: Limits = field(default_factory=Limits)
    #: Caps over all CRs together; None means no cap.
    max_moves: int | None = None
    max_moves_per_broker: int | None = None
    touch: Touch = Touch.DATA_PATH


@dataclass(frozen=True)
class Move:
    """One partition's move from `current` to `target` replicas, pending or in flight."""

    owner: Owner
    partition: TopicPartition
    current: Replicas
    target: Replicas
    size_bytes: int = 0
    #: The move's index in its CR's spec (or plan), for `AsGiven` and as the tie-breaker.
    position: int = 0
    leader: int | None = None

    @property
    def receivers(self) -> frozenset[int]:
        """The brokers that get a new replica and must fetch the partition's whole log."""
        return frozenset(self.target) - frozenset(self.current)

    @property
    def sender(self) -> int | None:
        """The broker the new replicas fetch from: the leader (the first current replica unless told otherwise)."""
        if self.leader is not None:
            return self.leader
        return self.current[0] if self.current else None

    def touched(self, touch: Touch = Touch.DATA_PATH) -> frozenset[int]:
        """The brokers this move keeps busy while in flight."""
        if touch is Touch.ALL_REPLICAS:
            return frozenset(self.current) | frozenset(self.target)
        if not self.receivers or self.sender is None:
            return self.receivers
        return self.receivers | {self.sender}


def _order_key(order: Order) -> Callable[[Move], tuple[int, int]]:
    if order is Order.SMALLEST_FIRST:
        return lambda move: (move.size_bytes, move.position)
    if order is Order.LARGEST_FIRST:
        return lambda move: (-move.size_bytes, move.position)
    return lambda move: (move.position, 0)


def _effective(limits: Limits, config: SchedulerConfig) -> Limits:
    per_broker = limits.max_moves_per_broker or config.defaults.max_moves_per_broker
    if config.max_moves_per_broker is not None:
        per_broker = min(per_broker or config.max_moves_per_broker, config.max_moves_per_broker)
    return Limits(max_moves=limits.max_moves or config.defaults.max_moves, max_moves_per_broker=per_broker)


class _Load:
    """Moves in flight per broker, per owner and in total, including the ones this call decides to start."""

    def __init__(self, in_flight: Iterable[Move], touch: Touch) -> None:
        self.touch = touch
        self.per_broker: Counter[int] = Counter()
        self.per_owner: Counter[Owner] = Counter()
        self.partitions: set[TopicPartition] = set()
        self.total = 0
        for move in in_flight:
            self.add(move)

    def add(self, move: Move) -> None:
        self.per_broker.update(move.touched(self.touch))
        self.per_owner[move.owner] += 1
        self.partitions.add(move.partition)
        self.total += 1

    def fits(self, move: Move, per_broker_limit: int | None) -> bool:
        if move.partition in self.partitions:
            return False
        if per_broker_limit is None:
            return True
        return all(self.per_broker[broker] < per_broker_limit for broker in move.touched(self.touch))


def moves_to_start(
    pending: Sequence[Move],
    in_flight: Sequence[Move],
    executions: Mapping[Owner, Execution],
    config: SchedulerConfig,
) -> list[Move]:
    """The pending moves to start now, in the order they were chosen.

    `pending` holds every move of every active CR that has not started; `in_flight` every move Kafka is running now
    (kpo's and anyone else's, so their brokers count as busy). `executions` gives each CR's order and limits; a CR
    missing from it is scheduled `AsGiven` with the defaults.
    """
    load = _Load(in_flight, config.touch)
    queues: dict[Owner, list[Move]] = {}
    for move in pending:
        queues.setdefault(move.owner, []).append(move)
    for owner, moves in queues.items():
        moves.sort(key=_order_key(executions.get(owner, Execution()).order))
    cursors = dict.fromkeys(queues, 0)
    limits = {owner: _effective(executions.get(owner, Execution()).limits, config) for owner in queues}
    started: list[Move] = []
    contenders = set(queues)
    while contenders and (config.max_moves is None or load.total < config.max_moves):
        owner = min(contenders, key=lambda candidate: (load.per_owner[candidate], candidate))
        own_limits = limits[owner]
        if own_limits.max_moves is not None and load.per_owner[owner] >= own_limits.max_moves:
            contenders.discard(owner)
            continue
        # Loads only grow during a call, so a move that did not fit earlier in this call will not fit later: each
        # queue is scanned once, from where the last scan stopped.
        queue, index = queues[owner], cursors[owner]
        while index < len(queue) and not load.fits(queue[index], own_limits.max_moves_per_broker):
            index += 1
        if index == len(queue):
            contenders.discard(owner)
            continue
        chosen = queue[index]
        cursors[owner] = index + 1
        load.add(chosen)
        started.append(chosen)
    return started
