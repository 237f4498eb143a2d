"""The storage contract between operator and planning job: what parses, what is refused, and the shapes on disk."""

from __future__ import annotations

import hashlib
import json

import pytest

from kpo.domain.model import TopicPartition
from kpo.domain.plan_contract import (
    ContractError,
    Goal,
    PartitionRecord,
    PlanMetrics,
    PlanRequest,
    ReassignmentPlan,
    parse_brokers,
    partitions_jsonl,
    plan_of,
)


def test_a_request_reads_and_writes_the_spec_plan_field_names() -> None:
    text = '{"goal":"RemoveBrokers","brokers":[3],"topicPattern":"orders-.*","excludeTopics":["orders-dlq"],' \
           '"tolerance":0.1,"rackAware":false}'
    request = PlanRequest.from_json(text)
    assert request.goal is Goal.REMOVE_BROKERS
    assert request.topic_pattern == "orders-.*"
    assert request.exclude_topics == ("orders-dlq",)
    assert not request.rack_aware
    assert json.loads(request.to_json())["excludeTopics"] == ["orders-dlq"]
    assert PlanRequest.from_json(request.to_json()) == request


@pytest.mark.parametrize(("text", "says"), [
    ('{"goal":"RemoveBrokers"}', "needs the brokers"),
    ('{"goal":"AddBrokers","brokers":[]}', "needs the brokers"),
    ('{"goal":"ReplicationFactor"}', "needs 'replicationFactor'"),
    ('{"goal":"Rebalance","replicationFactor":3}', "only applies to goal ReplicationFactor"),
    ('{"goal":"AddBrokers","brokers":[4],"rebalanceExisting":true}', "only applies to goal ReplicationFactor"),
    ('{"goal":"Rebalance","tolerance":0}', "tolerance"),
    ('{"goal":"Rebalance","brokers":[1,1]}', "twice"),
    ('{"goal":"Shuffle"}', "goal"),
    ('{"goal":"Rebalance","topicRegex":"x"}', "topicRegex"),
])
def test_a_request_that_cannot_be_planned_is_refused_with_the_reason(text: str, says: str) -> None:
    with pytest.raises(ContractError, match=says):
        PlanRequest.from_json(text)


def test_brokers_must_be_listed_once() -> None:
    assert [b.rack for b in parse_brokers('[{"id":1,"rack":"a"},{"id":2,"rack":null,"alive":false}]')] == ["a", None]
    with pytest.raises(ContractError, match="twice"):
        parse_brokers('[{"id":1},{"id":1}]')


def test_partitions_are_json_lines_with_snake_case_fields() -> None:
    record = PartitionRecord(topic="t", partition=0, replicas=(1, 2), leader=1, isr=(1, 2), size_bytes=10)
    line = partitions_jsonl([record])
    assert line.endswith("\n")
    assert json.loads(line) == {"topic": "t", "partition": 0, "replicas": [1, 2], "leader": 1, "isr": [1, 2],
                                "size_bytes": 10}


def test_the_plan_is_kafka_reassign_partitions_json() -> None:
    plan = plan_of({TopicPartition("b", 1): (3, 1), TopicPartition("a", 0): (1, 2, 3)})
    assert json.loads(plan.to_json()) == {"version": 1, "partitions": [
        {"topic": "a", "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["any", "any", "any"]},
        {"topic": "b", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
    ]}
    assert ReassignmentPlan.from_json(plan.to_json()).targets() == {TopicPartition("a", 0): (1, 2, 3),
                                                                    TopicPartition("b", 1): (3, 1)}


def test_a_plan_naming_a_broker_twice_is_refused() -> None:
    with pytest.raises(ContractError, match="twice"):
        ReassignmentPlan.from_json('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}')


def test_the_plan_digest_names_the_content_not_the_order() -> None:
    one = plan_of({TopicPartition("a", 0): (1, 2), TopicPartition("a", 1): (2, 3)})
    same = ReassignmentPlan.from_json(json.dumps({"version": 1, "partitions": list(reversed(
        json.loads(one.to_json())["partitions"]))}))
    other = plan_of({TopicPartition("a", 0): (2, 1), TopicPartition("a", 1): (2, 3)})
    assert one.digest() == same.digest()
    assert one.digest() != other.digest()


def test_a_failure_carries_its_message_and_nothing_else() -> None:
    failed = PlanMetrics.from_json(PlanMetrics.failed("no alive broker is left", 1.5).to_json())
    assert not failed.ok
    assert failed.status == "failed"
    assert failed.message == "no alive broker is left"
    assert failed.bytes_to_move == 0


def test_a_disk_plan_keeps_its_log_dirs_and_its_id_depends_on_them() -> None:
    t0, t1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    targets = {t0: (1, 2), t1: (2, 1)}
    replicas_only = plan_of(targets)
    assert replicas_only.log_dir_targets() == {}
    # A plan of replica lists keeps the id it had before log dirs were part of the digest.
    legacy = sorted((e.topic, e.partition, e.replicas) for e in replicas_only.partitions)
    assert replicas_only.digest() == hashlib.sha256(repr(legacy).encode()).hexdigest()[:16]
    to_b = plan_of(targets, {t0: ("/b", "any")})
    to_c = plan_of(targets, {t0: ("/c", "any")})
    assert to_b.log_dir_targets() == {t0: ("/b", "any")}
    assert ReassignmentPlan.from_json(to_b.to_json()).log_dir_targets() == {t0: ("/b", "any")}
    assert len({replicas_only.digest(), to_b.digest(), to_c.digest()}) == 3
