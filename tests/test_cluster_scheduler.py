"""The per-cluster scheduler: what it remembers between resources' ticks so moves in flight are judged fully."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kpo.domain.model import OngoingReassignment, TopicPartition
from kpo.domain.reassignment import Candidate
from kpo.domain.scheduling import Execution, Owner, SchedulerConfig
from kpo.scheduler import ClusterScheduler

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
HOT_OWNER = Owner(EPOCH, "team-a", "hot")
COLD_OWNER = Owner(EPOCH + timedelta(minutes=1), "team-b", "cold")
THROTTLED = Execution(throttle=100.0)
HOT = TopicPartition("clicks", 0)
COLD = TopicPartition("audit", 0)
# The hot partition moves from broker 2 to 3 with 1 leading; the cold one would also be sent by broker 1.
HOT_MOVING = {HOT: OngoingReassignment(replicas=(1, 3, 2), adding=(3,), removing=(2,))}
# The catch-up guard is what these tests watch; the dominant-move rule would hold the lone cold move back as well.
GUARD_ONLY = SchedulerConfig(dominant_share=None)
COLD_CANDIDATE = Candidate(COLD, current=(1, 4), target=(1, 5), size_bytes=10, leader=1, position=0, write_rate=1.0)


def test_a_partition_reported_as_a_candidate_keeps_its_write_rate_once_it_moves() -> None:
    scheduler = ClusterScheduler(GUARD_ONLY)
    hot = Candidate(HOT, current=(1, 2), target=(1, 3), size_bytes=10, leader=1, position=0, write_rate=45.0)
    assert scheduler.admit(HOT_OWNER, THROTTLED, [hot], {}, {}) == [HOT]
    # Broker 1 now sends the hot partition: 2 flows x 45 B/s x headroom 2 > 100 B/s, the cold move must wait.
    assert scheduler.admit(COLD_OWNER, THROTTLED, [COLD_CANDIDATE], HOT_MOVING, {HOT: HOT_OWNER}) == []


def test_a_partition_observed_by_its_resources_tick_counts_while_it_moves() -> None:
    scheduler = ClusterScheduler(GUARD_ONLY)
    # The hot resource's tick: nothing left to start, its partition moving, its size and write rate observed.
    assert scheduler.admit(HOT_OWNER, THROTTLED, [], HOT_MOVING, {HOT: HOT_OWNER},
                           sizes={HOT: 10}, write_rates={HOT: 45.0}) == []
    assert scheduler.admit(COLD_OWNER, THROTTLED, [COLD_CANDIDATE], HOT_MOVING, {HOT: HOT_OWNER}) == []


def test_a_move_no_resource_reported_is_judged_without_size_or_write_rate() -> None:
    scheduler = ClusterScheduler(GUARD_ONLY)
    assert scheduler.admit(COLD_OWNER, THROTTLED, [COLD_CANDIDATE], HOT_MOVING, {}) == [COLD]


def test_what_it_remembers_is_forgotten_once_the_partition_neither_waits_nor_moves() -> None:
    scheduler = ClusterScheduler(GUARD_ONLY)
    scheduler.admit(HOT_OWNER, THROTTLED, [], HOT_MOVING, {HOT: HOT_OWNER}, sizes={HOT: 10}, write_rates={HOT: 45.0})
    scheduler.admit(HOT_OWNER, THROTTLED, [], {}, {})  # the move ended
    # Someone else moves the partition again: kpo knows nothing of it any more, as for any foreign move.
    assert scheduler.admit(COLD_OWNER, THROTTLED, [COLD_CANDIDATE], HOT_MOVING, {}) == [COLD]
