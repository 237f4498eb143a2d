"""TopicPartitionCount on the real cluster (issue 6): growth verified by DescribeTopics, refusals with their reasons.

Every test makes its own topic and namespace. The balanced placement counts every topic of the cluster, including
those earlier tests left behind, so evenness is checked against the cluster as it was just before the growth.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from e2e.kafka_support import create_topic, describe_topic, replicas_of, wait_for
from e2e.kube_support import Resources
from e2e.operator_support import OperatorProcess
from kpo.domain.model import Broker
from kpo.domain.placement import place_new_partitions
from kpo_testbed import Testbed
from kpo_testbed.kafka import LIMITED_USER

KTPC = "TopicPartitionCount"
pytestmark = pytest.mark.usefixtures("kpo_operator")


def _reasons(resources: Resources, name: str) -> list[str]:
    return [e.reason for e in resources.events(name)]


def _cluster_load(admin: AdminClient) -> tuple[list[Broker], Counter[int], Counter[int]]:
    """Live brokers with racks, and replicas and preferred leaders per broker over every topic."""
    brokers = [Broker(n.id, n.rack) for n in admin.describe_cluster().result(timeout=30).nodes]
    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    for topic in admin.list_topics(timeout=30).topics:
        for assigned, _, _ in describe_topic(admin, topic).values():
            replicas.update(assigned)
            leaders[assigned[0]] += 1
    return brokers, replicas, leaders


def test_grow_6_to_12_places_new_partitions_evenly_and_rack_aware(testbed: Testbed, kafka_admin: AdminClient,
                                                                  topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 6, replication_factor=2)
    brokers, replicas_before, leaders_before = _cluster_load(kafka_admin)
    racks = {b.id: b.rack for b in brokers}
    assert len(set(racks.values())) == 3

    resources.create(KTPC, "grow", {"topic": topic_name, "partitions": 12})
    waited = subprocess.run(["kubectl", "wait", "--for=condition=Ready", "ktpc/grow", "-n", resources.namespace,
                             "--timeout=90s"], env=testbed.env(), capture_output=True, text=True, check=False)
    assert waited.returncode == 0, waited.stderr
    status = resources.status(KTPC, "grow")
    assert status["phase"] == "Succeeded" and status["currentPartitions"] == 12
    assert status["keyRemap"]["movedKeySpace"] == "1/2" and status["keyRemap"]["movedFraction"] == "0.5"

    described = wait_for(lambda: (found := describe_topic(kafka_admin, topic_name)) and len(found) == 12
                         and all(leader >= 0 for _, leader, _ in found.values()) and found, 30,
                         "12 partitions, every one with a leader, in DescribeTopics")
    new = [described[p][0] for p in range(6, 12)]
    assert all(len({racks[b] for b in replicas}) == 2 for replicas in new), f"rack-aware: {new}"
    # Exactly the balanced placement for the cluster as it was, so the least loaded brokers took the most.
    expected = place_new_partitions(brokers, replicas_before, leaders_before, 2, 6)
    assert [tuple(r) for r in new] == expected
    received = Counter(b for replicas in new for b in replicas)
    after = {b.id: replicas_before[b.id] + received[b.id] for b in brokers}
    spread_before = max(replicas_before[b.id] for b in brokers) - min(replicas_before[b.id] for b in brokers)
    assert max(after.values()) - min(after.values()) <= max(spread_before, 1), (replicas_before, received)
    if spread_before == 0:
        assert set(received.values()) == {4}, received
    # The tick posts its Events once its status is written: the last one may still be on its way.
    wait_for(lambda: _reasons(resources, "grow")[-1:] == ["Succeeded"], 20, "the Succeeded event, last")


@pytest.mark.parametrize(("case", "reason", "words"), [
    ("decrease", "PartitionDecrease", "Kafka cannot remove partitions"),
    ("missing-topic", "UnknownTopic", "does not exist"),
])
def test_a_decrease_and_a_missing_topic_are_invalid(kafka_admin: AdminClient, topic_name: str,
                                                   resources: Resources, case: str, reason: str, words: str) -> None:
    create_topic(kafka_admin, topic_name, 6, replication_factor=1)
    spec: dict[str, Any] = {"topic": topic_name, "partitions": 4}
    if case == "missing-topic":
        spec = {"topic": f"{topic_name}-missing", "partitions": 12}
    resources.create(KTPC, case, spec)
    if case == "missing-topic":
        # A missing topic is waited for (TOPIC_GRACE, 30 s) before the spec is declared Invalid.
        waiting = resources.wait_waiting_for_topic(KTPC, case)
        assert waiting.get("topicMissingSince"), waiting
    status = resources.wait_phase(KTPC, case, "Invalid", timeout=90)
    assert "topicMissingSince" not in status
    ready = resources.condition(KTPC, case, "Ready")
    stalled = resources.condition(KTPC, case, "Stalled")
    assert ready is not None and ready["status"] == "False" and ready["reason"] == reason
    assert stalled is not None and stalled["status"] == "True" and words in stalled["message"]
    assert status["observedGeneration"] == 1
    wait_for(lambda: reason in _reasons(resources, case), 20, f"a {reason} event")
    assert len(describe_topic(kafka_admin, topic_name)) == 6


def test_a_topic_applied_after_its_resource_is_waited_for_and_grown(kafka_admin: AdminClient, topic_name: str,
                                                                     resources: Resources) -> None:
    """GitOps applies a topic and its TopicPartitionCount together, in no particular order."""
    resources.create(KTPC, "first", {"topic": topic_name, "partitions": 6})
    resources.wait_waiting_for_topic(KTPC, "first")
    time.sleep(5)
    create_topic(kafka_admin, topic_name, 3, replication_factor=2)
    status = resources.wait_phase(KTPC, "first", "Succeeded", timeout=60)
    assert status["currentPartitions"] == 6 and "topicMissingSince" not in status
    assert len(describe_topic(kafka_admin, topic_name)) == 6
    assert "UnknownTopic" not in _reasons(resources, "first")


def test_the_guard_refuses_6_to_8_until_overridden(kafka_admin: AdminClient, topic_name: str,
                                                   resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 6, replication_factor=2)
    resources.create(KTPC, "guarded", {"topic": topic_name, "partitions": 8})
    status = resources.wait_phase(KTPC, "guarded", "Invalid", timeout=60)
    stalled = resources.condition(KTPC, "guarded", "Stalled")
    assert stalled is not None and stalled["reason"] == "KeyOrderingGuard"
    assert "6 -> 8" in stalled["message"] and "policy: Allow" in stalled["message"]
    # The report says what the refused change would do, so the owner can decide.
    assert status["keyRemap"]["movedKeySpace"] == "3/4"
    assert {s["partition"]: s["fedBy"] for s in status["keyRemap"]["sources"]}[6] == [0, 2, 4]
    wait_for(lambda: "KeyOrderingGuard" in _reasons(resources, "guarded"), 20, "a KeyOrderingGuard event")
    time.sleep(2)
    assert len(describe_topic(kafka_admin, topic_name)) == 6, "nothing was sent"

    resources.patch_spec(KTPC, "guarded", {"keyOrdering": {"policy": "Allow"}})
    status = resources.wait_phase(KTPC, "guarded", "Succeeded", timeout=60)
    assert status["observedGeneration"] == 2 and status["currentPartitions"] == 8
    wait_for(lambda: len(describe_topic(kafka_admin, topic_name)) == 8, 30, "8 partitions in DescribeTopics")


def test_reaching_the_count_already_present_sends_nothing(kafka_admin: AdminClient, topic_name: str,
                                                          resources: Resources,
                                                          kpo_operator: OperatorProcess) -> None:
    create_topic(kafka_admin, topic_name, 6, replication_factor=1)
    resources.create(KTPC, "noop", {"topic": topic_name, "partitions": 6})
    status = resources.wait_phase(KTPC, "noop", "Succeeded", timeout=60)
    assert status["currentPartitions"] == 6 and status["keyRemap"]["movedKeySpace"] == "0/1"
    assert f"CreatePartitions {topic_name} " not in kpo_operator.log_text()


def test_explicit_placement_is_used_as_given(kafka_admin: AdminClient, topic_name: str,
                                             resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 3, assignment=[[1, 2], [2, 3], [3, 1]])
    resources.create(KTPC, "explicit", {"topic": topic_name, "partitions": 6, "placement": {
        "strategy": "Explicit", "assignments": [[3, 2], [1, 3], [2, 1]]}})
    resources.wait_phase(KTPC, "explicit", "Succeeded", timeout=60)
    expected = {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [3, 2], 4: [1, 3], 5: [2, 1]}
    wait_for(lambda: replicas_of(kafka_admin, topic_name) == expected, 30, f"replicas {expected}")


def test_kafkas_refusal_is_failed_with_its_reason(kafka_admin: AdminClient, topic_name: str,
                                                  resources: Resources) -> None:
    """Through the "limited" cluster connection (SASL/SCRAM, password from a Secret): the user may describe the
    cluster and the topic, not alter it, so Kafka refuses CreatePartitions."""
    create_topic(kafka_admin, topic_name, 2, replication_factor=1)
    principal = f"User:{LIMITED_USER}"
    grants = [
        AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, principal, "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, topic_name, ResourcePatternType.LITERAL, principal, "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
    ]
    for future in kafka_admin.create_acls(grants).values():
        future.result(timeout=30)
    try:
        resources.create(KTPC, "refused", {"clusterRef": "limited", "topic": topic_name, "partitions": 4})
        status = resources.wait_phase(KTPC, "refused", {"Failed", "Invalid", "Succeeded"}, timeout=60)
        assert status["phase"] == "Failed", status
        stalled = resources.condition(KTPC, "refused", "Stalled")
        assert stalled is not None and stalled["reason"] == "NotAuthorized"
        assert "TOPIC_AUTHORIZATION_FAILED" in stalled["message"] and "--operation Alter" in stalled["message"]
        resources.wait_event("refused", "NotAuthorized")
        assert len(describe_topic(kafka_admin, topic_name)) == 2
    finally:
        filters = [AclBindingFilter(g.restype, g.name, g.resource_pattern_type, g.principal, g.host, g.operation,
                                    g.permission_type) for g in grants]
        for future in kafka_admin.delete_acls(filters).values():
            future.result(timeout=30)
