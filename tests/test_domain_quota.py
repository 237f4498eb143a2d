"""When Kafka's windowed replication quota lets moves beat bytes / throttle (kpo.domain.quota), and how the estimate
says so (issue 26, item 4). The cases are the runs measured on the test bed (docs/api.md): 1.5 MB and 6 MB partitions
at 150 kB/s, where the quota window passes 150,000 x 11 = 1.65 MB."""

from __future__ import annotations

import datetime as dt

import pytest

from kpo.domain.estimate import estimate
from kpo.domain.fluid import SimMove
from kpo.domain.model import TopicPartition
from kpo.domain.quota import FETCH_MAX_BYTES, RESPONSE_MAX_BYTES, Burst, burst, fetch_round_bytes
from kpo.domain.scheduling import Execution, Limits, Move, Owner

RATE = 150_000.0
WINDOW = RATE * 11  # 1.65 MB
MB = 1_000_000
OWNER = Owner(dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "ns", "drain")


def drain(partitions: int, size: float, receivers: tuple[int, ...]) -> list[SimMove]:
    """``partitions`` partitions of ``size`` bytes led by broker 3, each to the next of ``receivers`` in turn."""
    return [SimMove(i, 3, (receivers[i % len(receivers)],), size, 0.0) for i in range(partitions)]


def test_one_partition_fetches_at_most_one_mib_a_round_which_the_window_pays_back() -> None:
    # 6 MB at 150 kB/s: measured 39.6 s for 40 s of bytes over the throttle.
    moves = drain(1, 6 * MB, (1,))
    assert fetch_round_bytes(moves) == {("out", 3): FETCH_MAX_BYTES, ("in", 1): FETCH_MAX_BYTES}
    assert burst(moves, RATE) is None


def test_twelve_partitions_drained_at_once_pass_more_than_the_window_in_one_round() -> None:
    # 12 x 1.5 MB from broker 3 to brokers 1 and 2: each follower fetches 6 x 1 MiB in one request, broker 3 sends
    # both, 12 MiB against the 1.65 MB its quota passes in 11 s. Measured: 37.7 s for 120 s.
    moves = drain(12, 1.5 * MB, (1, 2))
    assert fetch_round_bytes(moves) == {("out", 3): 12 * FETCH_MAX_BYTES, ("in", 1): 6 * FETCH_MAX_BYTES,
                                        ("in", 2): 6 * FETCH_MAX_BYTES}
    assert burst(moves, RATE) == Burst(3, "out", 12 * FETCH_MAX_BYTES, WINDOW)


def test_one_request_carries_at_most_the_response_limit() -> None:
    # Twelve partitions into one broker from one leader: one request, capped at replica.fetch.response.max.bytes.
    assert fetch_round_bytes(drain(12, 1.5 * MB, (1,)))[("in", 1)] == RESPONSE_MAX_BYTES


def test_partitions_smaller_than_a_fetch_count_their_size() -> None:
    assert fetch_round_bytes(drain(3, 200_000, (1,))) == {("out", 3): 600_000, ("in", 1): 600_000}
    assert burst(drain(3, 200_000, (1,)), RATE) is None


def moves_of(partitions: int, size: int) -> list[Move]:
    return [Move(OWNER, TopicPartition("orders", i), (3,), (1 + i % 2,), size_bytes=size, position=i, leader=3)
            for i in range(partitions)]


def test_the_estimate_says_kafka_will_likely_finish_sooner_when_the_moves_in_flight_burst() -> None:
    found = estimate(moves_of(12, 1_500_000), Execution(throttle=RATE), poll_interval=2)
    assert found.seconds is not None and found.at_throttle_seconds == pytest.approx(120)
    assert found.burst == Burst(3, "out", 12 * FETCH_MAX_BYTES, WINDOW)
    assert "Kafka will likely finish sooner" in found.note and "broker 3 sends up to 12.6 MB" in found.note


def test_one_move_at_a_time_keeps_each_round_within_the_window() -> None:
    # The same drain, one move in flight: one partition's 1 MiB a round, which the window pays back.
    found = estimate(moves_of(12, 1_500_000), Execution(limits=Limits(max_moves=1), throttle=RATE),
                     poll_interval=2)
    assert found.burst is None and "sooner" not in found.note


def test_past_the_simulation_limit_kafka_may_finish_sooner_with_everything_in_flight() -> None:
    found = estimate(moves_of(12, 1_500_000), Execution(throttle=RATE), poll_interval=2, limit=4)
    assert found.seconds is None and found.burst is not None and "Kafka may finish sooner" in found.note
