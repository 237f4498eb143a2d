"""What every kind's tick shares: the spec through the API models, the Kafka cluster it names, and how it ends."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import kopf
import pytest

from kpo.api import PartitionReassignmentStatus, PreferredLeaderElectionStatus, TopicPartitionCountStatus
from kpo.domain.clock import parse_rfc3339, rfc3339, utcnow
from kpo.domain.model import KafkaRefusal
from kpo.domain.problems import Problem
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable
from kpo.resources.outcomes import decide_observing, invalid_outcome, not_authorized_outcome, unavailable_outcome
from kpo.resources.shell import _Unreachable, kafka_refusals_retried, parse_and_connect
from kpo.resources.topic_partition_count.spec import parse_spec

VALID = {"topic": "orders", "partitions": 12}
ADMIN = cast(KafkaAdmin, object())


def clusters(known: dict[str | None, KafkaAdmin]) -> Any:
    def kafka_of(ref: str | None) -> KafkaAdmin:
        if ref not in known:
            raise KeyError(f"no Kafka cluster {ref!r} in the operator's configuration")
        return known[ref]
    return kafka_of


def test_a_valid_spec_on_a_known_cluster_gives_both() -> None:
    refused: list[list[Problem]] = []
    inputs = parse_and_connect(VALID, parse_spec, clusters({None: ADMIN}), refused.append)
    assert inputs is not None
    parsed, kafka = inputs
    assert parsed.topic == "orders" and kafka is ADMIN
    assert refused == []


def test_a_spec_the_models_reject_is_refused_with_every_field_named() -> None:
    refused: list[list[Problem]] = []
    invalid = {"topic": "", "partitions": 0}
    assert parse_and_connect(invalid, parse_spec, clusters({None: ADMIN}), refused.append) is None
    [problems] = refused
    assert {p.field for p in problems} == {"spec.topic", "spec.partitions"}
    assert {p.reason for p in problems} == {"InvalidSpec"}


def test_an_unknown_cluster_is_refused_unless_already_said() -> None:
    refused: list[list[Problem]] = []
    spec = {**VALID, "clusterRef": "east"}
    assert parse_and_connect(spec, parse_spec, clusters({None: ADMIN}), refused.append) is None
    [[problem]] = refused
    assert (problem.field, problem.reason) == ("spec.clusterRef", "UnknownCluster") and "east" in problem.message
    assert parse_and_connect(spec, parse_spec, clusters({None: ADMIN}), refused.append,
                             refuse_unknown_cluster=False) is None
    assert len(refused) == 1


# How every kind's tick ends.


def test_a_tick_that_lost_kafka_drops_the_client_every_time_and_says_so_once() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    first = unavailable_outcome({"observedGeneration": 2}, "broker down", now)
    assert first.lost_kafka and [e.reason for e in first.events] == ["KafkaUnavailable"]
    progressing = next(c for c in first.status["conditions"] if c["type"] == "Progressing")
    assert progressing["reason"] == "KafkaUnavailable" and "broker down" in progressing["message"]
    again = unavailable_outcome({"observedGeneration": 2, **first.status}, "broker down", now)
    assert again.lost_kafka and again.events == [], "one Event per outage, not one per tick"


def test_a_resource_that_never_reached_kafka_is_pending_and_a_phase_it_has_stays() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert unavailable_outcome({}, "broker down", now).status["phase"] == "Pending"
    assert "phase" not in unavailable_outcome({"phase": "Executing"}, "broker down", now).status
    for model in (PartitionReassignmentStatus, TopicPartitionCountStatus, PreferredLeaderElectionStatus):
        assert model.model_validate({"phase": "Pending"}).phase == "Pending"


def test_a_refused_login_keeps_the_client_and_stalls() -> None:
    outcome = unavailable_outcome({}, "SASL authentication failed", datetime(2026, 1, 1, tzinfo=UTC),
                                  reason="AuthenticationFailed")
    assert not outcome.lost_kafka, "the adapter backs off its logins itself"
    assert {c["type"]: c["status"] for c in outcome.status["conditions"]}["Stalled"] == "True"


def test_an_invalid_spec_is_said_once_per_generation() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    problems = [Problem("spec.topic", "InvalidSpec", "must not be empty")]
    outcome = invalid_outcome({}, 4, problems, now)
    assert outcome is not None and outcome.status["phase"] == "Invalid" and outcome.status["observedGeneration"] == 4
    assert [e.reason for e in outcome.events] == ["InvalidSpec"] and "spec.topic" in outcome.events[0].message
    assert invalid_outcome(outcome.status, 4, problems, now) is None
    assert invalid_outcome(outcome.status, 5, problems, now) is not None, "a new generation is judged again"


def test_a_read_kafka_refused_becomes_a_retry_on_kopfs_backoff() -> None:
    logger = logging.getLogger("test")
    with pytest.raises(kopf.TemporaryError, match="Kafka refused"), kafka_refusals_retried(logger):
        raise KafkaRequestRefused(KafkaRefusal("INVALID_REQUEST"))
    with pytest.raises(ValueError, match="not Kafka's"), kafka_refusals_retried(logger):
        raise ValueError("not Kafka's")


def test_a_read_refused_for_want_of_an_acl_is_kept_for_a_failed_phase_not_retried() -> None:
    refusal = KafkaRefusal("TOPIC_AUTHORIZATION_FAILED", "Kafka refused DescribeTopicPartitions on topic 't'")
    with kafka_refusals_retried(logging.getLogger("test")) as refused:
        raise KafkaRequestRefused(refusal)
    assert refused.refusal == refusal
    outcome = not_authorized_outcome({}, 3, refusal, datetime(2026, 1, 1, tzinfo=UTC))
    assert outcome is not None and outcome.status["phase"] == "Failed" and outcome.status["observedGeneration"] == 3
    stalled = next(c for c in outcome.status["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "NotAuthorized" and "topic 't'" in stalled["message"]
    assert [e.reason for e in outcome.events] == ["NotAuthorized"]
    # Said once: the same refusal on the next tick writes nothing and posts no second Event.
    assert not_authorized_outcome(outcome.status, 3, refusal, datetime(2026, 1, 1, 0, 0, 9, tzinfo=UTC)) is None


def test_the_timestamps_are_rfc3339_utc_in_whole_seconds_and_read_back() -> None:
    now = utcnow()
    stamp = rfc3339(now)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp), stamp
    assert parse_rfc3339(stamp) == now
    assert parse_rfc3339(None) is None and parse_rfc3339("not a time") is None


# One way to ask for more observation.


@dataclass(frozen=True)
class Asked:
    needs: frozenset[str]
    seen: tuple[str, ...]


def test_each_need_is_observed_once_then_decided_again() -> None:
    observed: list[str] = []

    def observer(name: str) -> Any:
        def observe(seen: tuple[str, ...]) -> tuple[str, ...]:
            observed.append(name)
            return (*seen, name)
        return observe

    def decide(seen: tuple[str, ...]) -> Asked:
        wanted = ["cheap"] if not seen else ["costly"] if seen == ("cheap",) else []
        return Asked(frozenset(wanted), seen)

    decision = decide_observing(decide, (), {"cheap": observer("cheap"), "costly": observer("costly")})
    assert decision == Asked(frozenset(), ("cheap", "costly")) and observed == ["cheap", "costly"]


def test_a_decision_that_keeps_asking_for_what_it_was_given_fails_loudly() -> None:
    with pytest.raises(AssertionError, match="still needs"):
        decide_observing(lambda seen: Asked(frozenset({"x"}), seen), (), {"x": lambda seen: seen})


def test_a_kafka_client_that_could_not_be_made_fails_only_when_called() -> None:
    unreachable = _Unreachable("cannot connect to Kafka: Secret kafka-kpo not found")
    with pytest.raises(KafkaUnavailable, match="Secret kafka-kpo"):
        unreachable.list_reassignments()
