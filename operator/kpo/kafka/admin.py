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
    LogDirReport,
    OngoingReassignment,
    PartitionState,
    Replicas,
    TopicPartition,
)
from kpo.domain.throttle import ConfigChange


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

    def log_dirs(self, topics: Collection[str]) -> LogDirReport:
        """DescribeLogDirs for ``topics``: sizes, each broker's dirs, each replica's dir and dir moves in progress."""
        ...

    def alter_replica_log_dirs(self, moves: Mapping[tuple[TopicPartition, int], str]
                               ) -> dict[tuple[TopicPartition, int], KafkaRefusal | None]:
        """AlterReplicaLogDirs: move replicas between their brokers' log dirs."""
        ...

    def topic_configs(self, topics: Collection[str], names: Collection[str]) -> dict[str, dict[str, str]]: ...

    def broker_configs(self, brokers: Collection[int], names: Collection[str]) -> dict[int, dict[str, str]]:
        """Dynamic broker configs (DescribeConfigs); keys that are not set are left out."""
        ...

    def alter_configs(self, changes: Sequence[ConfigChange]) -> None:
        """IncrementalAlterConfigs: SET / DELETE / APPEND / SUBTRACT, so configs kpo does not name stay as they are."""
        ...

    def elect_leaders(self, partitions: Sequence[TopicPartition] | None, unclean: bool = False
                      ) -> dict[TopicPartition, KafkaRefusal | None]:
        """ElectLeaders (KIP-183 / KIP-460). With ``partitions=None`` Kafka tries every partition and answers only for
        those it did not find already led by the chosen replica (no ELECTION_NOT_NEEDED entries)."""
        ...

    def create_partitions(self, topic: str, total: int, assignment: Sequence[Replicas] | None = None
                          ) -> KafkaRefusal | None:
        """CreatePartitions: grow ``topic`` to ``total`` partitions, the new ones on ``assignment`` (one replica list
        per new partition, preferred leader first) or, without one, where the controller puts them. Kafka's refusal,
        or None when it accepted."""
        ...

    def sample_key_partitions(self, topic: str, limit: int, partition_counts: Sequence[int]
                              ) -> dict[tuple[int, ...], int]:
        """Read up to ``limit`` keyed records from the newest end of each partition of ``topic`` and count them by
        the partitions Kafka's default (murmur2) partitioner gives their key under each of ``partition_counts``.
        Records without a key are skipped: the default partitioner does not hash them."""
        ...

    def close(self) -> None: ...
