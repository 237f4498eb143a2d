"""The bench's greedy reference planner (bench/planner/greedy.py): its rules on small clusters, no Spark, no files."""

from __future__ import annotations

from collections import Counter

import pytest
from bench.planner.greedy import Partition, Spread, is_offline, plan, selected, setup, uneven_partitions

from kpo.domain.plan_contract import BrokerInfo, Goal, PlanRequest

GB = 10**9


def brokers(racks: dict[str, list[int]], dead: tuple[int, ...] = ()) -> list[BrokerInfo]:
    return [BrokerInfo(id=b, rack=rack, alive=b not in dead) for rack, ids in racks.items() for b in ids]


def rack_of(infos: list[BrokerInfo]) -> dict[int, str]:
    return {b.id: b.rack for b in infos if b.rack is not None}


THREE_RACKS = brokers({"a": [1, 2, 3], "b": [4, 5, 6], "c": [7, 8, 9]})


def loads(assignment: dict[tuple[str, int], tuple[int, ...]], parts: list[Partition]) -> Counter[int]:
    size = {p.key: p.size for p in parts}
    out: Counter[int] = Counter()
    for key, replicas in assignment.items():
        for b in replicas:
            out[b] += size[key]
    return out


def racks_held(replicas: tuple[int, ...], infos: list[BrokerInfo]) -> list[int]:
    racks = rack_of(infos)
    return sorted(Counter(racks[b] for b in replicas).values(), reverse=True)


# -- Spread ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("replicas", "expected"), [
    ((1, 4, 7), 0),             # three racks, one each
    ((1, 2, 7), 2),             # two in rack a, none in b: one beyond a's share, one missing in b
    ((1, 4), 0),                # RF 2 in two racks
    ((1, 2), 1),                # RF 2 in one rack: one beyond its share
    ((1, 2, 4, 7), 0),          # RF 4 over 3 racks: 2+1+1
    ((1, 2, 4, 5), 1),          # 2+2+0: rack c lacks its floor share
    ((1, 2, 3, 4), 2),          # 3+1+0: one beyond the ceiling, one missing
    ((1, None, None, None), 0),  # the empty slots can still give racks b and c their share
    ((1, 2, None, None), 0),    # 2 + two empty slots for b and c
    ((1, 2, 4, None), 0),       # the last slot must go to rack c, and can
    ((1, 2, 3, None), 2),       # rack a is past its ceiling whatever the last slot does
    ((1, 10, 4), 1),            # a broker outside the racks (not taking part) does not count: rack c lacks one
])
def test_spread_counts_replicas_away_from_an_even_spread(replicas: tuple[int | None, ...], expected: int) -> None:
    assert Spread(rack_of(THREE_RACKS)).uneven(list(replicas)) == expected


def test_spread_caps_a_rack_share_at_its_brokers() -> None:
    infos = brokers({"a": [1, 2, 3], "b": [4, 5, 6], "c": [7]})
    spread = Spread(rack_of(infos))
    # RF 6 over 3 racks: 2 each, but rack c has one broker, so 3+2+1 is as even as these racks allow.
    assert spread.uneven([1, 2, 4, 5, 7, 3]) == 1  # 3 in rack a is one beyond its ceiling (2) ...
    assert spread.uneven([1, 2, 4, 5, 7, 6]) == 1  # ... as 3 in rack b is: six replicas cannot fit a 2+2+1 cap
    assert spread.uneven([1, 2, 4, 5, 7]) == 0     # RF 5: 2+2+1


def test_without_racks_every_spread_is_even() -> None:
    assert Spread({}).uneven([1, 2, 3]) == 0


# -- request facts --------------------------------------------------------------------------------------------------

