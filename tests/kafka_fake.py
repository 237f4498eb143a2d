"""An in-memory cluster of four brokers behind the KafkaAdmin Protocol, for the PartitionReassignment tick tests.

Moves behave as Kafka's do: a partition being moved lists its target's replicas first, then those being removed
(DescribeTopics and ListPartitionReassignments agree on that), a cancellation puts it back, and a submission whose
length differs from where the partition is headed is refused with INVALID_REPLICATION_FACTOR unless
``allow_replication_factor_change`` (KIP-860). Every call is recorded by name in ``calls``; subclasses hook
:meth:`FakeCluster.called` to record more, or to change the cluster between two calls.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from kpo.domain.cordon import CORDONED_LOG_DIRS
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
from kpo.kafka.admin import KafkaUnavailable


class FakeCluster:
    def __init__(self, replicas: dict[TopicPartition, Replicas], moving: dict[TopicPartition, Replicas] | None = None,
                 *, replica_bytes: int = 0) -> None:
        self.replicas = dict(replicas)
        self.moving = dict(moving or {})  # partition -> target
        self.replica_bytes = replica_bytes
        self.calls: list[str] = []
        self.altered: list[tuple[dict[TopicPartition, Replicas | None], bool]] = []
        # KIP-1066: each broker's cordoned.log.dirs (the one broker config the fake keeps), and the cluster's
        # finalized metadata.version level (30: 4.3-IV0, the first that honours it).
        self.cordoned: dict[int, str] = {}
        self.level: int | None = 30
        #: Replicas being copied between log dirs of their broker (AlterReplicaLogDirs): (partition, broker) -> dir.
        self.future_dirs: dict[tuple[TopicPartition, int], str] = {}
        #: The dir each replica is in, where a test says so: (partition, broker) -> dir.
        self.replica_dirs: dict[tuple[TopicPartition, int], str] = {}
        # AlterReplicaLogDirs for a replica its broker does not have yet: Kafka remembers the dir and creates the
        # replica there when a move brings it (LogManager.maybeUpdatePreferredLogDir).
        self.preferred_dirs: dict[tuple[TopicPartition, int], str] = {}

    #: True: every call fails as a lost connection does.
    down = False

    def called(self, name: str, detail: str = "") -> None:
        """Every call of the Protocol, by method name; ``detail`` says what a write asked for."""
        if self.down:
            raise KafkaUnavailable("the connection to Kafka broke")
        self.calls.append(name)

    def listed(self, tp: TopicPartition) -> Replicas:
        """A partition's replicas as Kafka lists them mid-move: the target's, then those being removed."""
        target = self.moving[tp]
        return target + tuple(b for b in self.replicas[tp] if b not in target)

    def finish_moves(self) -> None:
        for tp, target in self.moving.items():
            for broker in set(target) - set(self.replicas[tp]):
                if (log_dir := self.preferred_dirs.pop((tp, broker), None)) is not None:
                    self.replica_dirs[(tp, broker)] = log_dir
        self.replicas.update(self.moving)
        self.moving.clear()

    # Reads.
    def brokers(self) -> dict[int, Broker]:
        self.called("brokers")
        return {b: Broker(b) for b in (1, 2, 3, 4)}

    def topic_names(self) -> set[str]:
        self.called("topic_names")
        return {tp.topic for tp in self.replicas}

    def list_reassignments(self, partitions: Collection[TopicPartition] | None = None
                           ) -> dict[TopicPartition, OngoingReassignment]:
        self.called("list_reassignments")
        return {tp: OngoingReassignment(self.listed(tp), tuple(b for b in t if b not in self.replicas[tp]),
                                        tuple(b for b in self.replicas[tp] if b not in t))
                for tp, t in self.moving.items() if partitions is None or tp in partitions}

    def describe_topics(self, topics: Collection[str]) -> dict[TopicPartition, PartitionState]:
        self.called("describe_topics")
        out = {}
        for tp, r in self.replicas.items():
            if tp.topic in topics:
                shown = self.listed(tp) if tp in self.moving else r
                out[tp] = PartitionState(shown, shown[0], r)
        return out

    def log_dirs(self, topics: Collection[str], brokers: Collection[int]) -> LogDirReport:
        self.called("log_dirs")
        future = {k: d for k, d in self.future_dirs.items() if k[0].topic in topics}
        where = {k: d for k, d in self.replica_dirs.items() if k[0].topic in topics}
        if not self.replica_bytes:
            return LogDirReport(future_dirs=future, replica_dirs=where)
        return LogDirReport(sizes={(tp, b): self.replica_bytes for tp, r in self.replicas.items() for b in r},
                            future_dirs=future, replica_dirs=where)

    def dir_capacity(self, brokers: Collection[int]) -> dict[tuple[int, str], DirCapacity]:
        self.called("dir_capacity")
        return {}

    def topic_configs(self, topics: Collection[str], names: Collection[str]) -> dict[str, dict[str, str]]:
        self.called("topic_configs")
        return {}

    def broker_configs(self, brokers: Collection[int], names: Collection[str]) -> dict[int, dict[str, str]]:
        self.called("broker_configs")
        return {b: {CORDONED_LOG_DIRS: self.cordoned[b]} for b in brokers
                if CORDONED_LOG_DIRS in names and b in self.cordoned}

    def metadata_level(self) -> int | None:
        self.called("metadata_level")
        return self.level

    # Writes.
    def alter_reassignments(self, targets: Mapping[TopicPartition, Replicas | None], *,
                            allow_replication_factor_change: bool = False) -> dict[TopicPartition, KafkaRefusal | None]:
        cancels = sorted(str(tp) for tp, t in targets.items() if t is None)
        moves = sorted(str(tp) for tp, t in targets.items() if t is not None)
        self.called("alter_reassignments", f"cancel {','.join(cancels)}" if cancels else f"submit {','.join(moves)}")
        self.altered.append((dict(targets), allow_replication_factor_change))
        answers: dict[TopicPartition, KafkaRefusal | None] = {}
        for tp, target in targets.items():
            heading = self.moving.get(tp, self.replicas[tp])
            if target is not None and len(target) != len(heading) and not allow_replication_factor_change:
                answers[tp] = KafkaRefusal("INVALID_REPLICATION_FACTOR",
                                           f"The replication factor is changed from {len(heading)} to {len(target)}")
                continue
            answers[tp] = None
            if target is None:
                self.moving.pop(tp, None)
            else:
                self.moving[tp] = target
        return answers

    def alter_configs(self, changes: Sequence[ConfigChange]) -> None:
        self.called("alter_configs", f"{changes[0].op.lower()} {changes[0].resource} {changes[0].name}")
        for change in changes:
            if change.key == CORDONED_LOG_DIRS and change.op == "SET":
                self.cordoned[int(change.name)] = change.value
            elif change.key == CORDONED_LOG_DIRS and change.op == "DELETE":
                self.cordoned.pop(int(change.name), None)

    def elect_leaders(self, partitions: Sequence[TopicPartition] | None, unclean: bool = False
                      ) -> dict[TopicPartition, KafkaRefusal | None]:
        self.called("elect_leaders", "elect_leaders")
        return dict.fromkeys(partitions or [])

    def alter_replica_log_dirs(self, moves: Mapping[tuple[TopicPartition, int], str]
                               ) -> dict[tuple[TopicPartition, int], KafkaRefusal | None]:
        self.called("alter_replica_log_dirs", "alter_replica_log_dirs")
        answers: dict[tuple[TopicPartition, int], KafkaRefusal | None] = {}
        for key, log_dir in moves.items():
            if key[1] not in self.replicas.get(key[0], ()):
                self.preferred_dirs[key] = log_dir
                answers[key] = KafkaRefusal("REPLICA_NOT_AVAILABLE", "the replica does not exist yet", retriable=True)
            elif self.replica_dirs.get(key) == log_dir:
                self.future_dirs.pop(key, None)  # to the dir it is in: Kafka drops the copy under way
            else:
                self.future_dirs[key] = log_dir
            answers.setdefault(key, None)
        return answers
