"""Parse a PartitionReassignment (spec and status) into the values its life cycle decides on.

The API models in :mod:`kpo.api` check the spec again (the CRD schema already did at admission); the life cycle
then works on plain domain values: targets per partition, and what kpo remembered in the status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kpo.api import PartitionReassignmentSpec
from kpo.domain.model import KafkaRefusal, Replicas, TopicPartition
from kpo.domain.plan_contract import Goal, PlanRequest
from kpo.domain.reassignment import Target
from kpo.resources.partition_reassignment.lifecycle import Intent, Memory, Phase


def parse_spec(spec: Mapping[str, Any]) -> PartitionReassignmentSpec:
    return PartitionReassignmentSpec.model_validate(dict(spec))


def targets_of(spec: PartitionReassignmentSpec) -> dict[TopicPartition, Target]:
    return {
        TopicPartition(p.topic, p.partition): Target(
            replicas=tuple(p.replicas), log_dirs=tuple(p.log_dirs) if p.log_dirs is not None else None)
        for p in spec.partitions or []
    }


def intent_of(spec: PartitionReassignmentSpec, generation: int) -> Intent:
    return Intent(generation=generation, targets=targets_of(spec), stop=spec.stop,
                  revert_on_stop=spec.on_stop.value == "Revert",
                  incremental=spec.execution.strategy.value == "Incremental",
                  throttle=spec.execution.throttle, elect_leaders_after=spec.execution.elect_leaders_after,
                  allow_internal_topics=spec.allow_internal_topics,
                  allow_replication_factor_decrease=spec.allow_replication_factor_decrease)


def plan_request(spec: PartitionReassignmentSpec) -> PlanRequest:
    """The planning job's request for ``spec.plan`` (the storage contract's shape)."""
    plan = spec.plan
    assert plan is not None
    return PlanRequest(goal=Goal(plan.goal.value), brokers=tuple(plan.brokers or ()), topics=tuple(plan.topics or ()),
                       topic_pattern=plan.topic_pattern, exclude_topics=tuple(plan.exclude_topics or ()),
                       replication_factor=plan.replication_factor,
                       # The API allows a tolerance of 1 (anything goes); the job's contract wants it below 1.
                       tolerance=min(plan.tolerance, 0.999), rack_aware=plan.rack_aware)


def phase_of(status: Mapping[str, Any]) -> Phase:
    try:
        return Phase(status.get("phase") or Phase.PENDING)
    except ValueError:
        return Phase.PENDING


def partition_list(entries: Any) -> dict[TopicPartition, Mapping[str, Any]]:
    return {TopicPartition(str(e["topic"]), int(e["partition"])): e for e in entries or []}


def memory_of(status: Mapping[str, Any], originals: Mapping[TopicPartition, Replicas]) -> Memory:
    phase = phase_of(status)
    owned = {tp: tuple(int(r) for r in e["replicas"]) for tp, e in partition_list(status.get("inFlight")).items()}
    failures = {tp: KafkaRefusal(code=str(e.get("reason", "")), message=str(e.get("message", "")))
                for tp, e in partition_list(status.get("failures")).items()}
    return Memory(phase=phase, observed_generation=int(status.get("observedGeneration") or 0), owned=owned,
                  failures=failures, originals=dict(originals))
