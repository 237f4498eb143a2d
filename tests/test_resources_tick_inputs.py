"""What every kind's tick does first: read the spec through the API models, then find the Kafka cluster it names."""

from __future__ import annotations

from typing import Any, cast

from kpo.domain.reassignment import Problem
from kpo.kafka.admin import KafkaAdmin
from kpo.resources import parse_and_connect
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
