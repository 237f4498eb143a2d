"""Internal topics and replication-factor changes on the real cluster (issue 12).

A reassignment of ``__consumer_offsets`` that dropped its replication factor used to be accepted silently. Now an
internal topic needs ``allowInternalTopics`` (refused at admission otherwise), a shorter replica list of any topic
needs ``allowReplicationFactorDecrease`` (the resource is Invalid otherwise, nothing sent to Kafka), and Kafka 4.1's
own guard (KIP-860, AlterPartitionReassignments v1 ``allowReplicationFactorChange``) is sent as false for every move
that keeps the factor. These tests drive the real kube-apiserver, the operator and Kafka 4.1.
"""

from __future__ import annotations

import contextlib
import re
import time
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient
from kubernetes.client.exceptions import ApiException

from e2e.kafka_support import assert_partition, assert_replicas, create_topic, replicas_of, wait_for
from e2e.kube_support import Resources
from e2e.operator_support import OperatorProcess
from e2e.reassignment_support import kafka, ongoing, spec_partitions
from kpo.domain.model import TopicPartition

KPR = "PartitionReassignment"
OFFSETS = "__consumer_offsets"
pytestmark = pytest.mark.usefixtures("kpo_operator")


def _offsets_topic(admin: AdminClient) -> dict[int, list[int]]:
    """``__consumer_offsets``' replicas, creating the topic first if no group has used the cluster yet (a
    FindCoordinator, which asking for a group's offsets sends, makes the broker create it)."""
    def created() -> dict[int, list[int]] | None:
        if OFFSETS in admin.list_topics(timeout=10).topics:
            return replicas_of(admin, OFFSETS) or None
        # The coordinator answers COORDINATOR_NOT_AVAILABLE while the topic is being created: ask again later.
        for each in admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("kpo-e2e-internal")]).values():
            with contextlib.suppress(KafkaException, TimeoutError):
                each.result(timeout=5)
        return None

    return wait_for(created, 90, f"{OFFSETS} to exist", interval=2)


def _reasons(resources: Resources, name: str) -> list[str]:
    return [e.reason for e in resources.events(name)]


def _submissions(operator: OperatorProcess, namespace: str, name: str) -> list[str]:
    """Every move the operator logged submitting for the resource, as "topic-partition->[replicas]"."""
    lines = re.findall(rf"{namespace}/{name}: submitting \d+ move\(s\): (.*)", operator.log_text())
    return [move for line in lines for move in re.findall(r"\S+->\[[\d, ]*\]", line)]


def test_an_internal_topic_without_the_flag_is_refused_at_admission(resources: Resources) -> None:
    with pytest.raises(ApiException) as refused:
        resources.create(KPR, "offsets", {"partitions": [{"topic": OFFSETS, "partition": 0, "replicas": [1, 2]}]})
    assert refused.value.status == 422
    assert "spec.partitions" in refused.value.body and "allowInternalTopics: true" in refused.value.body
    with pytest.raises(ApiException) as planned:
        resources.create(KPR, "offsets-plan", {"plan": {"goal": "Rebalance", "topics": ["orders", OFFSETS]}})
    assert planned.value.status == 422 and "spec.plan.topics" in planned.value.body


def test_dropping_the_replication_factor_of_consumer_offsets_is_invalid_and_sends_nothing(
        kafka_admin: AdminClient, bootstrap_servers: str, resources: Resources) -> None:
    before = _offsets_topic(kafka_admin)
    replicas = before[0]
    assert len(replicas) == 3, f"the test bed's {OFFSETS} has replication factor 3: {before[0]}"
    # The case: allowed to touch the internal topic, but the factor drops 3 -> 2 without acknowledgement.
    spec = {"allowInternalTopics": True, "partitions": [{"topic": OFFSETS, "partition": 0, "replicas": replicas[:2]}]}
    resources.create(KPR, "shrink-offsets", spec)
    status = resources.wait_phase(KPR, "shrink-offsets", "Invalid", timeout=60)
    stalled = resources.condition(KPR, "shrink-offsets", "Stalled")
    assert stalled is not None and stalled["status"] == "True"
    assert stalled["reason"] == "ReplicationFactorDecrease"
    assert f"{OFFSETS}-0: 2 replica(s) {replicas[:2]}" in stalled["message"]
    assert "allowReplicationFactorDecrease: true" in stalled["message"]
    assert status["observedGeneration"] == 1
    wait_for(lambda: "ReplicationFactorDecrease" in _reasons(resources, "shrink-offsets"), 20, "a Warning Event")
    time.sleep(3)
    assert replicas_of(kafka_admin, OFFSETS) == before, "nothing was sent to Kafka"
    assert ongoing(bootstrap_servers, OFFSETS) == {}
    assert resources.config_map("shrink-offsets-rollback") is None


