"""TopicPartitionCount: grow a topic to a desired number of partitions, knowing what it does to key ordering.

Kafka can add partitions (CreatePartitions) but never remove them, and adding them changes which partition a key
hashes to under the default murmur2 partitioner: records of one key written before and after the change may be read
out of order. The key-ordering guard therefore refuses, by default, a new count that is not a multiple of the
current one (with M = k * N every old partition feeds a fixed set of new ones, which keeps the remap explainable),
and the status reports exactly which fraction of the key space moves (KIP-253).

The current count lives in Kafka, not in the spec, so "not a decrease" and "a multiple of the current count" are
checked by the operator (phase Invalid), not at admission.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import AwareDatetime, Field, StrictBool, StrictInt

from kpo.api.common import ClusterRef, StatusBase, cluster_ref_immutable
from kpo.api.schema import (
    ApiModel,
    ReplicaSet,
    Rule,
    RuleReason,
    StatusModel,
    TopicName,
    object_default,
)

#: What Kafka's KRaft controller adds in one CreatePartitions request: every new partition is one PartitionRecord, and
#: the controller refuses a user operation of more than 10,000 records (QuorumController.MAX_RECORDS_PER_USER_OP,
#: Kafka 3.6 to 4.1). kpo sends one request per growth, so it refuses a larger step before sending anything; explicit
#: placements are capped at the same number.
MAX_NEW_PARTITIONS = 10000
#: The largest spec.partitions admitted: what kpo's Kafka client can ask for at all. librdkafka refuses a
#: CreatePartitions count above 100,000 before sending it (RD_KAFKAP_PARTITIONS_MAX, "new_total_cnt out of expected
#: range"), so a larger count could never work; the server refuses it at admission (e.g. 20000001 typed for 2000).
MAX_TOPIC_PARTITIONS = 100_000
DECIMAL_FRACTION_PATTERN = r"^(0(\.[0-9]+)?|1(\.0+)?)$"
EXACT_FRACTION_PATTERN = r"^[0-9]+/[1-9][0-9]*$"


class PlacementStrategy(StrEnum):
    BALANCED = "Balanced"
    EXPLICIT = "Explicit"


class Placement(ApiModel):
    """Where the replicas of the new partitions go."""

    strategy: PlacementStrategy = Field(
        default=PlacementStrategy.BALANCED,
        description="Balanced: kpo places the new replicas on the least loaded brokers, leaders spread evenly. "
        "Explicit: the replica lists in assignments.",
    )
    rack_aware: StrictBool = Field(
        default=True,
        description="Balanced: put the replicas of each new partition on distinct racks as far as the racks allow.",
    )
    assignments: list[ReplicaSet] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NEW_PARTITIONS,
        description="Explicit: one replica list (broker ids, preferred leader first) per NEW partition, in partition "
        "order; all lists as long as the topic's replication factor. Required with strategy Explicit, forbidden "
        "otherwise.",
    )

    rules = (
        Rule(
            cel="self.strategy != 'Explicit' || has(self.assignments)",
            message="strategy Explicit needs assignments: one replica list per new partition",
            holds=lambda p: p.strategy is not PlacementStrategy.EXPLICIT or p.assignments is not None,
            field_path=".assignments",
            reason=RuleReason.REQUIRED,
        ),
        Rule(
            cel="self.strategy == 'Explicit' || !has(self.assignments)",
            message="assignments are only used with strategy Explicit",
            holds=lambda p: p.strategy is PlacementStrategy.EXPLICIT or p.assignments is None,
            field_path=".assignments",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel="!has(self.assignments) || self.assignments.all(a, size(a) == size(self.assignments[0]))",
            message="every replica list in assignments must have the same length (the replication factor)",
            holds=lambda p: p.assignments is None or len({len(a) for a in p.assignments}) == 1,
            field_path=".assignments",
        ),
    )


class KeyOrderingPolicy(StrEnum):
    REQUIRE_MULTIPLE = "RequireMultiple"
    ALLOW = "Allow"


class KeyOrdering(ApiModel):
    """The key-ordering guard and report."""

    policy: KeyOrderingPolicy = Field(
        default=KeyOrderingPolicy.REQUIRE_MULTIPLE,
        description="RequireMultiple: refuse (phase Invalid) a count that is not a multiple of the current one. "
        "Allow: grow to any larger count.",
    )
    sample_messages: StrictInt = Field(
        default=0,
        ge=0,
        le=100_000_000,
        description="Read up to this many real messages (their keys) from the topic and report which fraction of "
        "them would land on another partition (status.keyRemap.sampledMovedFraction). 0: no sampling.",
    )


class TopicPartitionCountSpec(ApiModel):
    """The topic and the partition count it should have."""

    cluster_ref: ClusterRef = None
    topic: TopicName = Field(description="Name of the existing topic to grow. Immutable.")
    partitions: StrictInt = Field(
        ge=1,
        le=MAX_TOPIC_PARTITIONS,
        description="Desired number of partitions, at most 100000. Kafka cannot remove partitions: fewer than the "
        "topic has is Invalid; as many is a no-op that Succeeds; more than 10000 above the current count is Invalid "
        "(Kafka's controller adds at most 10000 partitions per request: grow in steps).",
    )
    placement: Placement = Field(
        default_factory=Placement,
        description="Placement of the new partitions' replicas.",
        json_schema_extra=object_default(Placement),
    )
    key_ordering: KeyOrdering = Field(
        default_factory=KeyOrdering,
        description="The key-ordering guard and report.",
        json_schema_extra=object_default(KeyOrdering),
    )

    rules = (
        Rule(
            cel="self.topic == oldSelf.topic",
            message="topic is immutable: create another TopicPartitionCount for another topic",
            holds=None,
            field_path=".topic",
        ),
        cluster_ref_immutable(),
    )


class PartitionCountPhase(StrEnum):
    PENDING = "Pending"
    GROWING = "Growing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    INVALID = "Invalid"


class KeyRemapSource(StatusModel):
    """Where one new partition's keys came from."""

    partition: int = Field(ge=0, description="A partition index in the new count.")
    fed_by: list[int] = Field(
        default_factory=list, description="Old partitions whose keys now hash to this partition."
    )


