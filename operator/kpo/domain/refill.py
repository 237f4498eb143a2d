"""Whether a PartitionReassignment's tick keeps watching its moves in flight, to refill freed slots between polls.

kpo learns that a move ended only by asking Kafka (ListPartitionReassignments): nothing is announced. With one look
per poll interval every move costs at least the wait for the next poll before its slot is refilled, which is nothing
for a move of an hour and most of the time for a move of a second. Many small partitions then ran at 2.1 x the
floor in the execution benchmark: the moves, not the bytes, set the pace.

So a tick that leaves moves of its own in flight *and* moves waiting for a slot may keep looking: it sleeps a short
while, asks Kafka which of its moves are still listed (one light request), and when one has ended runs a whole pass
again (observe, decide with the same cluster-wide scheduler, act), which refills the slot under every limit exactly
as a poll would. This module holds the one decision of that loop, :func:`next_probe`: how long to wait before the
next look, or that the tick should end. It is pure; the loop around it is
:mod:`kpo.resources.partition_reassignment.refill`.

The rules, in order:

1. **Only when a completion could start something.** No move of its own in flight, or nothing waiting for a slot
   (every move started, or the rest held back for other reasons the next poll re-examines anyway): end the tick.
2. **Only while the moves in flight are short, and not before one can have ended.** With a replication throttle a
   new replica copies at most `throttle` bytes/s, so a move cannot end sooner than `remaining / throttle` after it was
   measured. The tick watches only if at least half of its moves in flight could end before the tick must end: a
   refill saves at most one poll interval per move, which pays for moves of a second and is noise on moves of
   minutes (in the execution benchmark, watching a few small moves among large ones only shuffled the large ones'
   start times, for better or worse). The first look waits until the soonest move can have ended. Without a
   throttle nothing bounds the rate, so the moves are watched on the backoff alone.
3. **Back off while nothing ends.** The first look comes `first_probe` seconds after a pass, each look that finds
   no move ended waits `growth` times longer than the last: quick for moves of a second, a handful of requests per
   tick for slower ones.
4. **A tick lasts at most about one poll interval.** A look is only made if it and the pass it may trigger (as long
   as the last pass took) end within `tick_share` of the poll interval, so the next tick, on the timer's fixed grid,
   is not delayed. The timer runs ticks on a fixed grid (Kopf's sharp timers): a tick that watches until the end of
   its interval hands over to the next one without a gap.

Nothing here loosens a limit: a look only triggers a pass, and a pass admits moves through
:func:`kpo.domain.scheduling.moves_to_start` like any poll does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kpo.domain.model import ClusterView, TopicPartition


@dataclass(frozen=True)
class RefillPolicy:
    """How eagerly a tick watches its moves in flight."""

    #: The operator's poll interval: ticks start on this grid.
    poll_interval: float
    #: Seconds from a pass to the first look; 0 turns watching off.
    first_probe: float = 0.25
    #: Each look that finds no move ended waits this many times longer than the previous one.
    growth: float = 1.5
    #: The share of the poll interval a tick may last, its passes included; the rest is room for the status patch.
    tick_share: float = 0.9

    def __post_init__(self) -> None:
        if self.poll_interval <= 0 or self.first_probe < 0 or self.growth < 1 or not 0 < self.tick_share <= 1:
            raise ValueError(f"invalid refill policy: {self}")


@dataclass(frozen=True)
class Work:
    """What a pass left behind: its own moves in flight (bytes each still has to copy) and moves waiting for a slot."""

    in_flight: Mapping[TopicPartition, float] = field(default_factory=dict)
    #: Moves that could start once a slot frees: pending ones the scheduler did not admit, and Incremental moves
    #: whose step in flight is not their last.
    waiting: int = 0
    #: The resource's replication throttle (bytes/s per broker and direction), if it sets one.
    throttle: float | None = None


@dataclass(frozen=True)
class Elapsed:
    """Where the tick is in time, in seconds."""

    #: Since the tick began.
    tick: float
    #: Since `Work` was measured (the end of the last pass).
    since_pass: float
    #: How long the last pass took: a look that finds a move ended costs one more.
    last_pass: float
    #: Looks since the last pass that found no move ended.
    quiet_probes: int = 0


def next_probe(work: Work, elapsed: Elapsed, policy: RefillPolicy) -> float | None:
    """Seconds to wait before looking at Kafka again, or ``None``: end the tick (see the module's rules)."""
    if policy.first_probe <= 0 or not work.in_flight or work.waiting <= 0:
        return None
    delay = policy.first_probe * policy.growth ** elapsed.quiet_probes
    time_left = policy.tick_share * policy.poll_interval - elapsed.tick - elapsed.last_pass
    if work.throttle:
        # The earliest each move can end, from now; the lower median is the one half of them can beat.
        ends = sorted(left / work.throttle - elapsed.since_pass for left in work.in_flight.values())
        if ends[(len(ends) - 1) // 2] > time_left:
            return None
        delay = max(delay, ends[0])
    return delay if delay <= time_left else None


def remaining_bytes(view: ClusterView, partition: TopicPartition) -> float:
    """Bytes a move of ``partition`` still has to copy, from its log size and its new replicas' (DescribeLogDirs).

    A move not listed yet (just submitted) has everything left. Writes during the move are not counted: this is a
    lower bound, which is what rule 2 needs (a look made too early costs one request; one made too late a slot).
    """
    size = view.partition_size(partition)
    ongoing = view.ongoing.get(partition)
    if ongoing is None or not ongoing.adding:
        return float(size)
    copied = min(view.replica_sizes.get((partition, broker), 0) for broker in ongoing.adding)
    return float(max(0, size - copied))
