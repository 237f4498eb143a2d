"""The three kpo kinds as whole objects, and what Kubernetes needs to know about each (names, printer columns).

A :class:`ResourceKind` is everything the CRD generator and the operator's Kopf wiring need besides the models:
group, version, plural, short names. The resource models (``PartitionReassignment`` and friends) parse a whole
object as the API server returns it; their ``spec`` is strict, everything around it lenient, because metadata and
status are written by Kubernetes and by the operator, not by users.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from kpo.api.common import StatusBase
from kpo.api.partition_reassignment import PartitionReassignmentSpec, PartitionReassignmentStatus
from kpo.api.preferred_leader_election import PreferredLeaderElectionSpec, PreferredLeaderElectionStatus
from kpo.api.schema import ApiModel, StatusModel
from kpo.api.topic_partition_count import TopicPartitionCountSpec, TopicPartitionCountStatus

GROUP = "kpo.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
#: ``kubectl get kpo`` lists every kind in this category.
CATEGORY = "kpo"


class PartitionReassignment(StatusModel):
    """A whole PartitionReassignment object."""

    api_version: str = API_VERSION
    kind: Literal["PartitionReassignment"] = "PartitionReassignment"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: PartitionReassignmentSpec
    status: PartitionReassignmentStatus | None = None


class PreferredLeaderElection(StatusModel):
    """A whole PreferredLeaderElection object."""

    api_version: str = API_VERSION
    kind: Literal["PreferredLeaderElection"] = "PreferredLeaderElection"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: PreferredLeaderElectionSpec
    status: PreferredLeaderElectionStatus | None = None


class TopicPartitionCount(StatusModel):
    """A whole TopicPartitionCount object."""

    api_version: str = API_VERSION
    kind: Literal["TopicPartitionCount"] = "TopicPartitionCount"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: TopicPartitionCountSpec
    status: TopicPartitionCountStatus | None = None


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    type: Literal["string", "integer", "number", "boolean", "date"]
    json_path: str
    description: str
    priority: int = 0

    def as_crd(self) -> dict[str, Any]:
        column: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "jsonPath": self.json_path,
            "description": self.description,
        }
        if self.priority:
            column["priority"] = self.priority
        return column


PHASE = PrinterColumn("Phase", "string", ".status.phase", "Where the resource is in its life cycle.")
AGE = PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation.")
MESSAGE = PrinterColumn(
    "Message", "string", '.status.conditions[?(@.type=="Ready")].message', "Why the resource is (not) Ready.", 1
)


@dataclass(frozen=True)
class ResourceKind:
    kind: str
    plural: str
    short_name: str
    description: str
    spec: type[ApiModel]
    status: type[StatusBase]
    resource: type[StatusModel]
    columns: tuple[PrinterColumn, ...]

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"

    def parse(self, obj: dict[str, Any]) -> StatusModel:
        """A whole object, as the API server returns it, parsed into this kind's resource model."""
        return self.resource.model_validate(obj)


PARTITION_REASSIGNMENT = ResourceKind(
    kind="PartitionReassignment",
    plural="partitionreassignments",
    short_name="kpr",
    description="Moves Kafka partition replicas between brokers and log dirs (KIP-455): explicit targets or a plan "
    "kpo generates, paced, throttled, stoppable and revertible.",
    spec=PartitionReassignmentSpec,
    status=PartitionReassignmentStatus,
    resource=PartitionReassignment,
    columns=(
        PHASE,
        PrinterColumn("Progress", "string", ".status.progress.summary", "Partitions completed / total."),
        PrinterColumn("Strategy", "string", ".spec.execution.strategy", "AllAtOnce or Incremental."),
        AGE,
        MESSAGE,
    ),
)

PREFERRED_LEADER_ELECTION = ResourceKind(
    kind="PreferredLeaderElection",
    plural="preferredleaderelections",
    short_name="kple",
    description="Elects partition leaders (KIP-183/KIP-460): moves leadership back to the preferred replica, once, "
    "on a schedule or after a reassignment.",
    spec=PreferredLeaderElectionSpec,
    status=PreferredLeaderElectionStatus,
    resource=PreferredLeaderElection,
    columns=(
        PHASE,
        PrinterColumn("Type", "string", ".spec.electionType", "Preferred or Unclean."),
        PrinterColumn("Elected", "integer", ".status.lastRun.elected", "Leaders changed by the last run."),
        PrinterColumn("Runs", "integer", ".status.runs", "Runs completed."),
        AGE,
        MESSAGE,
    ),
)

TOPIC_PARTITION_COUNT = ResourceKind(
    kind="TopicPartitionCount",
    plural="topicpartitioncounts",
    short_name="ktpc",
    description="Grows a Kafka topic to a desired partition count (CreatePartitions), with a key-ordering guard and "
    "a report of the keys that change partition.",
    spec=TopicPartitionCountSpec,
    status=TopicPartitionCountStatus,
    resource=TopicPartitionCount,
    columns=(
        PrinterColumn("Topic", "string", ".spec.topic", "The topic."),
        PrinterColumn("Partitions", "integer", ".spec.partitions", "Desired partition count."),
        PrinterColumn("Current", "integer", ".status.currentPartitions", "Partition count in Kafka."),
        PHASE,
        AGE,
        MESSAGE,
    ),
)

KINDS = (PARTITION_REASSIGNMENT, PREFERRED_LEADER_ELECTION, TOPIC_PARTITION_COUNT)


def kind_named(kind: str) -> ResourceKind:
    for candidate in KINDS:
        if candidate.kind == kind:
            return candidate
    raise KeyError(f"not a kpo kind: {kind}")
