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
     `maxMovesPerBroker` (else the default), never above the operator's cluster-wide cap;
   - every broker it copies into holds at most `max_moves_per_broker_direction` moves copying into it, and its
     sender at most that many copying out of it (the CR's `maxMovesPerBrokerDirection`, else the default). The two
     directions are separate resources: the receiver's disk writes and fetchers and its follower throttle, the
     leader's reads of old segments and its leader throttle. Counting them apart keeps a broker that is both sending
     and receiving from spending its slots on the direction with less work left, which a limit on the sum cannot
     tell apart (in the execution benchmark this alone takes a rebalance from 1.13 to within 1.03 of the floor).
   An intra-broker move (a replica copied between two log dirs of its broker, AlterReplicaLogDirs) is a move like
   the others for these limits: it counts against its CR's and the cluster's `max_moves` and touches its broker for
   `max_moves_per_broker`, since it loads that broker's disks. It copies nothing over the network, so it has no
   broker direction (the intra-broker throttle, not the replication throttle, paces it).
3. **Which brokers a move touches.** By default (`Touch.DATA_PATH`) the brokers that carry its data: the new replicas
   receive (they fetch the whole log from the leader) and the leader sends. Replicas that stay or are only removed
   move no data and are not counted, so a move that only drops or reorders replicas touches no broker at all. The
   leader is the move's `leader` when the operator knows it (DescribeTopics), else the first current replica.
   `Touch.ALL_REPLICAS` counts every broker of current and target instead, for those who want moves kept apart.
4. **Catch-up guard.** A new replica must copy the log plus everything written while it copies, so it only converges
   if its share of the throttle exceeds the partition's write rate. Brokers share their throttle among the replica
   flows through them (the leader's outgoing, each receiver's incoming bandwidth), so a move whose partition is
   written at w bytes/s may join a broker's flows only if every flow there keeps a fair share of at least
   `catch_up_headroom` (default 2) times its write rate: flows * max write rate * headroom <= throttle. A broker
   direction with no flow always admits a move (it cannot do better than the whole throttle). A move held back by
   the guard reserves nothing: it starts when its brokers' flows have thinned out, at the latest when the moves
   around it have ended. Reserving the brokers for it (draining them) was tried and measured worse: a hot move needs
   two directions drained at once, and the one that empties first stands idle until the other does. The guard needs
   the partition's write rate (`Move.write_rate`) and the throttle (`Execution.throttle`); without them it does
   nothing.
5. **Dominant moves run alone.** A move that alone makes up `dominant_share` (default 0.7) or more of the bytes
   still to copy through one of its broker directions (pending and in-flight moves, `copied_bytes` each), in a
   direction with at least `busy_share` (default 0.5) of the bytes left in the busiest one, decides when the
   reassignment can end: nothing else through that direction can make up for time it loses. So it starts only where
   every direction it uses is idle, and while it runs no other move joins them: its copy gets the whole throttle at
   both ends, which also leaves neither end underused. Like the guard it reserves nothing while it waits. Without it,
   one huge partition moved Incremental (three copies in a row from the same leader) ran 13 % past the floor in the
   execution benchmark, slowed by moves sharing its receiver; with it, 1.5 %. A move is not dominant through a
   direction it is alone in, nor through one with little left: the last move through any direction would be
   trivially dominant there, and holding its other end for it only costs concurrency.
6. **Order within a CR.** `AsGiven` (spec order), `SmallestFirst` or `LargestFirst` by the bytes the move copies:
   its size, or, when write rate and throttle are known, size * T / (T - w), the bytes it copies before it catches up
   even with the whole throttle to itself. Spec order breaks ties. The order is a priority, not a barrier: when the
   next move cannot start because one of its brokers is busy, a later one that fits starts instead, so no slot stays
   empty while work could run. (A move is never skipped for good: it is first in line again at the next call.)
7. **Fair turns between CRs.** Slots go one at a time to the CR with the fewest moves in flight, the older CR (by
   creation) first among equals. Starting from an idle cluster this is round-robin in creation order; when one CR's
   move finishes, that CR gets the freed slot back. It needs no memory of whose turn it was.

Refill is continuous because the function only looks at what is in flight now; there is no batch to wait for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import cached_property

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
    #: Moves copying into one broker, and separately moves copying out of it.
    max_moves_per_broker_direction: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_moves", "max_moves_per_broker", "max_moves_per_broker_direction"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")


@dataclass(frozen=True)
class Execution:
    """One CR's execution settings as far as scheduling is concerned."""

    order: Order = Order.AS_GIVEN
    limits: Limits = field(default_factory=Limits)
    #: The CR's replication throttle in bytes/s per broker and direction (`spec.execution.throttle`), if any.
    throttle: float | None = None


