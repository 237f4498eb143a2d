"""KAFKA-6794's incremental steps: the ticket's worked example, then properties over arbitrary moves."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kpo.domain.incremental import incremental_steps, kip455_submissions, live_replicas


def test_the_tickets_worked_example_step_by_step() -> None:
    assert incremental_steps((0, 1, 2), (3, 4, 5)) == [(0, 1, 2, 3), (0, 2, 3, 4), (0, 3, 4, 5), (3, 4, 5)]


def test_nothing_to_do_gives_no_steps() -> None:
    assert incremental_steps((4, 1, 2), (4, 1, 2)) == []


def test_a_pure_reordering_is_one_step() -> None:
    assert incremental_steps((0, 1, 2), (2, 0, 1)) == [(2, 0, 1)]


def test_one_replica_moved_keeps_the_leader_and_ends_in_target_order() -> None:
    assert incremental_steps((0, 1, 2), (0, 3, 2)) == [(0, 1, 2, 3), (0, 3, 2)]


def test_moving_the_leader_only_drops_it_last() -> None:
    assert incremental_steps((0, 1, 2), (1, 2, 3)) == [(0, 1, 2, 3), (1, 2, 3)]


def test_replication_factor_grows_one_replica_per_step() -> None:
    assert incremental_steps((0, 1), (0, 1, 2, 3)) == [(0, 1, 2), (0, 1, 2, 3)]
    assert incremental_steps((0, 1, 2), (1, 2, 3, 4)) == [(0, 1, 2, 3), (0, 1, 2, 3, 4), (1, 2, 3, 4)]


def test_replication_factor_shrinks_one_replica_per_step() -> None:
    assert incremental_steps((0, 1, 2, 3), (0, 1)) == [(0, 1, 3), (0, 1)]
    assert incremental_steps((0, 1, 2, 3), (4, 5)) == [(0, 2, 3, 4), (0, 3, 4, 5), (0, 4, 5), (4, 5)]


def test_an_explicit_leader_other_than_the_first_replica_is_dropped_last() -> None:
    assert incremental_steps((0, 1, 2), (3, 4, 5), leader=1) == [(0, 1, 2, 3), (1, 2, 3, 4), (1, 3, 4, 5), (3, 4, 5)]


def test_kip455_submissions_split_a_drop_and_add_step_into_removal_then_addition() -> None:
    assert kip455_submissions((0, 1, 2), (3, 4, 5)) == [
        (0, 1, 2, 3),
        (0, 2, 3),
        (0, 2, 3, 4),
        (0, 3, 4),
        (0, 3, 4, 5),
        (3, 4, 5),
    ]


def test_live_replicas_are_the_submitted_ones_followed_by_those_being_removed() -> None:
    assert live_replicas((0, 1, 2, 3), (0, 2, 3, 4)) == (0, 2, 3, 4, 1)


@pytest.mark.parametrize(
    ("current", "target", "leader"),
    [((), (1,), None), ((1,), (), None), ((1, 1), (2,), None), ((1,), (2, 2), None), ((1, 2), (3,), 7)],
)
def test_malformed_replica_lists_are_refused(
    current: tuple[int, ...], target: tuple[int, ...], leader: int | None
) -> None:
    with pytest.raises(ValueError):
        incremental_steps(current, target, leader)


replica_lists = st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=6, unique=True).map(tuple)


@given(replica_lists, replica_lists)
def test_properties_of_every_step_sequence(current: tuple[int, ...], target: tuple[int, ...]) -> None:
    steps = incremental_steps(current, target)
    if current == target:
        assert steps == []
        return
    assert steps[-1] == target
    ceiling = max(len(current), len(target)) + 1
    previous = current
    for step in steps:
        assert len(set(step)) == len(step)
        assert len(step) <= ceiling
        assert step != previous
        added = set(step) - set(previous)
        dropped = set(previous) - set(step)
        assert len(added) <= 1
        assert len(dropped) <= 1
        assert not added - set(target), "only target replicas are ever added"
        # Redundancy never falls below what the partition started with (or what the target asks, if that is less).
        assert len(step) >= min(len(current), len(target))
        previous = step


@given(replica_lists, replica_lists)
def test_the_leader_stays_until_the_last_step(current: tuple[int, ...], target: tuple[int, ...]) -> None:
    steps = incremental_steps(current, target)
    leader = current[0]
    for step in steps[:-1]:
        assert leader in step
        assert step[0] == leader


@given(replica_lists, replica_lists)
def test_kip455_submissions_never_hold_more_than_one_extra_replica(
    current: tuple[int, ...], target: tuple[int, ...]
) -> None:
    submissions = kip455_submissions(current, target)
    ceiling = max(len(current), len(target)) + 1
    in_place = current
    for submitted in submissions:
        assert len(live_replicas(in_place, submitted)) <= ceiling
        assert len(set(submitted) - set(in_place)) <= 1
        in_place = submitted
    assert in_place == target
    assert [step for step in submissions if step in incremental_steps(current, target)] == incremental_steps(
        current, target
    )
