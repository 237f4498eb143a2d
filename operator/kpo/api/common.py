"""Pieces every kpo kind shares: the cluster reference, partition coordinates, conditions and the status frame.

Conditions copy ``metav1.Condition`` field for field (same names, patterns and limits), because the tools that read
them — ``kubectl wait --for=condition=Ready``, kstatus, Flux and Argo CD health checks — expect exactly that shape.
kpo sets three condition types, following kstatus: ``Ready`` (``True`` only once the resource has done its job),
``Progressing`` (work under way) and ``Stalled`` (kpo cannot go on without the user: invalid spec, refusal by Kafka).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Protocol, TypeVar

from pydantic import AwareDatetime, Field, StrictInt, StrictStr

from kpo.api.schema import ApiModel, PartitionIndex, Rule, StatusModel, TopicName, list_map

#: A named Kafka connection in the operator's configuration; DNS-label shaped, as it ends up in names and labels.
CLUSTER_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"

ClusterRef = Annotated[
    StrictStr | None,
    Field(
        pattern=CLUSTER_NAME_PATTERN,
        max_length=63,
        description=(
            "Name of the Kafka cluster to act on, as configured in the operator (Helm value `clusters`). Omitted: the "
            "operator's default cluster. Immutable: to act on another cluster, create another resource."
        ),
    ),
]


def cluster_ref_immutable() -> Rule:
    """The transition rule that freezes ``spec.clusterRef``, including its absence (= the default cluster)."""
    return Rule(
        cel="has(self.clusterRef) == has(oldSelf.clusterRef) && (!has(self.clusterRef) || "
        "self.clusterRef == oldSelf.clusterRef)",
        message="clusterRef is immutable: create a new resource to act on another cluster",
        holds=None,
        field_path=".clusterRef",
    )


class TopicPartition(ApiModel):
    """One partition of one topic, as a user names it in a spec."""

    topic: TopicName = Field(description="Topic name.")
    partition: PartitionIndex = Field(description="Partition index (0-based).")


class _PartitionKeyed(Protocol):
    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


P = TypeVar("P", bound=_PartitionKeyed)


def require_one_entry_per_partition(entries: list[P] | None) -> list[P] | None:
    """One entry per (topic, partition). The lists are atomic (see ``LIST_ATOMIC``), so only the models check this:
    a partition listed twice makes the resource Invalid, and nothing is sent to Kafka."""
    seen: set[tuple[str, int]] = set()
    for entry in entries or ():
        key = (entry.topic, entry.partition)
        if key in seen:
            raise ValueError(f"duplicate entry for {entry.topic}-{entry.partition}: one entry per partition")
        seen.add(key)
    return entries


class PartitionFailure(StatusModel):
    """A partition kpo could not handle, with Kafka's own error name."""

    topic: str = Field(description="Topic name.")
    partition: int = Field(ge=0, description="Partition index.")
    reason: str = Field(
        description="Why, as a short code: Kafka's error name (e.g. PREFERRED_LEADER_NOT_AVAILABLE) or kpo's reason."
    )
    message: str = Field(default="", description="Details, in words.")


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ConditionType(StrEnum):
    """The condition types kpo sets (kstatus conventions)."""

    READY = "Ready"
    PROGRESSING = "Progressing"
    STALLED = "Stalled"


class Condition(StatusModel):
    """One aspect of the resource's state, in the metav1.Condition shape."""

    type: StrictStr = Field(
        pattern=CONDITION_TYPE_PATTERN,
        max_length=316,
        description="Condition type: Ready (True only on success), Progressing (work under way) or Stalled "
        "(kpo cannot continue without a change from the user).",
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: StrictStr = Field(
        pattern=CONDITION_REASON_PATTERN,
        max_length=1024,
        description="Machine-readable CamelCase reason for the last transition.",
    )
    message: StrictStr = Field(default="", max_length=32768, description="Human-readable details.")
    last_transition_time: AwareDatetime = Field(description="When the status last changed.")
    observed_generation: StrictInt | None = Field(
        default=None, ge=0, description="metadata.generation of the spec this condition was computed from."
    )


class StatusBase(StatusModel):
    """Status fields common to all kinds; each kind adds its ``phase`` and its own report."""

    observed_generation: StrictInt | None = Field(
        default=None, ge=0, description="metadata.generation of the spec the operator last acted on."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        description="Current conditions (Ready, Progressing, Stalled), one per type.",
        json_schema_extra=list_map("type"),
    )

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)
