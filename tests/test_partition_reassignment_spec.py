"""What a PartitionReassignment spec means to its life cycles (spec.py): the intent, the plan request."""

from __future__ import annotations

from typing import Any

import pytest

from kpo.api import PartitionReassignmentSpec
from kpo.domain.plan_contract import Goal
from kpo.resources.partition_reassignment.spec import intent_of, plan_intent_of, plan_request


def spec(plan: dict[str, Any], **more: Any) -> PartitionReassignmentSpec:
    return PartitionReassignmentSpec.model_validate({"plan": plan, **more})


def test_a_demotion_elects_the_preferred_leaders_after_its_moves_without_being_asked() -> None:
    demote = spec({"goal": "DemoteBrokers", "brokers": [2], "topics": ["orders"]})
    assert intent_of(demote, 1).elect_leaders_after
    request = plan_request(demote)
    assert (request.goal, request.brokers, request.topics) == (Goal.DEMOTE_BROKERS, (2,), ("orders",))


@pytest.mark.parametrize("elect", [False, True])
def test_other_goals_elect_only_when_asked(elect: bool) -> None:
    drain = spec({"goal": "RemoveBrokers", "brokers": [2]}, execution={"electLeadersAfter": elect})
    assert intent_of(drain, 1).elect_leaders_after is elect


def test_a_demotion_needs_its_brokers() -> None:
    with pytest.raises(ValueError, match="need the broker ids in brokers"):
        spec({"goal": "DemoteBrokers"})


def test_the_brokers_that_must_lead_nothing_are_the_demoted_ones_and_excluded_leaders_when_electing() -> None:
    demote = spec({"goal": "DemoteBrokers", "brokers": [2], "excludeLeaders": [3]})
    assert intent_of(demote, 1).leaders_away == plan_intent_of(demote, 1).leaders_away == {2, 3}
    electing = spec({"goal": "Rebalance", "excludeLeaders": [2]}, execution={"electLeadersAfter": True})
    assert intent_of(electing, 1).leaders_away == plan_intent_of(electing, 1).leaders_away == {2}
    # Without the election only the lists change (the docs say so): nothing is elected away.
    assert intent_of(spec({"goal": "Rebalance", "excludeLeaders": [2]}), 1).leaders_away == frozenset()
    explicit = PartitionReassignmentSpec.model_validate(
        {"partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 2]}],
         "execution": {"electLeadersAfter": True}})
    assert intent_of(explicit, 1).leaders_away == frozenset()


def test_relieve_capacity_hands_its_threshold_and_excluded_brokers_to_the_planning_job() -> None:
    relieve = plan_request(spec({"goal": "RelieveCapacity", "threshold": 0.8, "excludeBrokers": [4]}))
    assert (relieve.goal, relieve.threshold, relieve.exclude_brokers) == (Goal.RELIEVE_CAPACITY, 0.8, (4,))
    assert plan_request(spec({"goal": "Rebalance"})).threshold is None