def test_setup_mirrors_the_planners_broker_rules() -> None:
    infos = brokers({"a": [1, 2], "b": [3, 4]}, dead=(4,))
    removing = setup(PlanRequest(goal=Goal.REMOVE_BROKERS, brokers=(2,)), infos)
    assert removing.eligible == {1, 3}
    assert removing.removed == {2}
    assert removing.balancing
    assert setup(PlanRequest(goal=Goal.REBALANCE, brokers=(1, 2, 4)), infos).eligible == {1, 2}
    add_only = setup(PlanRequest(goal=Goal.REPLICATION_FACTOR, replication_factor=3), infos)
    assert not add_only.balancing
    assert setup(PlanRequest(goal=Goal.REPLICATION_FACTOR, replication_factor=3, rebalance_existing=True),
                 infos).balancing
    assert removing.rack_of == {1: "a", 3: "b"}
    assert setup(PlanRequest(goal=Goal.REBALANCE, rack_aware=False), infos).rack_of == {}
    one_without = [BrokerInfo(id=1, rack="a"), BrokerInfo(id=2, rack=None), BrokerInfo(id=3, rack="b")]
    assert setup(PlanRequest(goal=Goal.REBALANCE), one_without).rack_of == {}


def test_selection_and_offline() -> None:
    request = PlanRequest(goal=Goal.REBALANCE, topics=("a",), topic_pattern="log-.*", exclude_topics=("log-x",))
    assert selected(request, "a")
    assert selected(request, "log-1")
    assert not selected(request, "log-x")
    assert not selected(request, "xlog-1")  # the pattern matches the whole name
    assert selected(PlanRequest(goal=Goal.REBALANCE), "anything")
    assert is_offline((4, 5), frozenset({1, 2}))
    assert not is_offline((4, 1), frozenset({1, 2}))


# -- plans ----------------------------------------------------------------------------------------------------------

def test_replicas_on_a_removed_or_dead_broker_move_within_the_spread_rules() -> None:
    infos = brokers({"a": [1, 2], "b": [3, 4], "c": [5, 6]}, dead=(2,))
    parts = [Partition("t", i, (2, 3, 5), GB) for i in range(4)] + [Partition("u", 0, (1, 4, 6), GB)]
    result = plan(PlanRequest(goal=Goal.REMOVE_BROKERS, brokers=(2,)), infos, parts)
    for i in range(4):
        # Three replicas over three racks: the one on broker 2 can only go to broker 1, its rack's other broker
        # (the balancing that follows may move the others within their racks).
        replicas = result.assignment[("t", i)]
        assert replicas[0] == 1
        assert racks_held(replicas, infos) == [1, 1, 1]
    assert 2 not in loads(result.assignment, parts)
    assert result.offline == ()
    assert result.unplaced == 0


def test_offline_partitions_are_left_as_they_are_and_reported() -> None:
    infos = brokers({"a": [1, 2], "b": [3, 4]}, dead=(2, 4))
    parts = [Partition("t", 0, (2,), GB), Partition("t", 1, (2, 4), GB), Partition("t", 2, (2, 3), GB)]
    result = plan(PlanRequest(goal=Goal.REMOVE_BROKERS, brokers=(2, 4)), infos, parts)
    assert result.offline == (("t", 0), ("t", 1))
    assert result.assignment[("t", 0)] == (2,)
    assert result.assignment[("t", 1)] == (2, 4)
    assert result.assignment[("t", 2)] == (1, 3)


def test_rf_above_the_racks_uses_every_rack_before_doubling_up() -> None:
    parts = [Partition("t", i, (1 + i % 3, 4 + i % 3), (i + 1) * GB) for i in range(30)]
    request = PlanRequest(goal=Goal.REPLICATION_FACTOR, replication_factor=4, rebalance_existing=True)
    result = plan(request, THREE_RACKS, parts)
    for p in parts:
        replicas = result.assignment[p.key]
        assert len(replicas) == 4
        assert len(set(replicas)) == 4
        assert racks_held(replicas, THREE_RACKS) == [2, 1, 1]  # never 2+2+0
        assert replicas[0] == p.replicas[0]  # the leader stays
    assert uneven_partitions(result.assignment, {p.key: p for p in parts}, request, THREE_RACKS) == 0


