"""Demoting a broker on the real cluster (issue 16): a DemoteBrokers plan moves broker 2 to the end of every replica
list of the topic and elects the preferred leaders, so broker 2 leads none of its partitions while it keeps every
replica (no byte copied); ``stop`` with ``onStop: Revert`` puts the replica lists back as they were."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KpTopicPartition

from e2e.kafka_support import assert_replicas, create_topic, describe_topic, replicas_of, settled_description, wait_for
from e2e.kube_support import Resources
from e2e.reassignment_support import fill

KPR = "PartitionReassignment"
pytestmark = pytest.mark.usefixtures("kpo_operator")

# Broker 2 is the preferred leader of partitions 0 and 3 and a follower of every other one.
ASSIGNMENT = [[2, 1, 3], [1, 2, 3], [3, 1, 2], [2, 3, 1], [1, 3, 2], [3, 2, 1]]


def _leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    return {p: leader for p, (_, leader, _) in describe_topic(admin, topic).items()}


def test_a_demoted_broker_leads_nothing_keeps_its_replicas_and_is_restored_on_revert(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 6, assignment=ASSIGNMENT)
    fill(bootstrap_servers, topic_name, list(range(6)), messages=10)
    wait_for(lambda: [p for p, b in _leaders(kafka_admin, topic_name).items() if b == 2] == [0, 3], 30,
             "broker 2 leading partitions 0 and 3")

    resources.create(KPR, "demote", {"plan": {"goal": "DemoteBrokers", "brokers": [2], "topics": [topic_name]},
                                     "approval": {"mode": "Automatic"}, "onStop": "Revert"})
    status = resources.wait_phase(KPR, "demote", {"Succeeded", "Failed", "Invalid"}, timeout=240)
    assert status["phase"] == "Succeeded", status
    after = replicas_of(kafka_admin, topic_name)
    assert all(replicas[-1] == 2 for replicas in after.values()), after
    assert {p: sorted(r) for p, r in after.items()} == {p: sorted(r) for p, r in enumerate(ASSIGNMENT)}, \
        "no replica changed broker"
    assert after[0] == [1, 3, 2] and after[3] == [3, 1, 2] and after[2] == ASSIGNMENT[2]
    wait_for(lambda: 2 not in _leaders(kafka_admin, topic_name).values(), 30, "broker 2 to lead nothing")
    assert status["summary"]["bytesToMove"] == 0
    election = status["leaderElection"]
    # At least partitions 0 and 3 (other tests restart brokers, so other leaders may be off their preferred too).
    assert election["elected"] >= 2 and election["failed"] == 0, election

    resources.patch_spec(KPR, "demote", {"stop": True})
    status = resources.wait_phase(KPR, "demote", {"Reverted", "Failed"}, timeout=120)
    assert status["phase"] == "Reverted", status
    assert_replicas(kafka_admin, topic_name, dict(enumerate(ASSIGNMENT)))


def _reorder(bootstrap_servers: str, topic: str, lists: dict[int, list[int]]) -> None:
    """AlterPartitionReassignments with the same replica sets in a new order: Kafka keeps the current leaders."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.alter_partition_reassignments({KpTopicPartition(topic, p): r for p, r in lists.items()})
    finally:
        admin.close()


