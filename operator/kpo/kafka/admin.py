"""The Kafka admin operations kpo needs, as a Protocol of plain domain values.

Reconcilers and the per-cluster executor depend on this Protocol only, never on a client library (the life cycles
see plain values, not even the Protocol), so every decision stays testable with plain values and the adapter stays
the one place that knows confluent-kafka and kafka-python.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from kpo.domain.model import (
    Broker,
    DirCapacity,
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

    #: The condition and Event reason a tick reports this with.
    reason = "KafkaUnavailable"


class KafkaAuthenticationFailed(KafkaUnavailable):
    """Kafka refused kpo's login (SASL): retried once per backoff step with the Secret read again, since only a fixed
    password helps; the message names the mechanism and user, never the password."""

    reason = "AuthenticationFailed"


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

    def alter_reassignments(self, targets: Mapping[TopicPartition, Replicas | None], *,
                            allow_replication_factor_change: bool = False
                            ) -> dict[TopicPartition, KafkaRefusal | None]:
        """Submit (replicas) or cancel (None) reassignments; returns Kafka's answer per partition.

        Unless ``allow_replication_factor_change``, Kafka 4.1+ (KIP-860) refuses, per partition with
        INVALID_REPLICATION_FACTOR, a target whose length differs from the replica set the partition is headed for;
        older brokers do not know the flag and take any length."""
        ...

    def log_dirs(self, topics: Collection[str], brokers: Collection[int]) -> LogDirReport:
        """DescribeLogDirs for ``topics`` on each of ``brokers`` (the live ones the same tick read): sizes, each
        broker's dirs, each replica's dir and dir moves in progress. A broker that does not answer is left out."""
        ...

    def dir_capacity(self, brokers: Collection[int]) -> dict[tuple[int, str], DirCapacity]:
        """DescribeLogDirs of no topic on each of ``brokers``: each online log dir's total and usable bytes (KIP-827;
        a broker older than 3.3 reports none). A broker that does not answer is left out."""
        ...

    def alter_replica_log_dirs(self, moves: Mapping[tuple[TopicPartition, int], str]
                               ) -> dict[tuple[TopicPartition, int], KafkaRefusal | None]:
        """AlterReplicaLogDirs: move replicas between their brokers' log dirs."""
        ...

    def topic_configs(self, topics: Collection[str], names: Collection[str]) -> dict[str, dict[str, str]]: ...

    def broker_configs(self, brokers: Collection[int], names: Collection[str]) -> dict[int, dict[str, str]]:
        """Dynamic broker configs (DescribeConfigs); keys that are not set are left out."""
        ...

    def metadata_level(self) -> int | None:
        """The cluster's finalized metadata.version feature level (KIP-584 features, read with ApiVersions); ``None``
        when the cluster finalized none."""
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
                              ) -> dict[tuple[bool, ...], int]:
        """Read up to ``limit`` keyed records from the newest end of each partition of ``topic`` and count them by
        whether Kafka's default (murmur2) partitioner gives their key another partition under each of
        ``partition_counts[1:]`` than under ``partition_counts[0]``: for two counts, ``(False,)`` stays and
        ``(True,)`` moves. At most 2**(len - 1) keys, whatever ``limit`` and the counts: counting by the partitions
        themselves took one entry per distinct pair, up to one per record read. Records without a key are skipped:
        the default partitioner does not hash them."""
        ...

    def close(self) -> None: ...


def topic_names_with(kafka: KafkaAdmin, wanted: Collection[str]) -> set[str]:
    """The cluster's topic names, with those of ``wanted`` that exist although metadata did not list them.

    Metadata lists only the topics the principal may describe, so a missing ACL read as "topic does not exist".
    Asked by name, Kafka says TOPIC_AUTHORIZATION_FAILED instead (raised, named as NotAuthorized).
    """
    names = kafka.topic_names()
    unlisted = set(wanted) - names
    return names | {tp.topic for tp in kafka.describe_topics(unlisted)} if unlisted else names
