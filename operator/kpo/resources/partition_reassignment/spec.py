"""Parse a PartitionReassignment's spec into the values its life cycle, its planning and the scheduler decide on.

The API models in :mod:`kpo.api` check the spec again (the CRD schema already did at admission); the life cycle
then works on plain domain values: targets per partition, the planning request, the scheduler's limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kpo.api import PartitionReassignmentSpec, PlanGoal
from kpo.domain.model import TopicPartition
from kpo.domain.plan_contract import Goal, LogDirRef, PlanRequest
from kpo.domain.reassignment import Target
from kpo.domain.scheduling import Execution, Limits, Order
from kpo.resources.partition_reassignment.lifecycle import Intent
from kpo.resources.partition_reassignment.plan_lifecycle import PlanIntent


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
                  throttle=spec.execution.throttle, log_dir_throttle=spec.execution.log_dir_throttle,
                  # A demotion is done when the demoted brokers lead nothing: the election is part of it.
                  elect_leaders_after=spec.execution.elect_leaders_after or _demotes(spec),
                  allow_internal_topics=spec.allow_internal_topics,
                  allow_replication_factor_decrease=spec.allow_replication_factor_decrease,
                  paused=spec.execution.paused, stall_after=float(spec.execution.stall_after_seconds),
                  cancel_on_stall=spec.execution.on_stall.value == "Cancel", cordon=_cordons(spec),
                  leaders_away=leaders_away(spec))


def _cordons(spec: PartitionReassignmentSpec) -> frozenset[int]:
    plan = spec.plan
    if plan is None or plan.goal is not PlanGoal.REMOVE_BROKERS or not plan.cordon:
        return frozenset()
    return frozenset(plan.brokers or ())


def _demotes(spec: PartitionReassignmentSpec) -> bool:
    return spec.plan is not None and spec.plan.goal is PlanGoal.DEMOTE_BROKERS


def leaders_away(spec: PartitionReassignmentSpec) -> frozenset[int]:
    """The brokers that must lead no selected partition once a plan succeeded: those demoted, and ``excludeLeaders``
    when the leadership is to follow (``electLeadersAfter``, implied by a demotion). Empty without a plan."""
    plan = spec.plan
    if plan is None:
        return frozenset()
    demoted = frozenset(plan.brokers or ()) if _demotes(spec) else frozenset()
    electing = spec.execution.elect_leaders_after or _demotes(spec)
    return demoted | (frozenset(plan.exclude_leaders) if electing else frozenset())


def plan_request(spec: PartitionReassignmentSpec) -> PlanRequest:
    """The planning job's request for ``spec.plan`` (the storage contract's shape)."""
    plan = spec.plan
    assert plan is not None
    return PlanRequest(goal=Goal(plan.goal.value), brokers=tuple(plan.brokers or ()), topics=tuple(plan.topics or ()),
                       topic_pattern=plan.topic_pattern, exclude_topics=tuple(plan.exclude_topics or ()),
                       exclude_topic_pattern=plan.exclude_topic_pattern,
                       exclude_brokers=tuple(plan.exclude_brokers), exclude_leaders=tuple(plan.exclude_leaders),
                       replication_factor=plan.replication_factor,
                       # The API allows a tolerance of 1 (anything goes); the job's contract wants it below 1.
                       tolerance=min(plan.tolerance, 0.999), rack_aware=plan.rack_aware,
                       rebalance_existing=bool(plan.rebalance_existing),
                       disks=tuple(LogDirRef(broker=d.broker, log_dir=d.log_dir) for d in plan.disks or ()),
                       threshold=plan.threshold)


def plan_intent_of(spec: PartitionReassignmentSpec, generation: int) -> PlanIntent:
    """What ``spec.plan`` and ``spec.approval`` ask of the planning phases."""
    approval = spec.approval
    return PlanIntent(generation=generation, request=plan_request(spec),
                      automatic=approval is not None and approval.mode.value == "Automatic",
                      approved_id=approval.proposal_id if approval is not None else None, stop=spec.stop,
                      allow_internal_topics=spec.allow_internal_topics,
                      allow_replication_factor_decrease=spec.allow_replication_factor_decrease,
                      leaders_away=leaders_away(spec))


def execution_of(spec: PartitionReassignmentSpec) -> Execution:
    """``spec.execution`` as the cluster-wide scheduler takes it: order, concurrency limits, throttle."""
    execution = spec.execution
    return Execution(order=Order(execution.order.value),
                     limits=Limits(max_moves=execution.max_moves,
                                   max_moves_per_broker=execution.max_moves_per_broker,
                                   max_moves_per_broker_direction=execution.max_moves_per_broker_direction),
                     throttle=float(execution.throttle) if execution.throttle else None)
