"""Placement of new partitions: distinct brokers, rack-aware, filling the emptiest brokers, leaders spread."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kpo.domain.model import Broker
from kpo.domain.placement import place_new_partitions


def counts_after(start: dict[int, int], placements: list[tuple[int, ...]]) -> tuple[Counter[int], Counter[int]]:
    replicas = Counter(start)
    leaders: Counter[int] = Counter({broker: 0 for broker in start})
    for placement in placements:
        replicas.update(placement)
        leaders[placement[0]] += 1
    return replicas, leaders


def test_three_racks_six_new_partitions_fill_every_broker_evenly() -> None:
    brokers = [Broker(1, "rack-a"), Broker(2, "rack-b"), Broker(3, "rack-c")]
    placements = place_new_partitions(brokers, {1: 6, 2: 6, 3: 6}, {1: 2, 2: 2, 3: 2}, 2, 6)
    assert placements == [(1, 2), (3, 1), (2, 3), (1, 2), (3, 1), (2, 3)]


def test_the_emptiest_brokers_are_filled_first() -> None:
    brokers = [Broker(1), Broker(2), Broker(3), Broker(4)]
    placements = place_new_partitions(brokers, {1: 10, 2: 10, 3: 0, 4: 2}, {}, 1, 5)
    replicas, _ = counts_after({1: 10, 2: 10, 3: 0, 4: 2}, placements)
    assert replicas == Counter({1: 10, 2: 10, 3: 4, 4: 3})


def test_leaders_go_to_the_brokers_leading_least() -> None:
    brokers = [Broker(1), Broker(2), Broker(3)]
    placements = place_new_partitions(brokers, {1: 3, 2: 3, 3: 3}, {1: 3, 2: 0, 3: 0}, 3, 2)
    assert sorted(placement[0] for placement in placements) == [2, 3]
    assert all(sorted(placement) == [1, 2, 3] for placement in placements)


def test_replicas_span_distinct_racks_even_when_a_rack_is_emptier() -> None:
    brokers = [Broker(1, "a"), Broker(2, "a"), Broker(3, "b"), Broker(4, "b")]
    placements = place_new_partitions(brokers, {1: 0, 2: 0, 3: 9, 4: 9}, {}, 2, 4)
    for placement in placements:
        assert {brokers[b - 1].rack for b in placement} == {"a", "b"}


def test_with_fewer_racks_than_replicas_every_rack_is_used() -> None:
    brokers = [Broker(1, "a"), Broker(2, "a"), Broker(3, "a"), Broker(4, "b")]
    placements = place_new_partitions(brokers, {}, {}, 3, 3)
    assert all(4 in placement for placement in placements)


def test_leadership_is_handed_along_a_chain_when_the_greedy_choice_leaves_it_uneven() -> None:
    # Greedy alone leads (1,2,3), (4,1,2), (3,4,1): broker 3, which already leads one partition, would lead two and
    # broker 2 none. Handing (4,1,2) to 2 and (3,4,1) to 4 evens every broker out at one.
    brokers = [Broker(1), Broker(2), Broker(3), Broker(4)]
    placements = place_new_partitions(brokers, {}, {3: 1}, 3, 3)
    assert placements == [(1, 2, 3), (2, 4, 1), (4, 3, 1)]
    _, leaders = counts_after({1: 0, 2: 0, 3: 0, 4: 0}, placements)
    assert leaders + Counter({3: 1}) == Counter({1: 1, 2: 1, 3: 1, 4: 1})


@pytest.mark.parametrize(("rf", "count"), [(0, 1), (4, 1), (1, -1)])
def test_impossible_requests_are_refused(rf: int, count: int) -> None:
    with pytest.raises(ValueError):
        place_new_partitions([Broker(1), Broker(2), Broker(3)], {}, {}, rf, count)


@st.composite
def balanced_clusters(draw: st.DrawFn) -> tuple[list[Broker], int, int, int]:
    racks = draw(st.integers(min_value=0, max_value=5))
    if racks == 0:
        brokers = [Broker(i) for i in range(draw(st.integers(min_value=1, max_value=9)))]
    else:
        per_rack = draw(st.integers(min_value=1, max_value=4))
        brokers = [Broker(100 + rack * 10 + i, f"rack-{rack}") for rack in range(racks) for i in range(per_rack)]
    rf = draw(st.integers(min_value=1, max_value=len(brokers)))
    return brokers, rf, draw(st.integers(min_value=0, max_value=40)), draw(st.integers(min_value=0, max_value=7))


@given(balanced_clusters())
def test_balanced_start_stays_balanced_on_distinct_racks(cluster: tuple[list[Broker], int, int, int]) -> None:
    brokers, rf, new_partitions, already = cluster
    start = {broker.id: already for broker in brokers}
    leaders_before = {broker.id: already // 2 for broker in brokers}
    placements = place_new_partitions(brokers, start, leaders_before, rf, new_partitions)
    assert len(placements) == new_partitions
    rack_of = {broker.id: broker.rack or str(broker.id) for broker in brokers}
    racks = len(set(rack_of.values()))
    for placement in placements:
        assert len(placement) == rf
        assert len(set(placement)) == rf
        assert len({rack_of[b] for b in placement}) == min(rf, racks)
    replicas, leaders = counts_after(start, placements)
    assert max(replicas.values()) - min(replicas.values()) <= 1
    assert max(leaders.values()) - min(leaders.values()) <= 1
    assert place_new_partitions(brokers, start, leaders_before, rf, new_partitions) == placements


@given(
    st.lists(st.integers(min_value=0, max_value=30), min_size=2, max_size=8),
    st.integers(min_value=1, max_value=2),
    st.integers(min_value=0, max_value=30),
)
def test_an_unbalanced_start_never_gets_worse(counts: list[int], rf: int, new_partitions: int) -> None:
    brokers = [Broker(i) for i in range(len(counts))]
    start = dict(enumerate(counts))
    placements = place_new_partitions(brokers, start, {}, rf, new_partitions)
    replicas, _ = counts_after(start, placements)
    assert max(replicas.values()) - min(replicas.values()) <= max(max(counts) - min(counts), 1)