def test_an_rf_increase_only_adds_replicas_by_default() -> None:
    parts = [Partition("t", i, (1 + i % 3, 4 + i % 3), (10 - i) * GB) for i in range(9)]
    result = plan(PlanRequest(goal=Goal.REPLICATION_FACTOR, replication_factor=3), THREE_RACKS, parts)
    assert result.moves == 0
    for p in parts:
        replicas = result.assignment[p.key]
        assert replicas[:2] == p.replicas  # nothing existing moves, the leader stays first
        assert replicas[2] in (7, 8, 9)  # the third rack
    # Largest partition first, each to the least loaded valid broker: the new replicas spread over rack c.
    added = loads({p.key: result.assignment[p.key][2:] for p in parts}, parts)
    assert max(added.values()) - min(added.values()) <= 10 * GB


def test_rebalance_brings_every_broker_into_the_band_with_little_movement() -> None:
    infos = brokers({"a": [1, 2], "b": [3, 4]})
    # Broker 1 and 3 carry everything; 2 and 4 are empty (new brokers without AddBrokers' name, a plain rebalance).
    parts = [Partition("t", i, (1, 3) if i % 2 else (3, 1), GB) for i in range(40)]
    request = PlanRequest(goal=Goal.REBALANCE, tolerance=0.05)
    result = plan(request, infos, parts)
    after = loads(result.assignment, parts)
    assert all(19 * GB <= after[b] <= 21 * GB for b in (1, 2, 3, 4))  # mean 20, +-5 %
    moved = sum(len(set(result.assignment[p.key]) - set(p.replicas)) for p in parts)
    assert moved == 38  # the lower bound: brokers 1 and 3 shed down to the top of the band, 21
    for p in parts:
        assert racks_held(result.assignment[p.key], infos) == [1, 1]


def test_a_rack_bound_overload_sheds_what_it_can() -> None:
    # Racks of 2, 2 and 1 brokers: rack c's single broker 5 must hold one replica of every RF 3 partition, so the
    # band (mean 8) is out of reach; the greedy still moves every RF 1 replica off it and evens out the rest.
    infos = brokers({"a": [1, 2], "b": [3, 4], "c": [5]})
    parts = [Partition("t", i, (1, 3, 5), GB) for i in range(10)] + [Partition("u", i, (5,), GB) for i in range(10)]
    result = plan(PlanRequest(goal=Goal.REBALANCE), infos, parts)
    after = loads(result.assignment, parts)
    assert after[5] == 10 * GB  # its RF 3 share, nothing more
    assert sorted(after[b] for b in (1, 2, 3, 4)) == [7 * GB, 7 * GB, 8 * GB, 8 * GB]
    for i in range(10):
        assert racks_held(result.assignment[("t", i)], infos) == [1, 1, 1]


def test_an_unreachable_band_still_evens_out_the_brokers_of_a_small_rack() -> None:
    # Every partition needs a replica in rack c, which has two brokers: they stay above the band (4/3 of the mean)
    # whatever happens, but the worst of them still comes down to what the rack allows, by moves inside the rack.
    infos = brokers({"a": [1, 2, 3], "b": [4, 5, 6], "c": [7, 8]})
    parts = [Partition("t", i, (1 + i % 3, 4 + i % 3, 7), GB) for i in range(12)]
    result = plan(PlanRequest(goal=Goal.REBALANCE), infos, parts)
    after = loads(result.assignment, parts)
    assert after[7] == after[8] == 6 * GB
    assert result.moves == 6


def test_the_greedy_stops_when_no_move_helps() -> None:
    # Two brokers, one huge partition: no move narrows the gap, so nothing moves.
    infos = [BrokerInfo(id=1), BrokerInfo(id=2), BrokerInfo(id=3)]
    parts = [Partition("t", 0, (1, 2), 100 * GB), Partition("t", 1, (3,), GB)]
    result = plan(PlanRequest(goal=Goal.REBALANCE), infos, parts)
    assert result.moves == 0
    assert result.assignment == {("t", 0): (1, 2), ("t", 1): (3,)}


def test_uneven_partitions_counts_an_assignment_against_the_racks() -> None:
    parts = {p.key: p for p in (Partition("t", 0, (1, 4, 7), GB), Partition("t", 1, (1, 2, 7), GB))}
    request = PlanRequest(goal=Goal.REBALANCE)
    assert uneven_partitions({}, parts, request, THREE_RACKS) == 1
    assert uneven_partitions({("t", 1): (1, 5, 7)}, parts, request, THREE_RACKS) == 0