@dataclass(frozen=True)
class SchedulerConfig:
    """The operator's configuration for one Kafka cluster."""

    #: Limits for CRs that do not set their own.
    defaults: Limits = field(default_factory=Limits)
    #: Caps over all CRs together; None means no cap.
    max_moves: int | None = None
    max_moves_per_broker: int | None = None
    touch: Touch = Touch.DATA_PATH
    #: A flow's fair share of the throttle must be at least this multiple of its partition's write rate.
    catch_up_headroom: float = 2.0
    #: A move holding this share of the bytes left through one of its broker directions runs alone; None: never.
    dominant_share: float | None = 0.7
    #: ... if that direction has at least this share of the bytes left in the busiest broker direction.
    busy_share: float = 0.5


@dataclass(frozen=True)
class Move:
    """One partition's move from `current` to `target` replicas, pending or in flight.

    Moves kpo did not start (another tool's reassignments seen in ListPartitionReassignments) go into `in_flight`
    too, under an `Owner` of their own, so their brokers count as busy. An Incremental move (KAFKA-6794) is asked
    for one step at a time: each step (its current replicas to the next step's) is a move of its own, pending until
    admitted and in flight while Kafka runs it, so it only holds the brokers that step copies between.
    """

    owner: Owner
    partition: TopicPartition
    current: Replicas
    target: Replicas
    size_bytes: int = 0
    #: The move's index in its CR's spec (or plan), for `AsGiven` and as the tie-breaker.
    position: int = 0
    leader: int | None = None
    #: Bytes/s producers write to the partition; 0 when unknown.
    write_rate: float = 0.0
    #: Brokers that copy a replica of the partition between their own log dirs (AlterReplicaLogDirs, JBOD). Such a
    #: copy loads the broker's disks, not the network: it touches the broker and counts as a move, with no flow.
    dir_brokers: frozenset[int] = frozenset()
    #: The dir each new replica is to be created in (broker, dir), told to the broker before the move is sent.
    new_dirs: tuple[tuple[int, str], ...] = ()

    # Derived sets are cached on the instance: the scheduler asks for them many times per call. They are not fields,
    # so equality and hashing still only look at what the move is.
    @cached_property
    def receivers(self) -> frozenset[int]:
        """The brokers that get a new replica and must fetch the partition's whole log."""
        return frozenset(self.target) - frozenset(self.current)

    @property
    def sender(self) -> int | None:
        """The broker the new replicas fetch from: the leader (the first current replica unless told otherwise)."""
        if self.leader is not None:
            return self.leader
        return self.current[0] if self.current else None

    @cached_property
    def _data_path(self) -> frozenset[int]:
        if not self.receivers or self.sender is None:
            return self.receivers | self.dir_brokers
        return self.receivers | {self.sender} | self.dir_brokers

    @cached_property
    def _all_replicas(self) -> frozenset[int]:
        return frozenset(self.current) | frozenset(self.target)

    def touched(self, touch: Touch = Touch.DATA_PATH) -> frozenset[int]:
        """The brokers this move keeps busy while in flight."""
        return self._all_replicas if touch is Touch.ALL_REPLICAS else self._data_path

    @cached_property
    def flows(self) -> Mapping[tuple[int, str], int]:
        """Replica flows per broker direction: each receiver's "in" once, the sender's "out" once per receiver."""
        flows = {(receiver, "in"): 1 for receiver in self.receivers}
        if self.receivers and self.sender is not None:
            flows[(self.sender, "out")] = len(self.receivers)
        return flows


def copied_bytes(move: Move, throttle: float | None) -> float:
    """The bytes `move` copies before it catches up with its writes, given the whole throttle; its size if unknown."""
    if throttle is None or move.write_rate <= 0:
        return float(move.size_bytes)
    if move.write_rate >= throttle:
        return float("inf")  # it never catches up under this throttle: the longest move there is
    return move.size_bytes * throttle / (throttle - move.write_rate)


def _order_key(execution: Execution) -> Callable[[Move], tuple[float, int]]:
    if execution.order is Order.SMALLEST_FIRST:
        return lambda move: (copied_bytes(move, execution.throttle), move.position)
    if execution.order is Order.LARGEST_FIRST:
        return lambda move: (-copied_bytes(move, execution.throttle), move.position)
    return lambda move: (move.position, 0)


def _effective(limits: Limits, config: SchedulerConfig) -> Limits:
    per_broker = limits.max_moves_per_broker or config.defaults.max_moves_per_broker
    if config.max_moves_per_broker is not None:
        per_broker = min(per_broker or config.max_moves_per_broker, config.max_moves_per_broker)
    return Limits(max_moves=limits.max_moves or config.defaults.max_moves, max_moves_per_broker=per_broker,
                  max_moves_per_broker_direction=limits.max_moves_per_broker_direction
                  or config.defaults.max_moves_per_broker_direction)


@dataclass
class _Direction:
    """The replica flows through one broker in one direction, and the tightest constraints among them."""

    flows: int = 0
    max_write_rate: float = 0.0
    throttle: float | None = None


def _min_known(first: float | None, second: float | None) -> float | None:
    return second if first is None else first if second is None else min(first, second)


