"""One move scheduler per Kafka cluster, shared by every PartitionReassignment of that cluster.

Each resource's tick hands in its candidate moves and asks which of its own may start. The scheduler keeps the latest
candidates of every resource (refreshed on each of its ticks, forgotten when a resource stops ticking), so the pure
decision :func:`kpo.domain.scheduling.moves_to_start` always sees the whole cluster: every resource's waiting moves
and every move Kafka reports in flight, kpo's or anyone else's. Nothing here survives a restart, and nothing needs
to: Kafka says what is moving, the resources say what they want.

ListPartitionReassignments says which replicas a move adds, not how big or how hot its partition is, yet the catch-up
guard and the dominant-move rule need both for the moves in flight too: a cold move must not join a broker busy with
a hot partition. So the scheduler remembers the size and write rate each resource last reported for its partitions
(its candidates, and the partitions its tick observed) and gives them to the moves in flight. Another tool's moves
stay without: their partitions are no resource's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from kpo.domain.model import OngoingReassignment, TopicPartition
from kpo.domain.reassignment import Candidate
from kpo.domain.scheduling import Execution, Move, Owner, SchedulerConfig, moves_to_start

FOREIGN = Owner(created=datetime.min.replace(tzinfo=UTC), namespace="", name="external")


@dataclass
class _Entry:
    moves: list[Move]
    execution: Execution
    seen: float


@dataclass(frozen=True)
class _PartitionFacts:
    size_bytes: int
    write_rate: float


class ClusterScheduler:
    def __init__(self, config: SchedulerConfig, stale_after_seconds: float = 30.0) -> None:
        self.config = config
        self.stale_after = stale_after_seconds
        self._entries: dict[Owner, _Entry] = {}
        self._facts: dict[TopicPartition, _PartitionFacts] = {}
        self._lock = threading.Lock()

    def admit(self, owner: Owner, execution: Execution, candidates: Sequence[Candidate],
              ongoing: Mapping[TopicPartition, OngoingReassignment], holders: Mapping[TopicPartition, Owner], *,
              sizes: Mapping[TopicPartition, int] | None = None,
              write_rates: Mapping[TopicPartition, float] | None = None) -> list[TopicPartition]:
        """The partitions among ``candidates`` that ``owner`` may submit now.

        ``sizes`` and ``write_rates`` are what the caller's tick observed of its own partitions, moving or not.
        """
        moves = [Move(owner=owner, partition=c.partition, current=c.current, target=c.target,
                      size_bytes=c.size_bytes, position=c.position, leader=c.leader, write_rate=c.write_rate)
                 for c in candidates]
        now = time.monotonic()
        with self._lock:
            rates = write_rates or {}
            self._facts.update({tp: _PartitionFacts(size, rates.get(tp, 0.0)) for tp, size in (sizes or {}).items()})
            self._facts.update({m.partition: _PartitionFacts(m.size_bytes, m.write_rate) for m in moves})
            in_flight = [self._in_flight(holders.get(tp, FOREIGN), tp, o) for tp, o in ongoing.items()]
            self._entries[owner] = _Entry(moves, execution, now)
            for stale in [o for o, e in self._entries.items() if now - e.seen > self.stale_after]:
                del self._entries[stale]
            pending = [m for e in self._entries.values() for m in e.moves]
            # Forget partitions nobody waits for and nothing moves, so the memory stays the size of the work.
            wanted = {m.partition for m in pending} | set(ongoing)
            self._facts = {tp: f for tp, f in self._facts.items() if tp in wanted}
            executions = {o: e.execution for o, e in self._entries.items()}
            started = moves_to_start(pending, in_flight, executions, self.config)
            chosen = [m.partition for m in started if m.owner == owner]
            # What this call started is no longer waiting; the next tick of each resource refreshes its list anyway.
            self._entries[owner].moves = [m for m in moves if m.partition not in set(chosen)]
        return chosen

    def _in_flight(self, owner: Owner, tp: TopicPartition, ongoing: OngoingReassignment) -> Move:
        facts = self._facts.get(tp, _PartitionFacts(0, 0.0))
        return Move(owner=owner, partition=tp, current=ongoing.original, target=ongoing.target,
                    size_bytes=facts.size_bytes, write_rate=facts.write_rate)


class WriteRates:
    """Bytes/s written to each partition, from the growth of its largest replica between two observations.

    The scheduler needs them: a new replica catches up only while its share of the throttle exceeds the partition's
    write rate, and a slot refilled at once would starve a hot partition for ever. Sizes come with every tick
    (DescribeLogDirs) anyway, so this costs no extra call. After a restart the first tick knows no rates yet.
    """

    def __init__(self) -> None:
        self._last: dict[TopicPartition, tuple[int, float]] = {}
        self._rates: dict[TopicPartition, float] = {}
        self._lock = threading.Lock()

    def observe(self, sizes: Mapping[TopicPartition, int], now: float | None = None) -> dict[TopicPartition, float]:
        at = time.monotonic() if now is None else now
        with self._lock:
            for tp, size in sizes.items():
                before = self._last.get(tp)
                if before is not None and at - before[1] >= 1.0:
                    # Retention and compaction shrink logs: a shrinking partition is not read as negative writes.
                    self._rates[tp] = max(0.0, (size - before[0]) / (at - before[1]))
                if before is None or at - before[1] >= 1.0:
                    self._last[tp] = (size, at)
            return {tp: self._rates[tp] for tp in sizes if tp in self._rates}
