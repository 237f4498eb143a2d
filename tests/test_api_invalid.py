"""Invalid manifests, each one small change to an example, and the field each one must be blamed on.

The same table drives two checks: here, that the pydantic models refuse every case; in
``e2e/test_api_admission.py``, that the real kube-apiserver refuses every case at admission with an error naming
``field``. Together they show the two enforcement points agree on what is wrong and where. Every cross-field
:class:`kpo.api.Rule` with a Python twin is exercised by at least one case (checked below), so a rule cannot be
added to the models without a case proving the server enforces it too.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from kpo.api import KINDS, ApiModel, kind_named

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DELETE = object()
Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Invalid:
    """``example`` with the value at ``path`` (from the manifest root) replaced by ``value`` (or deleted)."""

    name: str
    example: str
    path: Path_
    value: Any
    field: str
    rule: str | None = None
    #: False where the server cannot see it (a partition listed twice in an atomic list): the models refuse it and
    #: the operator makes the resource Invalid; ``e2e/test_api_admission.py`` checks that instead of a refusal.
    at_admission: bool = True

    def manifest(self) -> dict[str, Any]:
        return apply_change(load_example(self.example), self.path, self.value)


def load_example(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def apply_change(manifest: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(manifest)
    parent: Any = changed
    for key in path[:-1]:
        parent = parent[key]
    if value is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(value)
    return changed


def parse_spec(manifest: dict[str, Any]) -> ApiModel:
    return kind_named(manifest["kind"]).spec.model_validate(manifest["spec"])


KPR = "reassignment-explicit.yaml"
P0 = ("spec", "partitions", 0)
KPLE_PARTS = "leader-election-partitions.yaml"
KTPC = "partition-count-balanced.yaml"
KTPC_EXPLICIT = "partition-count-explicit.yaml"

INVALID_CASES: tuple[Invalid, ...] = (
    # PartitionReassignment, explicit partitions
    Invalid("duplicate-replica", KPR, (*P0, "replicas"), [1, 1], "spec.partitions[0].replicas"),
    Invalid("negative-broker-id", KPR, (*P0, "replicas"), [1, -2], "spec.partitions[0].replicas[1]"),
    Invalid("no-replicas", KPR, (*P0, "replicas"), [], "spec.partitions[0].replicas"),
    Invalid("replicas-missing", KPR, (*P0, "replicas"), DELETE, "spec.partitions[0].replicas"),
    Invalid("replicas-not-a-list", KPR, (*P0, "replicas"), 1, "spec.partitions[0].replicas"),
    Invalid("negative-partition", KPR, (*P0, "partition"), -1, "spec.partitions[0].partition"),
    Invalid("partition-as-string", KPR, (*P0, "partition"), "0", "spec.partitions[0].partition"),
    Invalid("illegal-topic-character", KPR, (*P0, "topic"), "orders!", "spec.partitions[0].topic"),
    Invalid("topic-too-long", KPR, (*P0, "topic"), "t" * 250, "spec.partitions[0].topic"),
    Invalid("empty-topic", KPR, (*P0, "topic"), "", "spec.partitions[0].topic"),
    Invalid(
        "same-partition-twice",
        KPR,
        ("spec", "partitions", 1),
        {"topic": "orders", "partition": 0, "replicas": [2, 3]},
        "spec.partitions",
        at_admission=False,
    ),
    Invalid("misspelt-field", KPR, (*P0, "replica"), [1, 2], "spec.partitions[0].replica"),
    Invalid(
        "log-dirs-count-differs",
        "reassignment-log-dirs.yaml",
        (*P0, "logDirs"),
        ["any"],
        "spec.partitions[0].logDirs",
        rule="logDirs needs exactly one entry",
    ),
    Invalid("relative-log-dir", "reassignment-log-dirs.yaml", (*P0, "logDirs"), ["data", "any"],
            "spec.partitions[0].logDirs"),
    Invalid("no-partitions", KPR, ("spec", "partitions"), [], "spec.partitions"),
    Invalid("no-target", KPR, ("spec", "partitions"), DELETE, "spec.partitions", rule="set a target"),
    Invalid("partitions-and-plan", KPR, ("spec", "plan"), {"goal": "Rebalance"}, "spec.plan",
            rule="mutually exclusive"),
    Invalid("proposal-id-without-plan", KPR, ("spec", "approval"), {"proposalId": "p-1"}, "spec.approval.proposalId",
            rule="approves a generated proposal"),
    Invalid("cluster-ref-not-a-name", KPR, ("spec", "clusterRef"), "Prod_Cluster", "spec.clusterRef"),
    Invalid("internal-topic-without-allow", KPR, (*P0, "topic"), "__consumer_offsets", "spec.partitions",
            rule="moving one needs allowInternalTopics"),
    Invalid("internal-topic-allow-withdrawn", "reassignment-internal-topic.yaml", ("spec", "allowInternalTopics"),
            False, "spec.partitions", rule="partitions name an internal Kafka topic"),
    Invalid("allow-internal-as-string", "reassignment-internal-topic.yaml", ("spec", "allowInternalTopics"), "true",
            "spec.allowInternalTopics"),
    Invalid("allow-rf-decrease-as-string", "reassignment-decrease-replication-factor.yaml",
            ("spec", "allowReplicationFactorDecrease"), "yes", "spec.allowReplicationFactorDecrease"),
    Invalid("stop-as-string", KPR, ("spec", "stop"), "yes", "spec.stop"),
    Invalid("unknown-on-stop", KPR, ("spec", "onStop"), "Delete", "spec.onStop"),
    Invalid("unknown-deletion-policy", KPR, ("spec", "deletionPolicy"), "Keep", "spec.deletionPolicy"),
    # PartitionReassignment, execution
    Invalid("unknown-strategy", KPR, ("spec", "execution"), {"strategy": "Bulk"}, "spec.execution.strategy"),
    Invalid("unknown-order", KPR, ("spec", "execution"), {"order": "Random"}, "spec.execution.order"),
    Invalid("zero-max-moves", KPR, ("spec", "execution"), {"maxMoves": 0}, "spec.execution.maxMoves"),
    Invalid("zero-max-moves-per-broker", KPR, ("spec", "execution"), {"maxMovesPerBroker": 0},
            "spec.execution.maxMovesPerBroker"),
    Invalid("per-broker-above-total", "reassignment-incremental.yaml", ("spec", "execution", "maxMovesPerBroker"), 8,
            "spec.execution.maxMovesPerBroker", rule="cannot exceed maxMoves"),
    Invalid("zero-max-moves-per-broker-direction", KPR, ("spec", "execution"), {"maxMovesPerBrokerDirection": 0},
            "spec.execution.maxMovesPerBrokerDirection"),
    Invalid("per-direction-above-total", "reassignment-incremental.yaml",
            ("spec", "execution", "maxMovesPerBrokerDirection"), 5, "spec.execution.maxMovesPerBrokerDirection",
            rule="maxMovesPerBrokerDirection cannot exceed maxMoves"),
    Invalid("throttle-below-1KiB", KPR, ("spec", "execution"), {"throttle": 1000}, "spec.execution.throttle"),
    Invalid("stall-after-below-10s", "reassignment-stall-cancel.yaml", ("spec", "execution", "stallAfterSeconds"), 5,
            "spec.execution.stallAfterSeconds"),
    Invalid("stall-after-above-a-day", "reassignment-stall-cancel.yaml", ("spec", "execution", "stallAfterSeconds"),
            86401, "spec.execution.stallAfterSeconds"),
    Invalid("stall-after-as-string", "reassignment-stall-cancel.yaml", ("spec", "execution", "stallAfterSeconds"),
            "600", "spec.execution.stallAfterSeconds"),
    Invalid("unknown-on-stall", "reassignment-stall-cancel.yaml", ("spec", "execution", "onStall"), "Retry",
            "spec.execution.onStall"),
    Invalid("paused-as-string", "reassignment-paused.yaml", ("spec", "execution", "paused"), "yes",
            "spec.execution.paused"),
    Invalid("elect-after-as-string", KPR, ("spec", "execution"), {"electLeadersAfter": "true"},
            "spec.execution.electLeadersAfter"),
    # PartitionReassignment, plan and approval
    Invalid("unknown-goal", "plan-rebalance.yaml", ("spec", "plan", "goal"), "Shrink", "spec.plan.goal"),
    Invalid("remove-brokers-without-brokers", "plan-remove-brokers.yaml", ("spec", "plan", "brokers"), DELETE,
            "spec.plan.brokers", rule="need the broker ids"),
    Invalid("add-brokers-empty", "plan-add-brokers.yaml", ("spec", "plan", "brokers"), [], "spec.plan.brokers"),
    Invalid("negative-broker-to-drain", "plan-remove-brokers.yaml", ("spec", "plan", "brokers"), [-1],
            "spec.plan.brokers[0]"),
    Invalid("duplicate-broker-to-fill", "plan-add-brokers.yaml", ("spec", "plan", "brokers"), [4, 4],
            "spec.plan.brokers"),
    Invalid("rebalance-with-brokers", "plan-rebalance.yaml", ("spec", "plan", "brokers"), [1], "spec.plan.brokers",
            rule="only used by goals RemoveBrokers"),
    Invalid("remove-disks-without-disks", "plan-remove-disks.yaml", ("spec", "plan", "disks"), DELETE,
            "spec.plan.disks", rule="needs the log dirs to empty"),
    Invalid("disks-on-rebalance", "plan-rebalance.yaml", ("spec", "plan", "disks"), [{"broker": 1, "logDir": "/a"}],
            "spec.plan.disks", rule="only used by goal RemoveDisks"),
    Invalid("relative-disk", "plan-remove-disks.yaml", ("spec", "plan", "disks", 0, "logDir"), "data-a",
            "spec.plan.disks[0].logDir"),
    Invalid("disk-excluding-brokers", "plan-rebalance-disks.yaml", ("spec", "plan", "excludeBrokers"), [3],
            "spec.plan.excludeBrokers", rule="excludeBrokers and excludeLeaders do not apply"),
    Invalid("remove-disks-with-brokers", "plan-remove-disks.yaml", ("spec", "plan", "brokers"), [1],
            "spec.plan.brokers", rule="only used by goals RemoveBrokers"),
    Invalid("relieve-without-threshold", "plan-relieve-capacity.yaml", ("spec", "plan", "threshold"), DELETE,
            "spec.plan.threshold", rule="needs threshold"),
    Invalid("threshold-on-rebalance", "plan-rebalance.yaml", ("spec", "plan", "threshold"), 0.8,
            "spec.plan.threshold", rule="only used by goal RelieveCapacity"),
    Invalid("threshold-one", "plan-relieve-capacity.yaml", ("spec", "plan", "threshold"), 1.0, "spec.plan.threshold"),
    Invalid("threshold-zero", "plan-relieve-capacity.yaml", ("spec", "plan", "threshold"), 0, "spec.plan.threshold"),
    Invalid("threshold-string", "plan-relieve-capacity.yaml", ("spec", "plan", "threshold"), "80%",
            "spec.plan.threshold"),
    Invalid("relieve-with-brokers", "plan-relieve-capacity.yaml", ("spec", "plan", "brokers"), [1],
            "spec.plan.brokers", rule="only used by goals RemoveBrokers"),
    Invalid("relieve-excluding-leaders", "plan-relieve-capacity.yaml", ("spec", "plan", "excludeLeaders"), [1],
            "spec.plan.excludeLeaders", rule="excludeLeaders does not apply"),
    Invalid("rf-goal-without-rf", "plan-replication-factor.yaml", ("spec", "plan", "replicationFactor"), DELETE,
            "spec.plan.replicationFactor", rule="needs replicationFactor"),
    Invalid("rf-zero", "plan-replication-factor.yaml", ("spec", "plan", "replicationFactor"), 0,
            "spec.plan.replicationFactor"),
    Invalid("rf-on-rebalance", "plan-rebalance.yaml", ("spec", "plan", "replicationFactor"), 3,
            "spec.plan.replicationFactor", rule="only used by goal ReplicationFactor"),
    Invalid("zero-tolerance", "plan-rebalance.yaml", ("spec", "plan", "tolerance"), 0, "spec.plan.tolerance"),
    Invalid("tolerance-above-one", "plan-rebalance.yaml", ("spec", "plan", "tolerance"), 1.5, "spec.plan.tolerance"),
    Invalid("topics-and-pattern", "plan-add-brokers.yaml", ("spec", "plan", "topicPattern"), "orders.*",
            "spec.plan.topicPattern", rule="topics and topicPattern are mutually exclusive"),
    Invalid("plan-internal-topic-without-allow", "plan-add-brokers.yaml", ("spec", "plan", "topics"),
            ["orders", "__transaction_state"], "spec.plan.topics", rule="planning one needs allowInternalTopics"),
    Invalid("duplicate-excluded-topic", "plan-rebalance.yaml", ("spec", "plan", "excludeTopics"), ["a", "a"],
            "spec.plan.excludeTopics"),
    Invalid("unknown-approval-mode", "plan-auto-approval.yaml", ("spec", "approval", "mode"), "Auto",
            "spec.approval.mode"),
    Invalid("proposal-id-with-automatic", "plan-approve-proposal.yaml", ("spec", "approval", "mode"), "Automatic",
            "spec.approval.proposalId", rule="proposalId is for mode Manual"),
    # PreferredLeaderElection
    Invalid("topics-and-pattern", "leader-election-topics.yaml", ("spec", "topicPattern"), "orders.*",
            "spec.topicPattern", rule="not several"),
    Invalid("partitions-and-topics", KPLE_PARTS, ("spec", "topics"), ["orders"], "spec.partitions", rule="not several"),
    Invalid("empty-topics", "leader-election-topics.yaml", ("spec", "topics"), [], "spec.topics"),
    Invalid("unknown-election-type", "leader-election-all.yaml", ("spec", "electionType"), "Dirty",
            "spec.electionType"),
    Invalid("unclean-everything", "leader-election-unclean.yaml", ("spec", "partitions"), DELETE, "spec.electionType",
            rule="must name its partitions"),
    Invalid("unclean-scheduled", "leader-election-unclean.yaml", ("spec", "schedule"), {"interval": "1h"},
            "spec.schedule", rule="cannot be scheduled"),
    Invalid("unclean-excluding-leaders", "leader-election-unclean.yaml", ("spec", "excludeLeaders"), [3],
            "spec.excludeLeaders", rule="applies to Preferred elections"),
    Invalid("interval-not-a-duration", "leader-election-scheduled.yaml", ("spec", "schedule", "interval"), "soon",
            "spec.schedule.interval"),
    Invalid("interval-too-short", "leader-election-scheduled.yaml", ("spec", "schedule", "interval"), "5s",
            "spec.schedule.interval", rule="at least 10s"),
    Invalid("schedule-without-interval", "leader-election-scheduled.yaml", ("spec", "schedule"), {},
            "spec.schedule.interval"),
    Invalid("after-not-a-name", "leader-election-after.yaml", ("spec", "after"), "Payments_Move", "spec.after"),
    Invalid("same-partition-twice", KPLE_PARTS, ("spec", "partitions", 1), {"topic": "orders", "partition": 0},
            "spec.partitions", at_admission=False),
    Invalid("negative-partition", KPLE_PARTS, ("spec", "partitions", 0, "partition"), -1,
            "spec.partitions[0].partition"),
    # TopicPartitionCount
    Invalid("zero-partitions", KTPC, ("spec", "partitions"), 0, "spec.partitions"),
    Invalid("partitions-as-string", KTPC, ("spec", "partitions"), "12", "spec.partitions"),
    Invalid("no-topic", KTPC, ("spec", "topic"), DELETE, "spec.topic"),
    Invalid("topic-with-slash", KTPC, ("spec", "topic"), "orders/x", "spec.topic"),
    Invalid("unknown-placement", KTPC, ("spec", "placement", "strategy"), "RoundRobin", "spec.placement.strategy"),
    Invalid("explicit-without-assignments", KTPC_EXPLICIT, ("spec", "placement", "assignments"), DELETE,
            "spec.placement.assignments", rule="strategy Explicit needs assignments"),
    Invalid("balanced-with-assignments", KTPC, ("spec", "placement", "assignments"), [[1, 2]],
            "spec.placement.assignments", rule="only used with strategy Explicit"),
    Invalid("assignments-of-different-lengths", KTPC_EXPLICIT, ("spec", "placement", "assignments"),
            [[1, 2], [2, 3, 1], [3, 1]], "spec.placement.assignments", rule="same length"),
    Invalid("assignment-duplicate-replica", KTPC_EXPLICIT, ("spec", "placement", "assignments", 0), [1, 1],
            "spec.placement.assignments[0]"),
    Invalid("assignment-empty", KTPC_EXPLICIT, ("spec", "placement", "assignments", 0), [],
            "spec.placement.assignments[0]"),
    Invalid("unknown-key-ordering-policy", KTPC, ("spec", "keyOrdering", "policy"), "Never", "spec.keyOrdering.policy"),
    Invalid("negative-sample", KTPC, ("spec", "keyOrdering", "sampleMessages"), -1, "spec.keyOrdering.sampleMessages"),
)


def case_id(case: Invalid) -> str:
    return f"{case.example.removesuffix('.yaml')}:{case.name}"


def test_the_table_is_large_and_its_names_unique() -> None:
    assert len(INVALID_CASES) >= 30
    ids = [case_id(c) for c in INVALID_CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", INVALID_CASES, ids=case_id)
def test_the_base_example_is_valid_and_the_change_is_not(case: Invalid) -> None:
    parse_spec(load_example(case.example))
    changed = case.manifest()
    assert changed != load_example(case.example)
    with pytest.raises(ValidationError) as refused:
        parse_spec(changed)
    # The model names the offending field too: as the error's location, or in a rule's message.
    leaf = re.sub(r"\[\d+\]$", "", case.field).rsplit(".", 1)[-1]
    assert leaf in str(refused.value)
    if case.rule is not None:
        assert case.rule in str(refused.value)


@pytest.mark.parametrize(("max_moves", "per_direction"), [(4, 4), (4, 1), (None, 100)])
def test_a_per_direction_limit_up_to_max_moves_is_accepted(max_moves: int | None, per_direction: int) -> None:
    # The refusals above are the boundary's other side: equal to maxMoves passes, one more is refused.
    manifest = load_example("reassignment-incremental.yaml")
    execution = manifest["spec"]["execution"]
    if max_moves is None:
        del execution["maxMoves"]
    else:
        execution["maxMoves"] = max_moves
    execution["maxMovesPerBrokerDirection"] = per_direction
    parsed = parse_spec(manifest)
    assert parsed.to_k8s()["execution"]["maxMovesPerBrokerDirection"] == per_direction


def test_every_rule_with_a_python_twin_is_exercised_by_a_case() -> None:
    def rules_of(model: type[ApiModel]) -> set[str]:
        found = {r.message for r in model.rules if r.holds is not None}
        for info in model.model_fields.values():
            for nested in _models_in(info.annotation):
                found |= rules_of(nested)
        return found

    messages = set().union(*(rules_of(kind.spec) for kind in KINDS))
    exercised = {case.rule for case in INVALID_CASES if case.rule is not None}
    unexercised = {m for m in messages if not any(fragment in m for fragment in exercised)}
    assert not unexercised, f"rules without an invalid case: {unexercised}"


def _models_in(annotation: Any) -> list[type[ApiModel]]:
    if isinstance(annotation, type) and issubclass(annotation, ApiModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _models_in(arg)]