class _Load:
    """What is in flight, including the moves this call decides to start."""

    def __init__(self, config: SchedulerConfig, executions: Mapping[Owner, Execution], pending: Sequence[Move],
                 in_flight: Sequence[Move]) -> None:
        self.config = config
        self.executions = executions
        #: Bytes still to copy through each broker direction, for rule 5.
        self.bytes_left: Counter[tuple[int, str]] = Counter()
        self.moves_left: Counter[tuple[int, str]] = Counter()
        if config.dominant_share is not None:
            for move in [*pending, *in_flight]:
                copied = copied_bytes(move, self.throttle_of(move))
                self.moves_left.update(move.flows.keys())
                for key, count in move.flows.items():
                    self.bytes_left[key] += count * copied  # type: ignore[assignment]
        self.busiest = max(self.bytes_left.values(), default=0.0)
        #: Broker directions a dominant move in flight holds to itself.
        self.exclusive: set[tuple[int, str]] = set()
        self.per_broker: Counter[int] = Counter()
        self.per_direction: Counter[tuple[int, str]] = Counter()
        self.per_owner: Counter[Owner] = Counter()
        self.partitions: set[TopicPartition] = set()
        self.directions: dict[tuple[int, str], _Direction] = {}
        self.total = 0

    def throttle_of(self, move: Move) -> float | None:
        return self.executions.get(move.owner, Execution()).throttle

    def dominant(self, move: Move) -> bool:
        share = self.config.dominant_share
        if share is None:
            return False
        copied = copied_bytes(move, self.throttle_of(move))
        if copied <= 0:
            return False
        busy = self.config.busy_share * self.busiest
        return any(copied >= share * self.bytes_left[key] and self.bytes_left[key] >= busy
                   and self.moves_left[key] > 1 for key in move.flows)

    def add(self, move: Move) -> None:
        self.per_broker.update(move.touched(self.config.touch))
        self.per_direction.update(move.flows.keys())
        if self.dominant(move):
            self.exclusive.update(move.flows.keys())
        self.per_owner[move.owner] += 1
        self.partitions.add(move.partition)
        self.total += 1
        for key, count in move.flows.items():
            direction = self.directions.setdefault(key, _Direction())
            direction.flows += count
            direction.max_write_rate = max(direction.max_write_rate, move.write_rate)
            direction.throttle = _min_known(direction.throttle, self.throttle_of(move))

    def _starves(self, move: Move, key: tuple[int, str], count: int) -> bool:
        """Whether adding `move`'s flows to a busy broker direction leaves some flow there too small a share."""
        direction = self.directions.get(key)
        if direction is None or direction.flows == 0:
            return False
        throttle = _min_known(direction.throttle, self.throttle_of(move))
        if throttle is None:
            return False
        write_rate = max(direction.max_write_rate, move.write_rate)
        return (direction.flows + count) * write_rate * self.config.catch_up_headroom > throttle

    def fits(self, move: Move, limits: Limits) -> bool:
        """Whether `move` may start now: limits, one move per partition, dominant moves alone, the catch-up guard."""
        per_broker_limit = limits.max_moves_per_broker
        if per_broker_limit is not None:
            per_broker = self.per_broker
            if any(per_broker[broker] >= per_broker_limit for broker in move.touched(self.config.touch)):
                return False
        direction_limit = limits.max_moves_per_broker_direction
        if direction_limit is not None:
            per_direction = self.per_direction
            if any(per_direction[key] >= direction_limit for key in move.flows):
                return False
        if move.partition in self.partitions:
            return False
        if any(key in self.exclusive for key in move.flows):
            return False
        if self.dominant(move) and any(self.per_direction[key] for key in move.flows):
            return False
        return not any(self._starves(move, key, count) for key, count in move.flows.items())


def moves_to_start(
    pending: Sequence[Move],
    in_flight: Sequence[Move],
    executions: Mapping[Owner, Execution],
    config: SchedulerConfig,
) -> list[Move]:
    """The pending moves to start now, in the order they were chosen.

    `pending` holds every move of every active CR that has not started; `in_flight` every move Kafka is running now
    (kpo's and anyone else's, so their brokers count as busy). `executions` gives each CR's order, limits and
    throttle; a CR missing from it is scheduled `AsGiven` with the defaults.
    """
    load = _Load(config, executions, pending, in_flight)
    for move in in_flight:
        load.add(move)
    queues: dict[Owner, list[Move]] = {}
    for move in pending:
        queues.setdefault(move.owner, []).append(move)
    for owner, moves in queues.items():
        moves.sort(key=_order_key(executions.get(owner, Execution())))
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
        while index < len(queue) and not load.fits(queue[index], own_limits):
            index += 1
        if index == len(queue):
            contenders.discard(owner)
            continue
        chosen = queue[index]
        cursors[owner] = index + 1
        load.add(chosen)
        started.append(chosen)
    return started
