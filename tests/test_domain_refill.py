"""Refill between polls (kpo.domain.refill): when a tick looks at its moves again, and when it ends."""

from __future__ import annotations

import pytest

from kpo.domain.model import ClusterView, OngoingReassignment, PartitionState, TopicPartition
from kpo.domain.refill import Elapsed, RefillPolicy, Work, next_probe, remaining_bytes

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
MiB = 2**20
POLICY = RefillPolicy(poll_interval=2.0, first_probe=0.25, growth=1.5, tick_share=0.9)
FRESH = Elapsed(tick=0.1, since_pass=0.0, last_pass=0.1)


def small_moves(waiting: int = 3, throttle: float | None = 64 * MiB) -> Work:
    return Work(in_flight={P0: 5 * MiB, P1: 20 * MiB}, waiting=waiting, throttle=throttle)


def test_a_tick_with_small_moves_in_flight_and_moves_waiting_looks_again_soon() -> None:
    assert next_probe(small_moves(), FRESH, POLICY) == pytest.approx(0.25)


@pytest.mark.parametrize("work", [
    Work(in_flight={P0: 1.0}, waiting=0),  # nothing waits for a slot: a completion would start nothing
    Work(in_flight={}, waiting=5),  # nothing of its own in flight: no completion to wait for
])
def test_no_look_when_a_completion_could_not_start_anything(work: Work) -> None:
    assert next_probe(work, FRESH, POLICY) is None


def test_moves_that_cannot_end_before_the_next_poll_under_the_throttle_are_not_watched() -> None:
    # 1 GiB at 64 MiB/s takes at least 16 s: no look within this 2 s interval can see it end.
    large = Work(in_flight={P0: 1024 * MiB}, waiting=10, throttle=64 * MiB)
    assert next_probe(large, FRESH, POLICY) is None


def test_a_few_small_moves_among_long_ones_are_left_to_the_polls() -> None:
    # Two of three moves need 16 s at least: a refill would save a second on moves of minutes.
    mixed = Work(in_flight={P0: 1024 * MiB, P1: 1024 * MiB, TopicPartition("orders", 2): MiB}, waiting=10,
                 throttle=64 * MiB)
    assert next_probe(mixed, FRESH, POLICY) is None
    mostly_small = Work(in_flight={P0: 1024 * MiB, P1: MiB, TopicPartition("orders", 2): MiB}, waiting=10,
                        throttle=64 * MiB)
    assert next_probe(mostly_small, FRESH, POLICY) == pytest.approx(0.25)


def test_the_first_look_waits_until_the_smallest_move_can_have_ended() -> None:
    # 48 MiB at 64 MiB/s: 0.75 s at the earliest, of which 0.25 s have passed since it was measured.
    work = Work(in_flight={P0: 48 * MiB, P1: 100 * MiB}, waiting=1, throttle=64 * MiB)
    assert next_probe(work, Elapsed(tick=0.3, since_pass=0.25, last_pass=0.05), POLICY) == pytest.approx(0.5)


def test_without_a_throttle_the_backoff_alone_sets_the_pace() -> None:
    work = small_moves(throttle=None)
    delays = [next_probe(work, Elapsed(0.1, 0.0, 0.05, quiet), POLICY) for quiet in range(3)]
    assert delays == pytest.approx([0.25, 0.375, 0.5625])


def test_a_tick_ends_before_the_next_poll_with_room_for_one_more_pass() -> None:
    # 1.8 s of the 2 s interval are the tick's: at 1.3 s, a look in 0.25 s and a pass of 0.3 s would end at 1.85 s.
    assert next_probe(small_moves(), Elapsed(tick=1.3, since_pass=0.0, last_pass=0.3), POLICY) is None
    assert next_probe(small_moves(), Elapsed(tick=1.2, since_pass=0.0, last_pass=0.3), POLICY) == pytest.approx(0.25)


def test_a_first_probe_of_zero_turns_watching_off() -> None:
    off = RefillPolicy(poll_interval=2.0, first_probe=0.0)
    assert next_probe(small_moves(), FRESH, off) is None


@pytest.mark.parametrize("settings", [
    {"poll_interval": 0.0}, {"poll_interval": 2.0, "first_probe": -1.0}, {"poll_interval": 2.0, "growth": 0.5},
    {"poll_interval": 2.0, "tick_share": 1.5},
])
def test_a_nonsensical_policy_is_refused(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="invalid refill policy"):
        RefillPolicy(**settings)


def view_of(sizes: dict[tuple[TopicPartition, int], int], ongoing: dict[TopicPartition, OngoingReassignment]
            ) -> ClusterView:
    partitions = {P0: PartitionState((1, 2, 3, 4), 1, (1, 2, 3))}
    return ClusterView(brokers={}, partitions=partitions, ongoing=ongoing, replica_sizes=sizes)


def test_bytes_left_are_the_log_size_less_what_the_slowest_new_replica_has() -> None:
    sizes = {(P0, 1): 100, (P0, 2): 100, (P0, 3): 60, (P0, 4): 30}
    moving = {P0: OngoingReassignment(replicas=(1, 2, 3, 4), adding=(3, 4), removing=(2,))}
    assert remaining_bytes(view_of(sizes, moving), P0) == 70.0


def test_a_move_not_listed_yet_has_everything_left() -> None:
    assert remaining_bytes(view_of({(P0, 1): 100, (P0, 3): 40}, {}), P0) == 100.0
