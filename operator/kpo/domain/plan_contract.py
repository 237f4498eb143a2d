"""The storage contract between the operator and the planning job, as typed values and their JSON.

The operator and the PySpark job (``kpo.planning.spark``) never call each other: the operator writes a snapshot of the
cluster and the request into an input directory, the job writes its answer into an output directory, and whichever
backend ran the job (a local ``spark-submit`` or a SparkApplication) only has to say whether it finished. Both sides
import this module, so the file formats are defined once, here, and validated on both ends.

Input directory:

- ``request.json`` -- :class:`PlanRequest` (the ``spec.plan`` of a PartitionReassignment: goal, brokers concerned,
  topic selection, replication factor, tolerance, rack awareness);
- ``brokers.json`` -- a JSON array of :class:`BrokerInfo` (id, rack or null, alive);
- ``partitions`` -- Parquet or JSON lines, one :class:`PartitionRecord` per partition (topic, partition, replicas
  leader first, leader, isr, size_bytes). A directory of part files or a single file both work.

Output directory:

- ``plan.json`` -- :class:`ReassignmentPlan`, kafka-reassign-partitions' JSON, holding only the partitions whose
  replica list changes (a new order alone is a change: it moves the preferred leader);
- ``metrics.json`` -- :class:`PlanMetrics`; ``status`` is ``ok`` or ``failed`` with a message. A failed job writes it
  and exits non-zero, so a local runner and a SparkApplication both report the failure with the job's own words.

This module is pure (no I/O): it turns values into JSON text and back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from kpo.domain.model import Replicas, TopicPartition

REQUEST_FILE = "request.json"
BROKERS_FILE = "brokers.json"
PARTITIONS_PATH = "partitions"
PLAN_FILE = "plan.json"
METRICS_FILE = "metrics.json"

STATUS_OK: Final = "ok"
STATUS_FAILED: Final = "failed"


class ContractError(ValueError):
    """A contract document that does not parse or breaks a rule; the message says which field and why."""


class Goal(StrEnum):
    REBALANCE = "Rebalance"
    REMOVE_BROKERS = "RemoveBrokers"
    ADD_BROKERS = "AddBrokers"
    REPLICATION_FACTOR = "ReplicationFactor"
    DEMOTE_BROKERS = "DemoteBrokers"
    REMOVE_DISKS = "RemoveDisks"
    REBALANCE_DISKS = "RebalanceDisks"
    RELIEVE_CAPACITY = "RelieveCapacity"


#: Goals that move replicas between the log dirs of their own broker (JBOD), never between brokers.
DISK_GOALS: Final = frozenset({Goal.REMOVE_DISKS, Goal.REBALANCE_DISKS})
#: Goals whose snapshot carries every replica's log dir and every dir's capacity: the disk goals, and RelieveCapacity
#: (which moves replicas between dirs and between brokers).
DIR_GOALS: Final = DISK_GOALS | {Goal.RELIEVE_CAPACITY}


class _Document(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        try:
            return cls.model_validate_json(text)
        except ValidationError as err:
            raise ContractError(_describe(cls.__name__, err)) from None

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True)


def _describe(what: str, err: ValidationError) -> str:
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or what}: {e['msg']}" for e in err.errors())
    return f"invalid {what}: {problems}"


class LogDirRef(_Document):
    """One log dir of one broker (an absolute path, as DescribeLogDirs names it)."""

    broker: int
    log_dir: str = Field(min_length=1)


class PlanRequest(_Document):
    """What to plan: a goal over a set of topics, with the brokers it concerns.

    - ``Rebalance``: ``brokers`` optional; when given, only those brokers send or receive replicas.
    - ``RemoveBrokers``: ``brokers`` are drained; nothing of the selected topics is left on them.
    - ``AddBrokers``: ``brokers`` are new, registered brokers; the cluster is rebalanced onto all brokers.
    - ``ReplicationFactor``: the selected topics get ``replicationFactor`` replicas per partition.
    - ``DemoteBrokers``: ``brokers`` go to the end of every replica list of the selected topics; no replica moves.
    - ``RemoveDisks``: the log dirs in ``disks`` are emptied of the selected topics' replicas onto the other online
      dirs of their brokers, balanced by bytes; no replica changes broker.
    - ``RebalanceDisks``: the bytes on each broker's online dirs (only ``brokers``' when given) are evened out within
      ``tolerance`` of the broker's mean dir, moving as few bytes as it can; no replica changes broker.
    - ``RelieveCapacity``: every log dir (so every broker) ends at or under ``threshold`` of its file system's capacity
      (KIP-827's total and usable bytes), moving as few bytes as it can: to another dir of the same broker first, else
      to a broker of the same rack; ``excludeBrokers`` take nothing.

    Topics: ``topics`` and ``topicPattern`` (a Java regular expression matched against the whole name) select; none of
    them means every topic in the snapshot; ``excludeTopics`` and ``excludeTopicPattern`` remove topics from the
    selection. Brokers: ``excludeBrokers`` take no new replica (they keep theirs and stay out of the balance);
    ``excludeLeaders`` lead no selected partition after the plan.
    """

    goal: Goal
    brokers: tuple[int, ...] = ()
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    exclude_topics: tuple[str, ...] = ()
    exclude_topic_pattern: str | None = None
    exclude_brokers: tuple[int, ...] = ()
    exclude_leaders: tuple[int, ...] = ()
    replication_factor: int | None = Field(default=None, ge=1)
    tolerance: float = Field(default=0.05, gt=0.0, lt=1.0)
    rack_aware: bool = True
    # ReplicationFactor: also move replicas that exist to even out the brokers. Off, only the new replicas are placed
    # (and replicas a rack holds beyond its share), so the bytes moved are the bytes the new replicas copy.
    rebalance_existing: bool = False
    # RemoveDisks: the log dirs to empty.
    disks: tuple[LogDirRef, ...] = ()
    # RelieveCapacity: the share of each file system's capacity no dir may stay above.
    threshold: float | None = Field(default=None, gt=0.0, lt=1.0)

    @model_validator(mode="after")
    def _goal_needs(self) -> Self:
        if self.goal is Goal.REMOVE_DISKS and not self.disks:
            raise ValueError("goal RemoveDisks needs the log dirs to empty in 'disks'")
        if self.goal is not Goal.REMOVE_DISKS and self.disks:
            raise ValueError(f"'disks' only applies to goal RemoveDisks, not {self.goal.value}")
        if self.goal is Goal.REMOVE_DISKS and self.brokers:
            raise ValueError("goal RemoveDisks names its brokers in 'disks', not in 'brokers'")
        if self.goal is Goal.RELIEVE_CAPACITY and self.threshold is None:
            raise ValueError("goal RelieveCapacity needs 'threshold'")
        if self.goal is not Goal.RELIEVE_CAPACITY and self.threshold is not None:
            raise ValueError(f"'threshold' only applies to goal RelieveCapacity, not {self.goal.value}")
        if self.goal is Goal.RELIEVE_CAPACITY and (self.brokers or self.exclude_leaders):
            raise ValueError("goal RelieveCapacity relieves every broker and keeps the leaders' order: "
                             "'brokers' and 'excludeLeaders' do not apply")
        if self.goal in DISK_GOALS and (self.exclude_brokers or self.exclude_leaders):
            raise ValueError(f"goal {self.goal.value} moves no replica to another broker and no leadership: "
                             "'excludeBrokers' and 'excludeLeaders' do not apply")
        if len({(d.broker, d.log_dir) for d in self.disks}) != len(self.disks):
            raise ValueError("'disks' lists a log dir twice")
        if self.goal in (Goal.REMOVE_BROKERS, Goal.ADD_BROKERS, Goal.DEMOTE_BROKERS) and not self.brokers:
            raise ValueError(f"goal {self.goal.value} needs the brokers it concerns in 'brokers'")
        if self.goal is Goal.REPLICATION_FACTOR and self.replication_factor is None:
            raise ValueError("goal ReplicationFactor needs 'replicationFactor'")
        if self.goal is not Goal.REPLICATION_FACTOR and self.replication_factor is not None:
            raise ValueError(f"'replicationFactor' only applies to goal ReplicationFactor, not {self.goal.value}")
        if self.goal is not Goal.REPLICATION_FACTOR and self.rebalance_existing:
            raise ValueError(f"'rebalanceExisting' only applies to goal ReplicationFactor, not {self.goal.value}")
        if len(set(self.brokers)) != len(self.brokers):
            raise ValueError("'brokers' lists a broker twice")
        return self


class DirSpace(_Document):
    """A log dir's file system as its broker reports it (DescribeLogDirs v4+, KIP-827): total and usable bytes."""

    log_dir: str = Field(min_length=1)
    total_bytes: int = Field(gt=0)
    usable_bytes: int = Field(ge=0)


class BrokerInfo(_Document):
    id: int
    rack: str | None = None
    alive: bool = True
    #: The broker's online log dirs (DescribeLogDirs); empty when unknown.
    log_dirs: tuple[str, ...] = ()
    #: RelieveCapacity: the capacity of each online dir that reports one (none from a broker older than Kafka 3.3).
    capacity: tuple[DirSpace, ...] = ()


class PartitionRecord(_Document):
    """One partition of the snapshot. ``size_bytes`` is the partition's size (the leader's replica, DescribeLogDirs)."""

    model_config = ConfigDict(alias_generator=None, frozen=True, extra="forbid")

    topic: str
    partition: int = Field(ge=0)
    replicas: tuple[int, ...]
    leader: int | None = None
    isr: tuple[int, ...] = ()
    size_bytes: int = Field(default=0, ge=0)
    #: The log dir of each replica, in the order of ``replicas`` (null where unknown); empty when not read.
    log_dirs: tuple[str | None, ...] = ()

    @model_validator(mode="after")
    def _dirs_match(self) -> Self:
        if self.log_dirs and len(self.log_dirs) != len(self.replicas):
            raise ValueError(f"{self.topic}-{self.partition}: log_dirs must have one entry per replica")
        return self

    def to_json(self) -> str:
        # Only the disk goals' snapshots carry log dirs: the others' lines stay as short as they were.
        return self.model_dump_json(by_alias=True, exclude=None if self.log_dirs else {"log_dirs"})


class PlanEntry(_Document):
    model_config = ConfigDict(alias_generator=None, frozen=True, extra="forbid")

    topic: str
    partition: int = Field(ge=0)
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if len(set(self.replicas)) != len(self.replicas):
            raise ValueError(f"{self.topic}-{self.partition}: a broker appears twice in {list(self.replicas)}")
        if self.log_dirs and len(self.log_dirs) != len(self.replicas):
            raise ValueError(f"{self.topic}-{self.partition}: log_dirs must have one entry per replica")
        return self


class ReassignmentPlan(_Document):
    """kafka-reassign-partitions' JSON: usable as it is with ``kafka-reassign-partitions.sh --execute``."""

    model_config = ConfigDict(alias_generator=None, frozen=True, extra="forbid")

    version: Literal[1] = 1
    partitions: tuple[PlanEntry, ...] = ()

    def targets(self) -> dict[TopicPartition, Replicas]:
        return {TopicPartition(e.topic, e.partition): e.replicas for e in self.partitions}

    def log_dir_targets(self) -> dict[TopicPartition, tuple[str, ...]]:
        """The entries that name a log dir for some replica (the disk goals'): partition -> log_dirs."""
        return {TopicPartition(e.topic, e.partition): e.log_dirs for e in self.partitions
                if any(d != "any" for d in e.log_dirs)}

    def digest(self) -> str:
        """A short, stable id of the plan's content: what a user names to approve exactly the proposal shown. The
        log dirs count only where an entry names one, so a plan of replica lists keeps the id it always had."""
        canonical = sorted((e.topic, e.partition, e.replicas) + ((e.log_dirs,) if any(d != "any" for d in e.log_dirs)
                                                                    else ()) for e in self.partitions)
        return hashlib.sha256(repr(canonical).encode()).hexdigest()[:16]


def plan_of(targets: Mapping[TopicPartition, Replicas],
            log_dirs: Mapping[TopicPartition, tuple[str, ...]] | None = None) -> ReassignmentPlan:
    entries = (
        PlanEntry(topic=tp.topic, partition=tp.partition, replicas=tuple(r),
                  log_dirs=(log_dirs or {}).get(tp) or ("any",) * len(r))
        for tp, r in sorted(targets.items())
    )
    return ReassignmentPlan(partitions=tuple(entries))


class BrokerLoad(_Document):
    broker: int
    bytes: int
    replicas: int
    leaders: int


class DirLoad(_Document):
    """One online log dir of a broker: the bytes and replicas it holds (every topic's, selected or not); for
    RelieveCapacity also its file system's size and the bytes in use on it (what ``df`` shows: Kafka's and others')."""

    broker: int
    log_dir: str
    bytes: int
    replicas: int
    total_bytes: int | None = None
    used_bytes: int | None = None


class Balance(_Document):
    """max / mean over the brokers that take part after the change (1.0 is perfect), and min / mean of their bytes:
    max / mean alone hides a broker left far below the others."""

    bytes: float
    replicas: float
    leaders: float
    bytes_min: float = 1.0


class PlanMetrics(_Document):
    """What the job measured. For ``status: failed`` only ``message`` and ``planningSeconds`` are meaningful.

    ``planningSeconds`` is the job's own work (reading the snapshot to writing the plan); ``sparkStartSeconds`` the
    Spark session start before it. ``rounds`` counts the rounds of moves and of leader reorders the job ran.
    """

    status: Literal["ok", "failed"]
    message: str = ""
    goal: Goal | None = None
    tolerance: float | None = None
    partitions: int = 0
    partitions_selected: int = 0
    partitions_changed: int = 0
    replicas_to_move: int = 0
    bytes_to_move: int = 0
    leader_changes: int = 0
    lower_bound_bytes: int = 0
    lower_bound_replicas: int = 0
    rack_aware: bool = False
    rack_violations_before: int = 0
    rack_violations_after: int = 0
    replicas_left_on_removed_brokers: int = 0
    # Selected partitions with no replica on an alive broker: nothing could copy them, so the plan leaves them out.
    offline_partitions: int = 0
    offline_examples: tuple[str, ...] = ()
    # Whether every broker taking part ends within tolerance of the mean bytes (None: the goal does not balance).
    # When not, ``message`` names the brokers outside and the status is still ok: the plan is the closest found.
    band_reached: bool | None = None
    # When the band was not reached, how even any valid plan can be over the same brokers (issue 27): the lowest
    # broker ends at most at ``reachMin`` x mean bytes, the highest at least at ``reachMax`` x mean, whatever the
    # plan (racks kept, the replicas outside the selection, the largest partition); ``reachMet``: whether this plan
    # meets that bound at both ends, the only case where ``message`` says that no plan can do better.
    reach_min: float | None = None
    reach_max: float | None = None
    reach_met: bool | None = None
    # Which plan the job kept: its rounds', or the greedy candidate's where that was better
    # (kpo.planning.spark.candidate).
    chosen_plan: Literal["rounds", "greedy"] = "rounds"
    balance_before: Balance | None = None
    balance_after: Balance | None = None
    brokers_before: tuple[BrokerLoad, ...] = ()
    brokers_after: tuple[BrokerLoad, ...] = ()
    # Disk goals: every online log dir before and after the plan (the plan's replicas_to_move and bytes_to_move are
    # then the copies between dirs of one broker).
    dirs_before: tuple[DirLoad, ...] = ()
    dirs_after: tuple[DirLoad, ...] = ()
    rounds: int = 0
    planning_seconds: float = 0.0
    spark_start_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    @classmethod
    def failed(cls, message: str, planning_seconds: float = 0.0) -> PlanMetrics:
        return cls(status=STATUS_FAILED, message=message, planning_seconds=planning_seconds)


def brokers_json(brokers: Iterable[BrokerInfo]) -> str:
    return "[" + ",".join(b.to_json() for b in brokers) + "]"


def parse_brokers(text: str | bytes) -> tuple[BrokerInfo, ...]:
    try:
        brokers = TypeAdapter(tuple[BrokerInfo, ...]).validate_json(text)
    except ValidationError as err:
        raise ContractError(_describe("brokers.json", err)) from None
    ids = [b.id for b in brokers]
    if len(set(ids)) != len(ids):
        raise ContractError("invalid brokers.json: a broker id appears twice")
    return brokers


def partitions_jsonl(partitions: Iterable[PartitionRecord]) -> str:
    return "".join(p.to_json() + "\n" for p in partitions)
