"""The Kafka admin operations kpo needs, as a Protocol of plain domain values.

Life cycles and handlers depend on this Protocol only, never on a client library, so the decisions stay testable
with plain values and the adapter stays the one place that knows confluent-kafka and kafka-python.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from kpo.domain.model import (
    Broker,
    KafkaRefusal,
    OngoingReassignment,
    PartitionState,
    Replicas,
    TopicPartition,
)


class KafkaUnavailable(Exception):  # noqa: N818 - reads as "Kafka unavailable", which it is
    """Kafka could not be reached or answered with a retriable error: try again later."""


class KafkaRequestRefused(Exception):  # noqa: N818
    """Kafka refused a whole request (not one partition of it) with a non-retriable error."""

    def __init__(self, refusal: KafkaRefusal) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal


class KafkaAdmin(Protocol):
    def brokers(self) -> dict[int, Broker]:
        """Live (registered, unfenced) brokers."""
        ...

    def topic_names(self) -> set[str]: ...

    def describe_topics(self, topics: Collection[str]) -> dict[TopicPartition, PartitionState]:
        """Replicas, leader and ISR of every partition of the topics that exist (missing topics are left out)."""
        ...

    def list_reassignments(self, partitions: Collection[TopicPartition] | None = None
                           ) -> dict[TopicPartition, OngoingReassignment]: ...

    def alter_reassignments(self, targets: Mapping[TopicPartition, Replicas | None]
                            ) -> dict[TopicPartition, KafkaRefusal | None]:
        """Submit (replicas) or cancel (None) reassignments; returns Kafka's answer per partition."""
        ...

    def replica_sizes(self, topics: Collection[str]
                      ) -> tuple[dict[tuple[TopicPartition, int], int], dict[int, frozenset[str]]]:
        """DescribeLogDirs: bytes per (partition, broker), and each broker's log dirs."""
        ...

    def topic_configs(self, topics: Collection[str], names: Collection[str]) -> dict[str, dict[str, str]]: ...

    def elect_leaders(self, partitions: Sequence[TopicPartition] | None, unclean: bool = False
                      ) -> dict[TopicPartition, KafkaRefusal | None]: ...

    def close(self) -> None: ...