class KeyRemap(StatusModel):
    """How growing from fromPartitions to toPartitions remaps keys under Kafka's default (murmur2) partitioner."""

    from_partitions: int = Field(ge=1, description="Partition count before.")
    to_partitions: int = Field(ge=1, description="Partition count after.")
    moved_fraction: str = Field(
        pattern=DECIMAL_FRACTION_PATTERN,
        description='Fraction of the key space whose partition changes, as a decimal string (e.g. "0.5").',
    )
    moved_key_space: str = Field(
        pattern=EXACT_FRACTION_PATTERN, description='The same fraction, exact (e.g. "1/2").'
    )
    sources: list[KeyRemapSource] = Field(
        default_factory=list, description="For each partition that receives moved keys, the old partitions feeding it."
    )
    sampled_messages: int | None = Field(
        default=None, ge=0, description="Messages sampled from the topic (keyOrdering.sampleMessages)."
    )
    sampled_moved_fraction: str | None = Field(
        default=None,
        pattern=DECIMAL_FRACTION_PATTERN,
        description="Fraction of the sampled messages whose partition changes, as a decimal string.",
    )


class TopicPartitionCountStatus(StatusBase):
    """The topic's count as observed in Kafka and the key-remap report."""

    phase: PartitionCountPhase | None = Field(
        default=None, description="Pending, Growing, Succeeded, Failed or Invalid."
    )
    current_partitions: int | None = Field(default=None, ge=0, description="Partitions the topic has in Kafka now.")
    key_remap: KeyRemap | None = Field(default=None, description="Key remap report for the change.")
    topic_missing_since: AwareDatetime | None = Field(
        default=None, description="When kpo first found spec.topic missing for this generation. It waits "
        "a short grace period for a topic applied together with this resource before declaring the spec Invalid.")
