"""Leadership away from demoted and excluded brokers (issue 26, items 1, 2 and E): which selected partitions a
preferred election must take, which it cannot, and the plans refused because nobody would be left to lead."""

from __future__ import annotations

from kpo.domain.leaders_away import NO_BROKER_TO_LEAD, StillLeading, leaders_away, nobody_to_lead
from kpo.domain.model import KafkaRefusal, PartitionState, TopicPartition
from kpo.domain.plan_contract import Goal, PlanRequest

P = [TopicPartition("orders", p) for p in range(6)]


def test_a_partition_led_by_a_demoted_broker_is_elected_even_when_its_list_already_ends_with_it() -> None:
    # The repro of item 1: [1, 3] reordered to [3, 1] by hand, no election: broker 1 still leads.
    away = leaders_away({P[0]: PartitionState((3, 1), 1, (1, 3))}, {1})
    assert dict(away.elect) == {P[0]: 1} and not away.stuck


def test_item_2_replicas_3_2_isr_2_3_led_by_2_goes_to_3() -> None:
    away = leaders_away({P[0]: PartitionState((3, 2), 2, (2, 3))}, {2})
    assert list(away.elect) == [P[0]]


def test_partitions_led_elsewhere_or_by_nobody_are_left_alone() -> None:
    away = leaders_away({P[0]: PartitionState((1, 2), 2, (1, 2)),  # broker 1 is only a follower
                         P[1]: PartitionState((1, 2), -1, ())},  # offline: nobody leads
                        {1})
    assert not away.elect and not away.stuck


def test_a_partition_nobody_else_in_sync_can_lead_is_named_not_elected() -> None:
    partitions = {P[0]: PartitionState((3, 1), 1, (1,)),  # 3 out of sync
                  P[1]: PartitionState((1,), 1, (1,)),  # a single replica
                  P[2]: PartitionState((2, 1), 1, (1, 2))}
    away = leaders_away(partitions, {1})
    assert list(away.elect) == [P[2]]
    assert set(away.stuck) == {P[0], P[1]}
    assert away.stuck[P[0]] == StillLeading(1, "no other in-sync replica (replicas [3, 1], ISR [1])")


def test_a_partition_whose_preferred_replica_must_lead_nothing_too_is_named() -> None:
    away = leaders_away({P[0]: PartitionState((2, 1, 3), 1, (1, 2, 3))}, {1, 2})
    assert not away.elect and "preferred replica, broker 2" in away.stuck[P[0]].reason


def test_after_the_election_kafkas_refusals_join_the_partitions_that_could_not_move() -> None:
    partitions = {P[0]: PartitionState((3, 1), 1, (1, 3)), P[1]: PartitionState((2, 1), 1, (1, 2)),
                  P[2]: PartitionState((2, 1), 1, (1, 2)), P[3]: PartitionState((1,), 1, (1,))}
    away = leaders_away(partitions, {1})
    left = away.after({P[0]: None, P[1]: KafkaRefusal("ELECTION_NOT_NEEDED"),
                       P[2]: KafkaRefusal("PREFERRED_LEADER_NOT_AVAILABLE", "not in sync")})
    assert list(left) == [P[2], P[3]], "elected and already preferred partitions are led elsewhere"
    assert left[P[2]] == StillLeading(1, "Kafka refused the preferred leader election: "
                                         "PREFERRED_LEADER_NOT_AVAILABLE: not in sync")
    assert "1 selected partition(s) stay led by broker(s) [1]: orders-3 (leader 1)" in away.describe()


def test_demoting_every_live_broker_is_refused() -> None:
    every = PlanRequest(goal=Goal.DEMOTE_BROKERS, brokers=(1, 2, 3))
    problem = nobody_to_lead(every, [1, 2, 3])
    assert problem is not None and problem.reason == NO_BROKER_TO_LEAD and problem.field == "spec.plan.brokers"
    assert "every live broker ([1, 2, 3])" in problem.message
    assert nobody_to_lead(PlanRequest(goal=Goal.DEMOTE_BROKERS, brokers=(1, 2)), [1, 2, 3]) is None
    # A dead broker cannot lead either: demoting the live ones leaves nobody.
    assert nobody_to_lead(PlanRequest(goal=Goal.DEMOTE_BROKERS, brokers=(1, 2)), [1, 2]) is not None


def test_excluding_every_live_broker_from_leadership_is_refused_whatever_the_goal() -> None:
    for goal in (Goal.REBALANCE, Goal.ADD_BROKERS):
        request = PlanRequest(goal=goal, brokers=(3,) if goal is Goal.ADD_BROKERS else (),
                              exclude_leaders=(1, 2, 3))
        problem = nobody_to_lead(request, [1, 2, 3])
        assert problem is not None and problem.field == "spec.plan.excludeLeaders", goal
    assert nobody_to_lead(PlanRequest(goal=Goal.REBALANCE, exclude_leaders=(1, 2)), [1, 2, 3]) is None
    both = nobody_to_lead(PlanRequest(goal=Goal.DEMOTE_BROKERS, brokers=(1,), exclude_leaders=(2, 3)), [1, 2, 3])
    assert both is not None and "cover every live broker" in both.message
    # Brokers to add are not excluded from leadership: a RemoveBrokers' brokers are not either.
    assert nobody_to_lead(PlanRequest(goal=Goal.REMOVE_BROKERS, brokers=(1, 2, 3)), [1, 2, 3]) is None