def test_consumer_offsets_moves_when_allowed_keeping_its_replication_factor(
        kafka_admin: AdminClient, bootstrap_servers: str, resources: Resources, namespace: str,
        kpo_operator: OperatorProcess) -> None:
    before = _offsets_topic(kafka_admin)
    partition = max(before)
    rotated = before[partition][1:] + before[partition][:1]
    spec = {"allowInternalTopics": True, "partitions": [{"topic": OFFSETS, "partition": partition,
                                                         "replicas": rotated}]}
    resources.create(KPR, "offsets-leader", spec)
    resources.wait_phase(KPR, "offsets-leader", "Succeeded", timeout=90)
    assert_partition(kafka_admin, OFFSETS, partition, rotated)
    assert {p: r for p, r in replicas_of(kafka_admin, OFFSETS).items() if p != partition} == \
        {p: r for p, r in before.items() if p != partition}
    assert _submissions(kpo_operator, namespace, "offsets-leader") == [f"{OFFSETS}-{partition}->{rotated}"]


def test_kafka_refuses_a_replication_factor_change_when_kpo_says_it_is_not_one(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str) -> None:
    # The adapter's AlterPartitionReassignments v1 against the real Kafka 4.1 controller: KIP-860's flag is honoured.
    create_topic(kafka_admin, topic_name, 3, assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    adapter = kafka(bootstrap_servers)
    try:
        p0, p1, p2 = (TopicPartition(topic_name, p) for p in range(3))
        answers = adapter.alter_reassignments({p0: (1, 2), p1: (1, 3, 2)})
        refusal = answers[p0]
        assert refusal is not None and refusal.code == "INVALID_REPLICATION_FACTOR" and not refusal.retriable
        assert refusal.message == "The replication factor is changed from 3 to 2"
        assert answers[p1] is None, "same factor, other order: accepted with the flag false"
        grown = adapter.alter_reassignments({p2: (3,)}, allow_replication_factor_change=False)[p2]
        assert grown is not None and grown.code == "INVALID_REPLICATION_FACTOR"
        wait_for(lambda: not ongoing(bootstrap_servers, topic_name), 30, "the reorder to finish")
        assert_replicas(kafka_admin, topic_name, {0: [1, 2, 3], 1: [1, 3, 2], 2: [3, 1, 2]})
        # The same request with the flag true: Kafka changes the factor.
        assert adapter.alter_reassignments({p0: (1, 2)}, allow_replication_factor_change=True) == {p0: None}
        wait_for(lambda: replicas_of(kafka_admin, topic_name)[0] == [1, 2], 30, "the factor to drop to 2")
    finally:
        adapter.close()


def test_an_acknowledged_decrease_runs_and_each_move_is_submitted_once(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources, namespace: str,
        kpo_operator: OperatorProcess) -> None:
    create_topic(kafka_admin, topic_name, 6, assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]] * 2)
    target = {p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(6)}
    spec: dict[str, Any] = {"partitions": spec_partitions(topic_name, target)}
    resources.create(KPR, "shrink", spec)
    resources.wait_phase(KPR, "shrink", "Invalid", timeout=60)
    assert _submissions(kpo_operator, namespace, "shrink") == []
    resources.patch_spec(KPR, "shrink", {"allowReplicationFactorDecrease": True})
    status = resources.wait_phase(KPR, "shrink", "Succeeded", timeout=90)
    assert_replicas(kafka_admin, topic_name, target)
    assert status["progress"]["completed"] == 6 and status["failures"] == []
    # Every partition was sent once: a move that finished within a tick was never taken for pending again.
    sent = _submissions(kpo_operator, namespace, "shrink")
    assert sorted(sent) == sorted(f"{topic_name}-{p}->{r}" for p, r in target.items())


def test_a_plan_lowering_the_replication_factor_is_invalid_before_any_planning(
        kafka_admin: AdminClient, topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1, 2, 3], [2, 3, 1]])
    plan = {"goal": "ReplicationFactor", "replicationFactor": 2, "topics": [topic_name]}
    resources.create(KPR, "plan-rf2", {"plan": plan})
    resources.wait_phase(KPR, "plan-rf2", "Invalid", timeout=60)
    stalled = resources.condition(KPR, "plan-rf2", "Stalled")
    assert stalled is not None and stalled["reason"] == "ReplicationFactorDecrease"
    assert "spec.plan.replicationFactor" in stalled["message"]
    assert "proposal" not in resources.status(KPR, "plan-rf2")

