"""Value types for what kpo knows about a Kafka cluster.

These are the nouns every layer shares: the Kafka adapter produces them, the life cycles decide on them, the planner's
contract serialises them. They are frozen and hashable so that decisions are pure functions of plain values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


Replicas = tuple[int, ...]


@dataclass(frozen=True)
class Broker:
    id: int
    rack: str | None = None
    host: str = ""
    port: int = 0


@dataclass(frozen=True)
class PartitionState:
    """What DescribeTopics says about one partition."""

    replicas: Replicas
    leader: int
    isr: Replicas


@dataclass(frozen=True)
class OngoingReassignment:
    """What ListPartitionReassignments (KIP-455) says about one partition that is moving.

    ``replicas`` is the full set during the move; Kafka orders it target-first, so the target is the set minus the
    replicas being removed, in that order.
    """

    replicas: Replicas
    adding: Replicas
    removing: Replicas

    @property
    def target(self) -> Replicas:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original(self) -> Replicas:
        """The replicas the partition had when this move started (KIP-455 cancellation returns to them)."""
        return tuple(r for r in self.replicas if r not in self.adding)


ReplicaKey = tuple[TopicPartition, int]  # (partition, broker)


@dataclass(frozen=True)
class DirCapacity:
    """A log dir's file system as its broker reports it in DescribeLogDirs (KIP-827, Kafka 3.3+): total and usable
    bytes."""

    total: int
    usable: int

    @property
    def used_ratio(self) -> float:
        """The share of the file system in use, 0 to 1 (what ``df`` calls Use%)."""
        return min(1.0, max(0.0, (self.total - self.usable) / self.total)) if self.total > 0 else 0.0


@dataclass(frozen=True)
class LogDirReport:
    """One DescribeLogDirs answer: replica sizes, each broker's dirs, where each replica is and where it is moving."""

    sizes: dict[ReplicaKey, int] = field(default_factory=dict)
    broker_dirs: dict[int, frozenset[str]] = field(default_factory=dict)
    replica_dirs: dict[ReplicaKey, str] = field(default_factory=dict)
    future_dirs: dict[ReplicaKey, str] = field(default_factory=dict)
    #: Brokers asked that did not answer (connection refused or timed out): their replicas are not in the report.
    unreachable: frozenset[int] = frozenset()
    #: Log dirs their broker reports offline (KAFKA_STORAGE_ERROR: a failed disk), by broker.
    offline_dirs: dict[int, frozenset[str]] = field(default_factory=dict)
    #: The bytes each replica moving between log dirs has in its new dir so far.
    future_sizes: dict[ReplicaKey, int] = field(default_factory=dict)
    #: Each online dir's file system from the same answer (KIP-827); none from a broker older than 3.3.
    capacity: dict[tuple[int, str], DirCapacity] = field(default_factory=dict)



@dataclass(frozen=True)
class KafkaRefusal:
    """An error Kafka returned for a request or for one partition of it."""

    code: str
    message: str = ""
    retriable: bool = False

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code


# Kafka error codes that mean "try again": the controller moved, a request timed out, a broker is catching up.
RETRIABLE_CODES = frozenset({
    "NOT_CONTROLLER",
    "REQUEST_TIMED_OUT",
    "COORDINATOR_NOT_AVAILABLE",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_OR_FOLLOWER",
    "NETWORK_EXCEPTION",
    "BROKER_NOT_AVAILABLE",
    "REBALANCE_IN_PROGRESS",
    "KAFKA_STORAGE_ERROR",
    "THROTTLING_QUOTA_EXCEEDED",
    "_TRANSPORT",
    "_TIMED_OUT",
    "_ALL_BROKERS_DOWN",
})


def refusal(code: str, message: str = "") -> KafkaRefusal:
    return KafkaRefusal(code=code, message=message, retriable=code in RETRIABLE_CODES)


@dataclass(frozen=True)
class ClusterView:
    """The slice of the cluster one decision needs: live brokers, the partitions concerned, what is moving."""

    brokers: dict[int, Broker]
    partitions: dict[TopicPartition, PartitionState]
    ongoing: dict[TopicPartition, OngoingReassignment] = field(default_factory=dict)
    # Size in bytes of each partition's replica on each broker, from DescribeLogDirs.
    replica_sizes: dict[tuple[TopicPartition, int], int] = field(default_factory=dict)
    # Topic-level configs kpo validates against (min.insync.replicas).
    min_insync: dict[str, int] = field(default_factory=dict)
    # Log dirs per broker, from DescribeLogDirs; and those their broker reports offline (a failed disk).
    log_dirs: dict[int, frozenset[str]] = field(default_factory=dict)
    offline_dirs: dict[int, frozenset[str]] = field(default_factory=dict)
    # The file system of each online log dir that reports one (KIP-827), read only for goal RelieveCapacity.
    dir_capacity: dict[tuple[int, str], DirCapacity] = field(default_factory=dict)
    topics: frozenset[str] = frozenset()
    # The log dir each replica lives in, and the dir a replica is being moved to (AlterReplicaLogDirs in progress),
    # read only when some target names log dirs.
    replica_dirs: dict[tuple[TopicPartition, int], str] = field(default_factory=dict)
    future_dirs: dict[tuple[TopicPartition, int], str] = field(default_factory=dict)
    future_sizes: dict[tuple[TopicPartition, int], int] = field(default_factory=dict)
    # Bytes/s producers write to each partition, estimated from the growth of its size between observations.
    write_rates: dict[TopicPartition, float] = field(default_factory=dict)
    # Brokers DescribeCluster lists that did not answer kpo's DescribeLogDirs: a broker that died stays registered
    # and unfenced until the controller misses its heartbeats, longer while the controller quorum itself fails over.
    unreachable: frozenset[int] = frozenset()
    # Partitions Kafka listed as moving a moment ago but not now: a broker answering DescribeTopics may still show
    # such a partition on its mid-move replicas (its metadata lags the controller's), so their replica count is not
    # judged yet.
    recently_moved: frozenset[TopicPartition] = frozenset()

    def available(self, broker: int) -> bool:
        """Listed by DescribeCluster and answering: a move onto any other broker cannot finish now."""
        return broker in self.brokers and broker not in self.unreachable

    def partition_size(self, tp: TopicPartition) -> int:
        """The bytes a new replica of ``tp`` must copy: the largest replica's size (the leader's, when in sync)."""
        state = self.partitions.get(tp)
        if state is None:
            return 0
        return max((self.replica_sizes.get((tp, b), 0) for b in state.replicas), default=0)
