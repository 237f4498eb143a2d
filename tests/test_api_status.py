"""Status models: one fully populated status per kind, conditions, and the helpers the operator uses.

``FULL_STATUS`` sets every status field the CRD declares (checked here against the generated schema);
``e2e/test_api_admission.py`` writes each through the status subresource and reads it back unchanged, which shows
the server prunes nothing the operator writes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from kpo.api import (
    KINDS,
    PARTITION_REASSIGNMENT,
    PREFERRED_LEADER_ELECTION,
    TOPIC_PARTITION_COUNT,
    BrokerLoad,
    Condition,
    ConditionStatus,
    ConditionType,
    Conflict,
    CordonedBroker,
    CordonStatus,
    Duration,
    ElectionPhase,
    ElectionRun,
    InFlightMove,
    KeyRemap,
    KeyRemapSource,
    LeaderElectionResult,
    LogDirLoad,
    LogDirProgress,
    PartitionCountPhase,
    PartitionFailure,
    PartitionReassignmentStatus,
    PlanSummary,
    PreferredLeaderElectionStatus,
    Progress,
    Proposal,
    ReassignmentPhase,
    SkippedPartition,
    StalledMove,
    StatusModel,
    StillLeadingPartition,
    ThrottledTopic,
    ThrottleStatus,
    TopicPartitionCountStatus,
)
from kpo.api.crdgen import crd_manifest

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def _conditions() -> list[Condition]:
    return [
        Condition(type=ConditionType.READY, status=ConditionStatus.FALSE, reason="Executing",
                  message="12 of 30 partitions moved", last_transition_time=T0, observed_generation=2),
        Condition(type=ConditionType.PROGRESSING, status=ConditionStatus.TRUE, reason="MovesInFlight",
                  message="4 moves in flight", last_transition_time=T0, observed_generation=2),
    ]


def _failure() -> PartitionFailure:
    return PartitionFailure(topic="orders", partition=3, reason="REASSIGNMENT_IN_PROGRESS", message="moving already")


FULL_STATUS: dict[str, StatusModel] = {
    PARTITION_REASSIGNMENT.kind: PartitionReassignmentStatus(
        observed_generation=2,
        conditions=_conditions(),
        phase=ReassignmentPhase.EXECUTING,
        summary=PlanSummary(
            partitions=30, replica_moves=45, bytes_to_move=9 * 2**40, leader_changes=10, lower_bound_bytes=2**40,
            offline_partitions=1, offline_examples=["orders-7"], band_reached=False, max_over_mean=1.3,
            min_over_mean=0.47, note="the band of +-10% around the mean bytes was not reached: broker 1 at 0.47 x mean",
            brokers=[BrokerLoad(id=1, bytes_before=5, bytes_after=3, replicas_before=20, replicas_after=15,
                                leaders_before=7, leaders_after=5)],
            log_dirs=[LogDirLoad(broker=1, log_dir="/data/a", bytes_before=5, bytes_after=0, replicas_before=2,
                                 replicas_after=0, used_ratio_before=0.9134, used_ratio_after=0.7512)],
        ),
        progress=Progress(total=30, completed=12, in_flight=4, pending=13, failed=1, bytes_moved=2**40,
                          bytes_to_move=9 * 2**40, percent=11, eta_seconds=3600, started_at=T0, elapsed_seconds=1800,
                          paused_seconds=600, paused_since=T0, summary="12/30",
                          log_dirs=[LogDirProgress(broker=2, log_dir="/data/b", partitions=3, copying=1,
                                                   bytes_to_move=3 * 2**30, bytes_copied=2**29)]),
        failures=[_failure()],
        conflicts=[Conflict(topic="orders", partition=4, holder="external")],
        rollback_config_map="orders-explicit-rollback",
        in_flight=[InFlightMove(topic="orders", partition=1, replicas=[2, 3], copied_bytes=2**30, progress_at=T0,
                                   down=[3], behind_bytes=2**20, closing_at=T0)],
        throttle=ThrottleStatus(rate=10485760, brokers=[1, 2, 3],
                                topics=[ThrottledTopic(topic="orders", leader=["1:1", "1:2"], follower=["1:3"])],
                                log_dir_rate=20971520, log_dir_brokers=[2]),
        cordon=CordonStatus(brokers=[CordonedBroker(broker=4, previous="/data/a")],
                            unavailable="Kafka refused to cordon broker 5: CLUSTER_AUTHORIZATION_FAILED"),
        proposal=Proposal(id="p-7f3a9c2e41", created_at=T0, config_map="rebalance-proposal", partitions=30,
                          replica_moves=45, bytes_to_move=2**41, leader_changes=10, estimated_seconds=5400,
                          estimate_at_throttle_seconds=5000,
                          estimate_note="at 52428800 B/s per broker and direction, polling every 30 s"),
        duration=Duration(estimated_seconds=5400, took_seconds=4860, summary="took 4860 s, 0.90 x the estimate"),
        skipped=[SkippedPartition(topic="orders", partition=5, reason="TopicDeleted")],
        leader_election=LeaderElectionResult(
            elected=8, already_preferred=20, failed=2, away_from=[2], still_leading=1,
            still_leading_partitions=[StillLeadingPartition(topic="orders", partition=6, leader=2,
                                                            reason="no other in-sync replica (replicas [3, 2], "
                                                                   "ISR [2])")]),
        stalled_moves=[StalledMove(topic="orders", partition=1, brokers=[3], down=[3], copied_bytes=2**30,
                                   since=T0, cancelled=True, behind_bytes=2**20)],
        topic_missing_since=T0,
    ),
    PREFERRED_LEADER_ELECTION.kind: PreferredLeaderElectionStatus(
        observed_generation=1,
        conditions=_conditions(),
        phase=ElectionPhase.SCHEDULED,
        last_run=ElectionRun(started_at=T0, finished_at=T0 + timedelta(seconds=2), elected=3, already_preferred=40,
                             failed=1, excluded=2, failures=[_failure()],
                             elected_partitions=["orders-0", "orders-1", "audit.x-2"]),
        runs=7,
        next_run_at=T0 + timedelta(minutes=15),
        topic_missing_since=T0,
    ),
    TOPIC_PARTITION_COUNT.kind: TopicPartitionCountStatus(
        observed_generation=1,
        conditions=_conditions(),
        phase=PartitionCountPhase.SUCCEEDED,
        current_partitions=12,
        key_remap=KeyRemap(from_partitions=6, to_partitions=12, moved_fraction="0.5", moved_key_space="1/2",
                           sources=[KeyRemapSource(partition=6, fed_by=[0])], sampled_messages=10000,
                           sampled_moved_fraction="0.4987"),
        topic_missing_since=T0,
    ),
}


def schema_paths(schema: dict[str, Any], prefix: str) -> set[str]:
    """Every property path under ``schema`` ("status.progress.summary", "status.failures[].topic", ...)."""
    paths: set[str] = set()
    for name, prop in schema.get("properties", {}).items():
        path = f"{prefix}.{name}"
        paths.add(path)
        paths |= schema_paths(prop, path)
        if prop.get("type") == "array" and prop["items"].get("type") == "object":
            paths |= schema_paths(prop["items"], f"{path}[]")
    return paths


def value_paths(value: Any, prefix: str) -> set[str]:
    paths: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            paths.add(f"{prefix}.{key}")
            paths |= value_paths(inner, f"{prefix}.{key}")
    elif isinstance(value, list):
        for item in value:
            paths |= value_paths(item, f"{prefix}[]")
    return paths


def crd_schema(kind_name: str) -> dict[str, Any]:
    kind = next(k for k in KINDS if k.kind == kind_name)
    schema = crd_manifest(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


@pytest.mark.parametrize("kind", [k.kind for k in KINDS])
def test_the_full_status_sets_every_status_field(kind: str) -> None:
    status = FULL_STATUS[kind]
    declared = schema_paths(crd_schema(kind)["properties"]["status"], "status")
    written = value_paths(status.to_k8s(), "status")
    assert declared - written == set()
    assert written - declared == set()


@pytest.mark.parametrize("kind", [k.kind for k in KINDS])
def test_status_round_trips_through_its_dump(kind: str) -> None:
    status = FULL_STATUS[kind]
    dumped = status.to_k8s()
    assert type(status).model_validate(dumped) == status
    assert dumped["conditions"][0]["lastTransitionTime"] == "2026-03-01T12:00:00Z"


def test_status_read_back_ignores_fields_it_does_not_know() -> None:
    dumped = FULL_STATUS[TOPIC_PARTITION_COUNT.kind].to_k8s()
    parsed = TopicPartitionCountStatus.model_validate({**dumped, "addedInALaterVersion": 1})
    assert parsed == FULL_STATUS[TOPIC_PARTITION_COUNT.kind]


def test_condition_times_must_carry_a_time_zone() -> None:
    with pytest.raises(ValidationError):
        Condition(type="Ready", status=ConditionStatus.TRUE, reason="Done",
                  last_transition_time=datetime(2026, 3, 1, 12, 0))


def test_condition_reason_is_camel_case_like_metav1() -> None:
    with pytest.raises(ValidationError):
        Condition(type="Ready", status=ConditionStatus.TRUE, reason="not camel case", last_transition_time=T0)


def test_status_condition_lookup() -> None:
    status = FULL_STATUS[PARTITION_REASSIGNMENT.kind]
    assert isinstance(status, PartitionReassignmentStatus)
    progressing = status.condition(ConditionType.PROGRESSING)
    assert progressing is not None and progressing.reason == "MovesInFlight"
    assert status.condition(ConditionType.STALLED) is None


def test_elected_partitions_are_capped() -> None:
    with pytest.raises(ValidationError):
        ElectionRun(elected_partitions=[f"t-{i}" for i in range(101)])


def test_fractions_are_decimal_and_exact_strings() -> None:
    with pytest.raises(ValidationError):
        KeyRemap(from_partitions=6, to_partitions=12, moved_fraction="1/2", moved_key_space="1/2")
    with pytest.raises(ValidationError):
        KeyRemap(from_partitions=6, to_partitions=12, moved_fraction="0.5", moved_key_space="0.5")
