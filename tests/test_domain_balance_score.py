"""The cluster balance score (kpo.domain.balance_score): ratios over live brokers and the planner's rack rule."""

from __future__ import annotations

import pytest

from kpo.domain.balance_score import BalanceTally, Spread, balance_score, spread

RACKS = {1: "a", 2: "b", 3: "c"}


def test_an_even_cluster_scores_one_everywhere() -> None:
    parts = [((1, 2), 1), ((2, 3), 2), ((3, 1), 3)]
    score = balance_score(RACKS, parts, {1: 100, 2: 100, 3: 100})
    assert score.bytes == score.replicas == score.leaders == Spread(1.0, 1.0)
    assert (score.brokers, score.partitions, score.bytes_brokers, score.racks, score.rack_violations) == (3, 3, 3, 3, 0)


def test_max_and_min_over_mean_of_bytes_replicas_and_leaders() -> None:
    # All replicas of a topic on broker 1 and 2, broker 3 holds nothing and leads nothing.
    parts = [((1, 2), 1)] * 4 + [((1,), 1)] * 2
    score = balance_score(RACKS, parts, {1: 600, 2: 300, 3: 0})
    assert score.bytes.max_over_mean == pytest.approx(2.0)  # mean 300
    assert score.bytes.min_over_mean == 0.0
    assert score.replicas.max_over_mean == pytest.approx(6 / (10 / 3))
    assert score.replicas.min_over_mean == 0.0
    assert score.leaders.max_over_mean == pytest.approx(3.0)  # 6 leaders, all on broker 1
    assert score.leaders.min_over_mean == 0.0


def test_an_empty_live_broker_counts_as_zero_and_a_dead_one_not_at_all() -> None:
    # Broker 4 is dead (not in the live brokers): its replica counts for nobody, its bytes are not read.
    parts = [((1, 4), 1), ((2, 4), 2)]
    score = balance_score(RACKS, parts, {1: 10, 2: 10, 3: 0})
    assert score.replicas == Spread(max_over_mean=1.5, min_over_mean=0.0)
    assert score.bytes == Spread(max_over_mean=1.5, min_over_mean=0.0)
    assert score.brokers == 3


def test_bytes_only_over_brokers_that_answered_describe_log_dirs() -> None:
    score = balance_score(RACKS, [((1, 2, 3), 1)], {1: 100, 2: 50})
    assert score.bytes_brokers == 2
    assert score.bytes.max_over_mean == pytest.approx(100 / 75)
    assert score.bytes.min_over_mean == pytest.approx(50 / 75)


def test_a_cluster_without_data_or_partitions_is_balanced() -> None:
    score = balance_score(RACKS, [], {1: 0, 2: 0, 3: 0})
    assert score.bytes == score.replicas == score.leaders == Spread()
    assert spread([]) == Spread()
    assert balance_score({}, [], {}).brokers == 0


def test_a_partition_without_leader_leads_nowhere() -> None:
    score = balance_score(RACKS, [((1, 2), -1), ((2, 3), 2)], {})
    assert score.leaders.max_over_mean == pytest.approx(3.0)


@pytest.mark.parametrize(("racks", "replicas", "violation"), [
    # Enough racks: replicas must sit in min(RF, racks) distinct racks.
    ({1: "a", 2: "a", 3: "b", 4: "c"}, (1, 2), True),
    ({1: "a", 2: "a", 3: "b", 4: "c"}, (1, 3), False),
    ({1: "a", 2: "a", 3: "b", 4: "c"}, (1, 2, 3), True),
    ({1: "a", 2: "a", 3: "b", 4: "c"}, (1, 3, 4), False),
    # RF above the racks: two racks are enough for three replicas.
    ({1: "a", 2: "a", 3: "b", 4: "b"}, (1, 2, 3), False),
    ({1: "a", 2: "a", 3: "b", 4: "b"}, (1, 2), True),
    # A single replica is never crowded.
    ({1: "a", 2: "a", 3: "b"}, (1,), False),
    # Fewer than two racks: no rule to break.
    ({1: "a", 2: "a"}, (1, 2), False),
    ({1: None, 2: None, 3: None}, (1, 2), False),
    # A replica on a broker without a rack, or on a dead broker (5): its rack is unknown, so not counted.
    ({1: "a", 2: "a", 3: "b", 4: None}, (1, 2, 4), False),
    ({1: "a", 2: "a", 3: "b"}, (1, 2, 5), False),
    # Only live brokers' racks count: with rack "c" gone (broker 5 dead), two racks suffice.
    ({1: "a", 2: "a", 3: "b"}, (1, 3), False),
])
def test_rack_spread_violations_follow_the_planners_rule(racks: dict[int, str | None], replicas: tuple[int, ...],
                                                          violation: bool) -> None:
    assert balance_score(racks, [(replicas, replicas[0])], {}).rack_violations == int(violation)


def test_the_tally_folds_batches_into_per_broker_numbers_only() -> None:
    tally = BalanceTally(RACKS)
    for batch in ([((1, 2), 1), ((1, 2), 2)], [((1, 3), 1)]):
        for replicas, leader in batch:
            tally.add_partition(replicas, leader)
    tally.add_bytes(1, 30)
    tally.add_bytes(1, 30)
    tally.add_bytes(2, 30)
    score = tally.score([1, 2])
    assert tally.partitions == 3 and dict(tally.replicas) == {1: 3, 2: 2, 3: 1}
    assert score.bytes.max_over_mean == pytest.approx(60 / 45)
    assert score.leaders.max_over_mean == pytest.approx(2.0)
    assert score.leaders.min_over_mean == 0.0