def test_a_demotion_also_elects_what_its_plan_did_not_reorder_and_names_what_cannot_move(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources) -> None:
    # Issue 26, item 1. Partition 0 is [1, 3] reordered by hand to [3, 1] without an election: broker 1 still leads
    # it, although its list already ends with 1, so the plan does not change it. Partition 1 [1, 2] is reordered by
    # the plan. The single replica of the second topic is on broker 1: nobody else can lead it.
    single = f"{topic_name}-single"
    create_topic(kafka_admin, topic_name, 2, assignment=[[1, 3], [1, 2]])
    create_topic(kafka_admin, single, 1, assignment=[[1]])
    fill(bootstrap_servers, topic_name, [0, 1], messages=10)
    wait_for(lambda: set(_leaders(kafka_admin, topic_name).values()) == {1}, 30, "broker 1 leading both")
    _reorder(bootstrap_servers, topic_name, {0: [3, 1]})
    wait_for(lambda: replicas_of(kafka_admin, topic_name)[0] == [3, 1], 60, "partition 0 reordered")
    assert _leaders(kafka_admin, topic_name)[0] == 1, "a reordering elects nobody"

    resources.create(KPR, "demote-1", {"plan": {"goal": "DemoteBrokers", "brokers": [1],
                                                "topics": [topic_name, single]}})
    status = resources.wait_phase(KPR, "demote-1", {"Proposed", "Succeeded", "Failed", "Invalid"}, timeout=240)
    assert status["phase"] == "Proposed", status
    resources.patch_spec(KPR, "demote-1", {"approval": {"proposalId": status["proposal"]["id"]}})
    status = resources.wait_phase(KPR, "demote-1", {"Succeeded", "Failed", "Invalid"}, timeout=120)
    assert status["phase"] == "Succeeded", status

    # Kafka's view: broker 1 leads nothing another in-sync replica could lead, and keeps every replica.
    after = settled_description(kafka_admin, topic_name,
                                lambda d: {p: leader for p, (_, leader, _) in d.items()} == {0: 3, 1: 2})
    assert {p: replicas for p, (replicas, _, _) in after.items()} == {0: [3, 1], 1: [2, 1]}, after
    assert {p: leader for p, (_, leader, _) in after.items()} == {0: 3, 1: 2}, "Leader: 3 Replicas: 3,1"
    assert describe_topic(kafka_admin, single) == {0: ([1], 1, [1])}
    election = status["leaderElection"]
    assert (election["elected"], election["failed"], election["awayFrom"]) == (2, 0, [1]), election
    assert election["stillLeading"] == 1 and election["stillLeadingPartitions"] == [
        {"topic": single, "partition": 0, "leader": 1, "reason": "no other in-sync replica (replicas [1], ISR [1])"}]
    assert len(resources.wait_event("demote-1", "StillLeading")) == 1


def test_a_demotion_that_reorders_no_list_still_takes_the_leadership_away(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources) -> None:
    # The repro as it stands: [1, 3] reordered to [3, 1] by hand, broker 1 still leading. The plan changes no
    # list; that is not "already meets the goal".
    create_topic(kafka_admin, topic_name, 1, assignment=[[1, 3]])
    wait_for(lambda: _leaders(kafka_admin, topic_name) == {0: 1}, 30, "broker 1 leading")
    _reorder(bootstrap_servers, topic_name, {0: [3, 1]})
    wait_for(lambda: replicas_of(kafka_admin, topic_name) == {0: [3, 1]}, 60, "the reordered list")
    assert _leaders(kafka_admin, topic_name) == {0: 1}

    resources.create(KPR, "demote-2", {"plan": {"goal": "DemoteBrokers", "brokers": [1], "topics": [topic_name]},
                                       "approval": {"mode": "Automatic"}})
    status = resources.wait_phase(KPR, "demote-2", {"Succeeded", "Failed", "Invalid"}, timeout=240)
    assert status["phase"] == "Succeeded", status
    after = settled_description(kafka_admin, topic_name, lambda d: d[0][:2] == ([3, 1], 3))
    assert after[0][:2] == ([3, 1], 3), f"Leader: 3 Replicas: 3,1, not {after}"
    assert status["leaderElection"]["elected"] == 1 and status["leaderElection"]["stillLeading"] == 0
    resources.wait_event("demote-2", "Succeeded")
    reasons = [e.reason for e in resources.events("demote-2")]
    assert "Proposed" in reasons and "NothingToMove" not in reasons, reasons


def test_demoting_every_broker_is_refused_and_changes_nothing(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources) -> None:
    # Issue 26, item E: nobody would be left to lead.
    create_topic(kafka_admin, topic_name, 3, assignment=ASSIGNMENT[:3])
    before = describe_topic(kafka_admin, topic_name)
    resources.create(KPR, "everyone", {"plan": {"goal": "DemoteBrokers", "brokers": [1, 2, 3],
                                                "topics": [topic_name]},
                                       "approval": {"mode": "Automatic"}})
    status = resources.wait_phase(KPR, "everyone", {"Invalid", "Succeeded", "Failed", "Proposed"}, timeout=60)
    assert status["phase"] == "Invalid", status
    ready = resources.condition(KPR, "everyone", "Ready")
    assert ready is not None and ready["reason"] == "NoBrokerLeftToLead", ready
    assert "every live broker ([1, 2, 3])" in ready["message"] and "demote fewer brokers" in ready["message"]
    time.sleep(3)  # a second tick would post a second Event: there must be none
    refusals = [e for e in resources.events("everyone") if e.reason == "NoBrokerLeftToLead"]
    assert len(refusals) == 1 and refusals[0].type == "Warning", [(e.reason, e.message) for e in refusals]
    assert "proposal" not in status and resources.config_map("everyone-proposal") is None, "nothing was planned"
    assert describe_topic(kafka_admin, topic_name) == before, "nothing was applied"
