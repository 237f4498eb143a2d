"""What a TopicPartitionCount tick writes — a status the API model (and so the CRD) accepts, with the key-remap
report — and what it asks Kafka: nothing more than the topic unless a decision needs it, one CreatePartitions at most.

The Kafka side is a recording in-memory table of topics, not a client: the reconciler only sees the KafkaAdmin
Protocol, and these tests check what it asks and what it makes of the answers.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest

from kpo.api import TopicPartitionCountStatus
from kpo.domain.keyremap import remap_report
from kpo.domain.model import Broker, KafkaRefusal, PartitionState, Replicas, TopicPartition
from kpo.resources.outcomes import Inputs, Outcome
from kpo.resources.topic_partition_count import reconciler
from kpo.resources.topic_partition_count.handlers import topicpartitioncount_at_rest
from kpo.resources.topic_partition_count.spec import intent_of, parse_spec
from kpo.resources.topic_partition_count.status import decimal, memory_of, remap_status

NOW = datetime(2025, 1, 1, 12, tzinfo=UTC)


class Cluster:
    def __init__(self, topics: dict[str, int], refuse: KafkaRefusal | None = None,
                 keys: dict[tuple[bool, ...], int] | None = None) -> None:
        self.topics: dict[str, list[Replicas]] = {
            name: [(1 + p % 3, 1 + (p + 1) % 3) for p in range(count)] for name, count in topics.items()}
        self.refuse = refuse
        self.keys = keys or {}
        self.calls: list[str] = []
        self.created: list[tuple[str, int, tuple[Replicas, ...] | None]] = []

    def brokers(self) -> dict[int, Broker]:
        self.calls.append("brokers")
        return {b: Broker(b, f"rack-{b}") for b in (1, 2, 3)}

    def topic_names(self) -> set[str]:
        self.calls.append("topic_names")
        return set(self.topics)

    def describe_topics(self, topics: Collection[str]) -> dict[TopicPartition, PartitionState]:
        self.calls.append(f"describe_topics {sorted(topics)}")
        return {TopicPartition(t, p): PartitionState(r, r[0], r) for t in topics if t in self.topics
                for p, r in enumerate(self.topics[t])}

    def create_partitions(self, topic: str, total: int, assignment: Sequence[Replicas] | None = None
                          ) -> KafkaRefusal | None:
        self.calls.append("create_partitions")
        self.created.append((topic, total, tuple(assignment) if assignment else None))
        if self.refuse is not None:
            return self.refuse
        self.topics[topic] += list(assignment or [(1, 2)] * (total - len(self.topics[topic])))
        return None

    def sample_key_partitions(self, topic: str, limit: int, partition_counts: Sequence[int]
                              ) -> dict[tuple[bool, ...], int]:
        self.calls.append(f"sample {limit} {tuple(partition_counts)}")
        return self.keys


def tick(cluster: Cluster, spec: dict[str, Any], status: dict[str, Any] | None = None,
         generation: int = 1) -> Outcome[Any] | None:
    status = status or {}
    body = {"metadata": {"namespace": "ns", "name": "grow"}, "status": status}
    return reconciler.tick(Inputs(body, intent_of(parse_spec(spec), generation), memory_of(status), NOW),
                           reconciler.Ports(kafka=cluster))  # type: ignore[arg-type]


def valid(status: dict[str, Any]) -> TopicPartitionCountStatus:
    return TopicPartitionCountStatus.model_validate({k: v for k, v in status.items() if v is not None})


def test_growing_6_to_12_reports_the_remap_and_succeeds_on_the_next_tick() -> None:
    cluster = Cluster({"orders": 6, "other": 3})
    first = tick(cluster, {"topic": "orders", "partitions": 12})
    assert first is not None
    status = valid(first.status)
    assert status.phase is not None and status.phase.value == "Growing" and status.current_partitions == 6
    remap = status.key_remap
    assert remap is not None
    assert (remap.from_partitions, remap.to_partitions) == (6, 12)
    assert (remap.moved_fraction, remap.moved_key_space) == ("0.5", "1/2")
    assert [(s.partition, s.fed_by) for s in remap.sources] == [(p, [p - 6]) for p in range(6, 12)]
    assert len(cluster.created) == 1 and cluster.created[0][:2] == ("orders", 12)
    assert "describe_topics ['orders', 'other']" in cluster.calls, "a balanced placement counts every topic"
    second = tick(cluster, {"topic": "orders", "partitions": 12}, first.status)
    assert second is not None
    merged = {**first.status, **second.status}
    status = valid(merged)
    assert status.phase is not None and status.phase.value == "Succeeded" and status.current_partitions == 12
    assert status.key_remap is not None and status.key_remap.to_partitions == 12, "the report stays"
    assert len(cluster.created) == 1
    ready = status.condition("Ready")
    assert ready is not None and ready.status.value == "True"


def test_a_finished_resource_asks_kafka_nothing() -> None:
    cluster = Cluster({"orders": 6})
    first = tick(cluster, {"topic": "orders", "partitions": 6})
    assert first is not None and first.status["phase"] == "Succeeded"
    assert cluster.created == []
    # At rest for its generation: the shell asks the kind's one at-rest rule and never calls the reconciler.
    assert topicpartitioncount_at_rest(1, first.status)
    assert not topicpartitioncount_at_rest(2, first.status), "a changed spec ticks again"


def test_the_guard_writes_the_report_and_sends_nothing() -> None:
    cluster = Cluster({"orders": 6}, keys={(False,): 1, (True,): 3})
    outcome = tick(cluster, {"topic": "orders", "partitions": 8, "keyOrdering": {"sampleMessages": 100}})
    assert outcome is not None
    status = valid(outcome.status)
    assert status.phase is not None and status.phase.value == "Invalid"
    assert status.key_remap is not None
    assert (status.key_remap.moved_fraction, status.key_remap.moved_key_space) == ("0.75", "3/4")
    assert (status.key_remap.sampled_messages, status.key_remap.sampled_moved_fraction) == (4, "0.75")
    assert "sample 100 (6, 8)" in cluster.calls and cluster.created == []
    assert [e.reason for e in outcome.events] == ["KeyOrderingGuard"]


def test_a_refusal_is_failed_with_kafkas_reason() -> None:
    cluster = Cluster({"orders": 3}, refuse=KafkaRefusal("POLICY_VIOLATION", "no more partitions for you"))
    outcome = tick(cluster, {"topic": "orders", "partitions": 6})
    assert outcome is not None
    status = valid(outcome.status)
    assert status.phase is not None and status.phase.value == "Failed"
    stalled = status.condition("Stalled")
    assert stalled is not None and "POLICY_VIOLATION" in stalled.message
    assert [e.reason for e in outcome.events] == ["KafkaRefused"], "one Event: Pending -> Failed"


def test_a_refusal_for_want_of_an_acl_is_not_authorized() -> None:
    cluster = Cluster({"orders": 3}, refuse=KafkaRefusal("TOPIC_AUTHORIZATION_FAILED", "needs Alter on 'orders'"))
    outcome = tick(cluster, {"topic": "orders", "partitions": 6})
    assert outcome is not None
    status = valid(outcome.status)
    assert status.phase is not None and status.phase.value == "Failed"
    stalled = status.condition("Stalled")
    assert stalled is not None and stalled.reason == "NotAuthorized" and "needs Alter on 'orders'" in stalled.message
    assert [e.reason for e in outcome.events] == ["NotAuthorized"]


def test_a_repeated_request_after_a_lost_status_write_counts_as_accepted() -> None:
    cluster = Cluster({"orders": 6}, refuse=KafkaRefusal("INVALID_PARTITIONS", "Topic already has 12 partitions."))
    cluster.topics["orders"] += [(1, 2)] * 6  # Kafka grew the topic, but the status write was lost: describe is stale
    original = cluster.describe_topics
    stale = {"calls": 0}

    def describe_once_stale(topics: Collection[str]) -> dict[TopicPartition, PartitionState]:
        stale["calls"] += 1
        found = original(topics)
        if stale["calls"] == 1:  # the first read still sees the old count (metadata propagation)
            return {tp: s for tp, s in found.items() if tp.partition < 6 or tp.topic != "orders"}
        return found

    cluster.describe_topics = describe_once_stale  # type: ignore[method-assign]
    outcome = tick(cluster, {"topic": "orders", "partitions": 12})
    assert outcome is not None and outcome.status["phase"] == "Growing"


def test_explicit_assignments_are_sent_as_given() -> None:
    cluster = Cluster({"orders": 3})
    spec = {"topic": "orders", "partitions": 6,
            "placement": {"strategy": "Explicit", "assignments": [[3, 1], [1, 2], [2, 3]]}}
    outcome = tick(cluster, spec)
    assert outcome is not None and outcome.status["phase"] == "Growing"
    assert cluster.created == [("orders", 6, ((3, 1), (1, 2), (2, 3)))]
    assert not any(c.startswith("topic_names") for c in cluster.calls), "no cluster-wide read for explicit placement"


@pytest.mark.parametrize(("fraction", "text"), [
    (Fraction(0), "0"), (Fraction(1), "1"), (Fraction(1, 2), "0.5"), (Fraction(3, 4), "0.75"),
    (Fraction(1, 3), "0.333333333"), (Fraction(2**31 - 1, 2**31), "0.999999999"),
])
def test_decimal_fractions_are_truncated_never_rounded_up(fraction: Fraction, text: str) -> None:
    assert decimal(fraction) == text


def test_the_report_of_every_growth_fits_the_api() -> None:
    for old in range(1, 13):
        for new in range(old, 25):
            status = {"phase": "Growing", "keyRemap": remap_status(remap_report(old, new), None)}
            remap = valid(status).key_remap
            assert remap is not None and Fraction(remap.moved_key_space) == remap_report(old, new).remapped_fraction


def test_a_missing_topic_is_waited_for_in_the_status_and_the_wait_is_cleared_once_it_appears() -> None:
    cluster = Cluster({})
    first = tick(cluster, {"topic": "orders", "partitions": 6})
    assert first is not None and first.status["phase"] == "Pending"
    assert valid(first.status).topic_missing_since == NOW
    assert tick(cluster, {"topic": "orders", "partitions": 6}, first.status) is None, "waiting writes nothing"
    cluster.topics["orders"] = [(1, 2)] * 3
    second = tick(cluster, {"topic": "orders", "partitions": 6}, first.status)
    assert second is not None and second.status["phase"] == "Growing"
    assert "topicMissingSince" in second.status and second.status["topicMissingSince"] is None, "merge patch removes it"
