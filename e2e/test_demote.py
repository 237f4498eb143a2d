"""Demoting a broker on the real cluster (issue 16): a DemoteBrokers plan moves broker 2 to the end of every replica
list of the topic and elects the preferred leaders, so broker 2 leads none of its partitions while it keeps every
replica (no byte copied); ``stop`` with ``onStop: Revert`` puts the replica lists back as they were."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from e2e.kafka_support import create_topic, describe_topic, replicas_of, wait_for
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
    assert replicas_of(kafka_admin, topic_name) == dict(enumerate(ASSIGNMENT))
