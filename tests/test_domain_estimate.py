"""The estimate a proposal states (kpo.domain.estimate): kpo's scheduler on the fluid model, its floor, and when it
says nothing rather than guess."""

from __future__ import annotations

import datetime as dt

import pytest

from kpo.domain.estimate import Estimate, combined_estimate, dir_estimate, estimate, planned_moves, split_moves
from kpo.domain.model import Broker, ClusterView, PartitionState, TopicPartition
from kpo.domain.refill import RefillPolicy
from kpo.domain.scheduling import Execution, Limits, Move, Owner

OWNER = Owner(dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "ns", "move")
GB = 1_000_000_000
RATE = 50_000_000.0  # bytes/s per broker and direction


def move(index: int, current: tuple[int, ...], target: tuple[int, ...], size: int = GB) -> Move:
    return Move(OWNER, TopicPartition("orders", index), current, target, size_bytes=size, position=index)


def test_one_move_takes_its_bytes_over_the_throttle() -> None:
    found = estimate([move(0, (1, 2), (1, 3))], Execution(throttle=RATE), poll_interval=10)
    assert found.seconds == pytest.approx(GB / RATE) and found.at_throttle_seconds == pytest.approx(GB / RATE)
    assert "50000000 B/s" in found.note


def test_without_a_throttle_kpo_does_not_guess() -> None:
    found = estimate([move(0, (1, 2), (1, 3))], Execution(), poll_interval=10)
    assert found.seconds is None and found.at_throttle_seconds is None and "execution.throttle" in found.note


def test_a_reorder_copies_nothing_and_takes_no_time() -> None:
    assert estimate([move(0, (1, 2), (2, 1))], Execution(), poll_interval=10).seconds == 0.0


def test_one_move_at_a_time_waits_for_the_poll_unless_refilled_between_polls() -> None:
    # Two moves out of broker 1, one at a time: 20 s each; the second starts at the next look after the first ends.
    moves = [move(0, (1, 2), (1, 3)), move(1, (1, 4), (1, 5))]
    one_at_a_time = Execution(limits=Limits(max_moves=1), throttle=RATE)
    polled = estimate(moves, one_at_a_time, poll_interval=30)
    assert polled.seconds == pytest.approx(30 + 20), "the second move starts at the poll after 20 s"
    assert polled.at_throttle_seconds == pytest.approx(40), "broker 1 sends both"
    refilled = estimate(moves, one_at_a_time, poll_interval=30, refill=RefillPolicy(poll_interval=30),
                        pass_seconds=0.1)
    assert polled.seconds is not None and refilled.seconds is not None
    assert refilled.at_throttle_seconds == pytest.approx(40)
    assert 40 <= refilled.seconds < polled.seconds


def test_incremental_moves_are_chains_of_steps() -> None:
    # Replacing both replicas: both copies come from leader 1 (40 s together); Incremental asks for one new replica at
    # a time (KIP-455 steps (1, 2, 3), (1, 3), (1, 3, 4), (3, 4)), each after a poll saw the previous one end.
    whole = [move(0, (1, 2), (3, 4))]
    at_once = estimate(whole, Execution(throttle=RATE), poll_interval=3)
    stepwise = estimate(whole, Execution(throttle=RATE), poll_interval=3, incremental=True)
    assert at_once.seconds == pytest.approx(40)
    assert stepwise.seconds is not None and at_once.seconds is not None
    assert 40 < stepwise.seconds <= 40 + 3 * 3, "two copies in a row, three polls' rounding at most"


def test_past_the_simulation_limit_only_the_floor_is_stated() -> None:
    moves = [move(i, (1, 2), (1, 3)) for i in range(5)]
    found = estimate(moves, Execution(throttle=RATE), poll_interval=10, limit=4)
    assert found.seconds is None and found.at_throttle_seconds == pytest.approx(5 * 20)
    assert "more than the 4" in found.note


def test_planned_moves_start_from_the_snapshot_with_the_sizes_kafka_reports() -> None:
    tp = TopicPartition("orders", 0)
    view = ClusterView(brokers={b: Broker(b) for b in (1, 2, 3)}, partitions={tp: PartitionState((2, 1), 2, (2, 1))},
                       replica_sizes={(tp, 2): 700, (tp, 1): 650})
    [planned] = planned_moves({tp: (2, 3)}, {tp: (1, 2)}, view, OWNER)
    assert (planned.current, planned.target, planned.leader) == ((1, 2), (2, 3), 2)
    assert planned.size_bytes == view.partition_size(tp) > 0


def test_copies_between_log_dirs_take_the_busiest_brokers_bytes_over_the_intra_broker_rate() -> None:
    t0, t1, t2 = (TopicPartition("orders", p) for p in range(3))
    copies = {(t0, 1): "/b", (t1, 1): "/b", (t2, 2): "/c"}
    sizes = {(t0, 1): 300, (t1, 1): 500, (t2, 2): 600, (t2, 1): 10_000}
    found = dir_estimate(copies, sizes, 100.0)
    assert (found.seconds, found.at_throttle_seconds) == (8.0, 8.0)
    assert "broker 1" in found.note
    unknown = dir_estimate(copies, sizes, None)
    assert unknown.seconds is None and "logDirThrottle" in unknown.note
    assert dir_estimate({}, sizes, None).seconds == 0.0


def test_a_mixed_proposal_splits_into_reassignments_copies_between_dirs_and_landing_replicas() -> None:
    t0, t1, t2 = (TopicPartition("orders", p) for p in range(3))
    targets = {t0: (1, 2), t1: (3, 2), t2: (1, 3)}
    basis = {t0: (1, 2), t1: (1, 2), t2: (1, 2)}
    log_dirs = {t0: ("/b", "any"), t1: ("/a", "/c"), t2: ("any", "any")}
    split = split_moves(targets, basis, log_dirs)
    assert split.reassigned == {t1: (3, 2), t2: (1, 3)}
    assert split.dir_copies == {(t0, 1): "/b", (t1, 2): "/c"}
    assert split.landing == {(t1, 3): "/a"}
    # A disk plan: nothing reassigned, every named dir a copy within the broker.
    disks = split_moves({t0: (1, 2)}, {t0: (1, 2)}, {t0: ("/b", "/c")})
    assert disks.reassigned == {} and disks.landing == {} and set(disks.dir_copies) == {(t0, 1), (t0, 2)}


def test_a_mixed_estimate_adds_the_two_times_and_takes_the_longer_bytes_at_throttle() -> None:
    replicas, dirs = Estimate(100.0, 80.0, "at 1000 B/s"), Estimate(30.0, 30.0, "at logDirThrottle")
    both = combined_estimate(replicas, dirs, landing=2)
    assert (both.seconds, both.at_throttle_seconds) == (130.0, 80.0)
    assert "between brokers: at 1000 B/s" in both.note
    assert "2 new replica(s) created in the dir the plan names" in both.note
    unknown = combined_estimate(replicas, Estimate(None, None, "no estimate without execution.logDirThrottle"))
    assert unknown.seconds is None and unknown.at_throttle_seconds is None and "logDirThrottle" in unknown.note
