"""PartitionReassignment: move partition replicas between brokers (and log dirs), declaratively.

The spec has two kinds of target, exactly one of which is set: ``partitions`` is kafka-reassign-partitions' JSON as
YAML (the user already knows the target), ``plan`` asks kpo to compute one (rebalance, drain or fill brokers, change
the replication factor). A generated plan stops at ``Proposed`` until it is approved, because a user should see what
will move before gigabytes start moving; explicit partitions need no approval, the user wrote them.

Everything the server can check without looking at Kafka is checked at admission (schema plus CEL): distinct
replicas, one log dir per replica, one target kind, the fields each plan goal needs. What needs Kafka (does the topic
exist, is the broker alive) makes the resource ``Invalid`` with the reason in its conditions.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from kpo.api.common import (
    ClusterRef,
    PartitionFailure,
    StatusBase,
    cluster_ref_immutable,
    require_one_entry_per_partition,
)
from kpo.api.schema import (
    LIST_ATOMIC,
    MAX_REPLICAS,
    ApiModel,
    BrokerSet,
    PartitionIndex,
    ReplicaSet,
    Rule,
    RuleReason,
    StatusModel,
    TopicName,
    TopicPattern,
    TopicSet,
    cel_in,
    list_map,
    object_default,
)

#: Explicit partition lists are capped so the server can bound the cost of its per-entry CEL rules, and so that what
#: kpo keeps per partition fits the API's size limits: the object itself (etcd takes at most 1.5 MiB per write; 20,000
#: entries with 27-character topic names already took 1.5 MB before any status) and the rollback record of every
#: partition in one ConfigMap (1 MiB). 10,000 entries fit both with topic names up to about 29 characters; a spec
#: whose rollback record would not fit is Invalid before anything moves (RollbackTooLarge).
MAX_EXPLICIT_PARTITIONS = 10000
#: Kafka's own topics: consumer group offsets, transaction and share-group state, and the KRaft metadata log. Moving
#: one (or shrinking its replication factor) puts every consumer group, transaction or the cluster itself at risk,
#: so a PartitionReassignment touches them only with ``allowInternalTopics: true``.
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata")
_INTERNAL_LIST = ", ".join(INTERNAL_TOPICS)
_CEL_INTERNAL_TOPICS = f"[{', '.join(repr(t) for t in INTERNAL_TOPICS)}]"
#: A plan names at most this many topics, so the server can bound the cost of the CEL rule that reads them.
MAX_PLAN_TOPICS = 10000
LOG_DIR_PATTERN = r"^(any|/.*)$"


LogDir = Annotated[StrictStr, Field(pattern=LOG_DIR_PATTERN, max_length=4096)]


class PartitionTarget(ApiModel):
    """The target of one partition: one entry of kafka-reassign-partitions' JSON."""

    topic: TopicName = Field(description="Topic of the partition.")
    partition: PartitionIndex = Field(description="Partition index (0-based).")
    replicas: ReplicaSet = Field(
        description="Target replicas as broker ids, distinct, preferred leader first. The replication factor is the "
        "length of this list, so it may grow or shrink the partition's replica set."
    )
    log_dirs: list[LogDir] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_REPLICAS,
        description='Target log directory of each replica, in the order of replicas: an absolute path on that broker, '
        'or "any" to let the broker choose. Omitted: every broker chooses. A replica already on its broker moves '
        "between that broker's log dirs (AlterReplicaLogDirs).",
    )

    rules = (
        Rule(
            cel="!has(self.logDirs) || size(self.logDirs) == size(self.replicas)",
            message="logDirs needs exactly one entry per replica, in the order of replicas",
            holds=lambda t: t.log_dirs is None or len(t.log_dirs) == len(t.replicas),
            field_path=".logDirs",
        ),
    )


class PlanGoal(StrEnum):
    REBALANCE = "Rebalance"
    REMOVE_BROKERS = "RemoveBrokers"
    ADD_BROKERS = "AddBrokers"
    REPLICATION_FACTOR = "ReplicationFactor"
    DEMOTE_BROKERS = "DemoteBrokers"
    REMOVE_DISKS = "RemoveDisks"
    REBALANCE_DISKS = "RebalanceDisks"
    RELIEVE_CAPACITY = "RelieveCapacity"


BROKER_GOALS = (PlanGoal.REMOVE_BROKERS, PlanGoal.ADD_BROKERS, PlanGoal.DEMOTE_BROKERS)
#: Goals that may name brokers: those that need them, and RebalanceDisks (only the brokers named).
BROKERS_ALLOWED = (*BROKER_GOALS, PlanGoal.REBALANCE_DISKS)
#: Goals that move replicas between the log dirs of their own broker (JBOD), never to another broker.
DISK_GOALS = (PlanGoal.REMOVE_DISKS, PlanGoal.REBALANCE_DISKS)
#: A RemoveDisks plan names at most this many log dirs.
MAX_PLAN_DISKS = 1000


class PlanDisk(ApiModel):
    """One log dir of one broker (the absolute path DescribeLogDirs and the broker's log.dirs name)."""

    broker: StrictInt = Field(ge=0, description="Broker id.")
    log_dir: StrictStr = Field(pattern="^/", max_length=4096, description="The log dir, an absolute path.")


class Plan(ApiModel):
    """A target kpo computes from the cluster's current state (brokers, racks, replica sizes)."""

    goal: PlanGoal = Field(
        default=PlanGoal.REBALANCE,
        description="What the plan achieves. Rebalance: even out replicas, leaders and bytes across the live brokers "
        "within tolerance. RemoveBrokers: move every replica off brokers (to decommission them). AddBrokers: move a "
        "fair share of replicas onto brokers (new, empty ones). ReplicationFactor: give every selected partition "
        "replicationFactor replicas. DemoteBrokers: move brokers to the end of every replica list they are in (no "
        "data moves) and elect the preferred leaders after, so they lead nothing: before maintenance; reverted by "
        "stop: Revert. RemoveDisks: empty the log dirs named in disks onto the other online dirs of their brokers, "
        "balanced by bytes (JBOD: a disk to replace or retire). RebalanceDisks: even out the bytes on the log dirs "
        "of each broker (only brokers', when named) within tolerance, moving as few bytes as it can. The two disk "
        "goals copy replicas between the dirs of one broker (AlterReplicaLogDirs, paced by "
        "execution.logDirThrottle) and never to another broker; a revert leaves replicas in the dirs they reached. "
        "RelieveCapacity: bring every log dir (so every broker) to or under threshold of its file system's capacity "
        "(KIP-827: total and usable bytes, Kafka 3.3+), moving as few bytes as it can: to another dir of the same "
        "broker first, else to a broker of the same rack (excludeBrokers take nothing); when no placement gets "
        "there, the proposal is the best reachable state (reason ThresholdUnreachable).",
    )
    topics: TopicSet | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PLAN_TOPICS,
        description="Topics the plan may move. Omitted (and no topicPattern): every topic. Exclusive with "
        "topicPattern.",
    )
    topic_pattern: TopicPattern | None = Field(
        default=None,
        description="Regular expression (RE2 syntax) that a topic's whole name must match to be included. "
        "Exclusive with topics.",
    )
    exclude_topics: TopicSet = Field(
        default_factory=list,
        description="Topics never moved, even if topics or topicPattern select them.",
    )
    exclude_topic_pattern: TopicPattern | None = Field(
        default=None,
        description="Regular expression (RE2 syntax): topics whose whole name matches are never moved, even if "
        "topics or topicPattern select them.",
    )
    exclude_brokers: BrokerSet = Field(
        default_factory=list,
        description="Brokers that take no new replica. They keep the replicas they have (to move those off, use goal "
        "RemoveBrokers) and stay out of the balance: the plan evens out the other brokers.",
    )
    exclude_leaders: BrokerSet = Field(
        default_factory=list,
        description="Brokers that lead no selected partition after the plan: an in-sync replica on another broker "
        "comes first in every list they head, and no leadership is handed to them (data stays where it is). Add "
        "execution.electLeadersAfter for the leadership itself to follow.",
    )
    brokers: BrokerSet | None = Field(
        default=None,
        min_length=1,
        description="Broker ids to drain (RemoveBrokers), to fill (AddBrokers) or to demote (DemoteBrokers): "
        "required by those goals. RebalanceDisks: only these brokers' dirs (default: every broker with more than one "
        "online dir). Forbidden by the other goals.",
    )
    disks: list[PlanDisk] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PLAN_DISKS,
        description="RemoveDisks: the log dirs to empty, each an online dir of its broker; a broker keeps at least one "
        "online dir. Required by that goal, forbidden by the others.",
        json_schema_extra=list_map("broker", "logDir"),
    )
    replication_factor: StrictInt | None = Field(
        default=None,
        ge=1,
        le=MAX_REPLICAS,
        description="Replicas every selected partition should have. Required by goal ReplicationFactor, forbidden "
        "by the others.",
    )
    rebalance_existing: StrictBool | None = Field(
        default=None,
        description="ReplicationFactor: also move existing replicas to even out the brokers. Unset or false: only the "
        "new replicas are placed (and replicas a rack holds beyond its share), so the bytes moved are what the new "
        "replicas copy. Forbidden by the other goals.",
    )
    threshold: StrictFloat | None = Field(
        default=None,
        gt=0,
        lt=1,
        description="RelieveCapacity: the share of each log dir's file system (KIP-827 total and usable bytes, as "
        "df shows it: Kafka's bytes and any other) no dir may stay above after the plan, e.g. 0.8. Required by that "
        "goal, forbidden by the others.",
    )
    tolerance: StrictFloat = Field(
        default=0.10,
        gt=0,
        le=1,
        description="Rebalance: how far (as a fraction of the mean) a broker's load may stay from the mean before "
        "kpo moves anything for it. 0.10 = within 10%.",
    )
    rack_aware: StrictBool = Field(
        default=True,
        description="Place the replicas of each partition on distinct racks (broker.rack) as far as the racks allow.",
    )
    cordon: StrictBool = Field(
        default=True,
        description="RemoveBrokers: cordon the brokers (KIP-1066, cordoned.log.dirs=*, Kafka 4.3 with "
        "metadata.version 4.3-IV0 or later) from the start of the execution, so no new partition is placed on them "
        "while they are drained. They stay cordoned after success, until this resource is deleted; stop, revert, "
        "a failure or a new spec uncordons them. Older clusters: drained without, said once in status.cordon. "
        "Not used by the other goals.",
    )

    rules = (
        Rule(
            cel="!has(self.topics) || !has(self.topicPattern)",
            message="topics and topicPattern are mutually exclusive: select topics by name or by pattern",
            holds=lambda p: p.topics is None or p.topic_pattern is None,
            field_path=".topicPattern",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel=f"!({cel_in('self.goal', BROKER_GOALS)}) || has(self.brokers)",
            message="goals RemoveBrokers, AddBrokers and DemoteBrokers need the broker ids in brokers",
            holds=lambda p: p.goal not in BROKER_GOALS or p.brokers is not None,
            field_path=".brokers",
            reason=RuleReason.REQUIRED,
        ),
        Rule(
            cel=f"{cel_in('self.goal', BROKERS_ALLOWED)} || !has(self.brokers)",
            message="brokers is only used by goals RemoveBrokers, AddBrokers, DemoteBrokers and RebalanceDisks",
            holds=lambda p: p.goal in BROKERS_ALLOWED or p.brokers is None,
            field_path=".brokers",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel="self.goal != 'RemoveDisks' || has(self.disks)",
            message="goal RemoveDisks needs the log dirs to empty in disks",
            holds=lambda p: p.goal is not PlanGoal.REMOVE_DISKS or p.disks is not None,
            field_path=".disks",
            reason=RuleReason.REQUIRED,
        ),
        Rule(
            cel="self.goal == 'RemoveDisks' || !has(self.disks)",
            message="disks is only used by goal RemoveDisks",
            holds=lambda p: p.goal is PlanGoal.REMOVE_DISKS or p.disks is None,
            field_path=".disks",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel=f"!({cel_in('self.goal', DISK_GOALS)}) || ((!has(self.excludeBrokers) || size(self.excludeBrokers) "
                "== 0) && (!has(self.excludeLeaders) || size(self.excludeLeaders) == 0))",
            message="goals RemoveDisks and RebalanceDisks move no replica to another broker and no leadership: "
                    "excludeBrokers and excludeLeaders do not apply",
            holds=lambda p: p.goal not in DISK_GOALS or not (p.exclude_brokers or p.exclude_leaders),
            field_path=".excludeBrokers",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel="self.goal != 'RelieveCapacity' || has(self.threshold)",
            message="goal RelieveCapacity needs threshold",
            holds=lambda p: p.goal is not PlanGoal.RELIEVE_CAPACITY or p.threshold is not None,
            field_path=".threshold",
            reason=RuleReason.REQUIRED,
        ),
        Rule(
            cel="self.goal == 'RelieveCapacity' || !has(self.threshold)",
            message="threshold is only used by goal RelieveCapacity",
            holds=lambda p: p.goal is PlanGoal.RELIEVE_CAPACITY or p.threshold is None,
            field_path=".threshold",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel="self.goal != 'RelieveCapacity' || !has(self.excludeLeaders) || size(self.excludeLeaders) == 0",
            message="goal RelieveCapacity keeps the leaders' order: excludeLeaders does not apply",
            holds=lambda p: p.goal is not PlanGoal.RELIEVE_CAPACITY or not p.exclude_leaders,
            field_path=".excludeLeaders",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel="self.goal != 'ReplicationFactor' || has(self.replicationFactor)",
            message="goal ReplicationFactor needs replicationFactor",
            holds=lambda p: p.goal is not PlanGoal.REPLICATION_FACTOR or p.replication_factor is not None,
            field_path=".replicationFactor",
            reason=RuleReason.REQUIRED,
        ),
        Rule(
            cel="self.goal == 'ReplicationFactor' || !has(self.replicationFactor)",
            message="replicationFactor is only used by goal ReplicationFactor",
            holds=lambda p: p.goal is PlanGoal.REPLICATION_FACTOR or p.replication_factor is None,
            field_path=".replicationFactor",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel="self.goal == 'ReplicationFactor' || !has(self.rebalanceExisting)",
            message="rebalanceExisting is only used by goal ReplicationFactor",
            holds=lambda p: p.goal is PlanGoal.REPLICATION_FACTOR or p.rebalance_existing is None,
            field_path=".rebalanceExisting",
            reason=RuleReason.FORBIDDEN,
        ),
    )


class ApprovalMode(StrEnum):
    MANUAL = "Manual"
    AUTOMATIC = "Automatic"


class Approval(ApiModel):
    """Who lets a generated plan run: the user, for one specific proposal, or kpo itself."""

    mode: ApprovalMode = Field(
        default=ApprovalMode.MANUAL,
        description="Manual: a generated plan waits in phase Proposed until proposalId names it. Automatic: kpo "
        "executes every proposal as soon as it is computed.",
    )
    proposal_id: StrictStr | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="Approves the proposal whose id is in status.proposal.id (copy it here). A newer proposal (the "
        "plan or the cluster changed) has a new id and needs a new approval. Only with plan and mode Manual.",
    )

    rules = (
        Rule(
            cel="self.mode == 'Manual' || !has(self.proposalId)",
            message="proposalId is for mode Manual; mode Automatic approves every proposal by itself",
            holds=lambda a: a.mode is ApprovalMode.MANUAL or a.proposal_id is None,
            field_path=".proposalId",
            reason=RuleReason.FORBIDDEN,
        ),
    )


class Strategy(StrEnum):
    ALL_AT_ONCE = "AllAtOnce"
    INCREMENTAL = "Incremental"


class MoveOrder(StrEnum):
    AS_GIVEN = "AsGiven"
    SMALLEST_FIRST = "SmallestFirst"
    LARGEST_FIRST = "LargestFirst"


class StallAction(StrEnum):
    REPORT = "Report"
    CANCEL = "Cancel"


#: Bounds of execution.stallAfterSeconds: shorter than a poll or two would flag every move between two size reads;
#: longer than a day is no detection at all.
MIN_STALL_AFTER_SECONDS = 10
MAX_STALL_AFTER_SECONDS = 86400
DEFAULT_STALL_AFTER_SECONDS = 600


class Execution(ApiModel):
    """How the moves are carried out: pacing, order, throttling and what happens after."""

    strategy: Strategy = Field(
        default=Strategy.ALL_AT_ONCE,
        description="AllAtOnce: each partition goes straight to its target replicas. Incremental: one new replica is "
        "added at a time and one old replica dropped per step (KAFKA-6794), so a partition never carries many "
        "extra replicas and each step copies one replica's bytes.",
    )
    max_moves: StrictInt | None = Field(
        default=None,
        ge=1,
        description="Most partitions of this resource moving at once, cluster-wide. A finished move frees its slot "
        "for the next at once. Omitted: the operator's configured default.",
    )
    max_moves_per_broker: StrictInt | None = Field(
        default=None,
        ge=1,
        description="Most moves in flight that involve any one broker (as source or destination), counted across "
        "every PartitionReassignment on the cluster. Omitted: the operator's configured default.",
    )
    max_moves_per_broker_direction: StrictInt | None = Field(
        default=None,
        ge=1,
        description="Most moves in flight copying into any one broker, and separately out of it (the leader serving "
        "the copy), counted across every PartitionReassignment on the cluster. Omitted: the operator's configured "
        "default.",
    )
    order: MoveOrder = Field(
        default=MoveOrder.AS_GIVEN,
        description="Which pending partitions start first: AsGiven (spec or plan order), SmallestFirst or "
        "LargestFirst (by bytes to copy).",
    )
    throttle: StrictInt | None = Field(
        default=None,
        ge=1024,
        description="Replication throttle in bytes/s per broker for the moving replicas (leader and follower "
        "replication rates, throttled replica lists). Removed when this resource's last move ends; throttles set "
        "by others are left alone. Omitted: no throttle.",
    )
    log_dir_throttle: StrictInt | None = Field(
        default=None,
        ge=1024,
        description="Intra-broker throttle in bytes/s (replica.alter.log.dirs.io.max.bytes.per.second) on each "
        "broker that moves a replica between its own log dirs (logDirs), as kafka-reassign-partitions' "
        "--replica-alter-log-dirs-throttle. Removed when this resource's last move ends; a rate set by others is "
        "left alone. Omitted: no intra-broker throttle.",
    )
    elect_leaders_after: StrictBool = Field(
        default=False,
        description="When every move has finished, run a preferred leader election for the moved partitions so "
        "leadership follows the new replica order.",
    )
    paused: StrictBool = Field(
        default=False,
        description="true: start no new moves (phase Paused); moves in flight run to the end and the throttles stay. "
        "Setting it back to false resumes where it stopped. Changing only this field never cancels or re-targets "
        "a move.",
    )
    stall_after_seconds: StrictInt = Field(
        default=DEFAULT_STALL_AFTER_SECONDS,
        ge=MIN_STALL_AFTER_SECONDS,
        le=MAX_STALL_AFTER_SECONDS,
        description="A move in flight whose new replicas grow by no byte for this long (its destination broker is "
        "down, for example) is stalled: listed in status.stalledMoves, condition Stalled=True with reason "
        "MoveStalled, one Event; what follows is onStall.",
    )
    on_stall: StallAction = Field(
        default=StallAction.REPORT,
        description="What kpo does with a stalled move. Report: flag it and let it run (it may resume when the broker "
        "is back). Cancel: cancel it (KIP-455, the partition returns to its replicas before the move) and count the "
        "partition as failed (reason MoveStalled); a spec change retries it.",
    )

    rules = (
        Rule(
            cel="!has(self.maxMoves) || !has(self.maxMovesPerBroker) || self.maxMovesPerBroker <= self.maxMoves",
            message="maxMovesPerBroker cannot exceed maxMoves",
            holds=lambda e: e.max_moves is None
            or e.max_moves_per_broker is None
            or e.max_moves_per_broker <= e.max_moves,
            field_path=".maxMovesPerBroker",
        ),
        Rule(
            cel="!has(self.maxMoves) || !has(self.maxMovesPerBrokerDirection) "
            "|| self.maxMovesPerBrokerDirection <= self.maxMoves",
            message="maxMovesPerBrokerDirection cannot exceed maxMoves",
            holds=lambda e: e.max_moves is None
            or e.max_moves_per_broker_direction is None
            or e.max_moves_per_broker_direction <= e.max_moves,
            field_path=".maxMovesPerBrokerDirection",
        ),
    )


class StopAction(StrEnum):
    KEEP = "Keep"
    REVERT = "Revert"


class DeletionPolicy(StrEnum):
    CANCEL = "Cancel"
    ORPHAN = "Orphan"


class PartitionReassignmentSpec(ApiModel):
    """What to move, how, and what to do on stop and on deletion."""

    cluster_ref: ClusterRef = None
    partitions: Annotated[list[PartitionTarget], AfterValidator(require_one_entry_per_partition)] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_EXPLICIT_PARTITIONS,
        description="Explicit targets, one entry per partition (the partitions array of kafka-reassign-partitions' "
        "JSON). Executed without approval. Exclusive with plan.",
        json_schema_extra=LIST_ATOMIC,
    )
    plan: Plan | None = Field(
        default=None,
        description="A target for kpo to compute. The proposal appears in status.proposal (and a ConfigMap) and "
        "runs once approved. Exclusive with partitions.",
    )
    approval: Approval | None = Field(
        default=None,
        description="Approval of generated plans. Omitted: mode Manual. Ignored for explicit partitions.",
    )
    execution: Execution = Field(
        default_factory=Execution,
        description="Pacing and ordering of the moves.",
        json_schema_extra=object_default(Execution),
    )
    stop: StrictBool = Field(
        default=False,
        description="true: cancel the moves in flight (KIP-455 cancellation) and start no more; what happens to "
        "finished partitions is onStop. Setting it back to false resumes.",
    )
    on_stop: StopAction = Field(
        default=StopAction.KEEP,
        description="On stop: Keep (finished partitions stay where they are) or Revert (every partition of this "
        "resource returns to the replicas it had before, from the rollback ConfigMap).",
    )
    deletion_policy: DeletionPolicy = Field(
        default=DeletionPolicy.CANCEL,
        description="On deletion while moves are in flight: Cancel (stop them, like stop=true with onStop Keep) or "
        "Orphan (leave them running in Kafka).",
    )
    allow_internal_topics: StrictBool = Field(
        default=False,
        description=f"true: this resource may move Kafka's internal topics ({_INTERNAL_LIST}). Without it, partitions "
        "naming one are refused at admission, plan.topics naming one is refused, and a generated plan leaves them "
        "out even when topicPattern matches them.",
    )
    allow_replication_factor_decrease: StrictBool = Field(
        default=False,
        description="true: a target may have fewer replicas than the partition has now (explicit replicas shorter "
        "than the current list, or plan goal ReplicationFactor below the current factor). Without it such a spec is "
        "Invalid and nothing is sent to Kafka. Kafka 4.1+ is also told (KIP-860) to refuse any replication factor "
        "change kpo did not intend.",
    )

    rules = (
        Rule(
            cel="has(self.partitions) || has(self.plan)",
            message="set a target: partitions (explicit replica lists) or plan (a generated plan)",
            holds=lambda s: s.partitions is not None or s.plan is not None,
            field_path=".partitions",
            reason=RuleReason.REQUIRED,
        ),
        Rule(
            cel="!has(self.partitions) || !has(self.plan)",
            message="partitions and plan are mutually exclusive: set exactly one",
            holds=lambda s: s.partitions is None or s.plan is None,
            field_path=".plan",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel="!has(self.approval) || !has(self.approval.proposalId) || has(self.plan)",
            message="approval.proposalId approves a generated proposal, so it needs plan",
            holds=lambda s: s.approval is None or s.approval.proposal_id is None or s.plan is not None,
            field_path=".approval.proposalId",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel=f"self.allowInternalTopics || !has(self.partitions) || "
            f"!self.partitions.exists(p, p.topic in {_CEL_INTERNAL_TOPICS})",
            message=f"partitions name an internal Kafka topic ({_INTERNAL_LIST}): moving one needs "
            "allowInternalTopics: true",
            holds=lambda s: s.allow_internal_topics or not any(p.topic in INTERNAL_TOPICS for p in s.partitions or ()),
            field_path=".partitions",
        ),
        Rule(
            cel=f"self.allowInternalTopics || !has(self.plan) || !has(self.plan.topics) || "
            f"!self.plan.topics.exists(t, t in {_CEL_INTERNAL_TOPICS})",
            message=f"plan.topics names an internal Kafka topic ({_INTERNAL_LIST}): planning one needs "
            "allowInternalTopics: true",
            holds=lambda s: s.allow_internal_topics or s.plan is None
            or not any(t in INTERNAL_TOPICS for t in s.plan.topics or ()),
            field_path=".plan.topics",
        ),
        cluster_ref_immutable(),
    )


class ReassignmentPhase(StrEnum):
    PENDING = "Pending"
    PLANNING = "Planning"
    PROPOSED = "Proposed"
    EXECUTING = "Executing"
    PAUSED = "Paused"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    REVERTING = "Reverting"
    REVERTED = "Reverted"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    INVALID = "Invalid"


class BrokerLoad(StatusModel):
    """One broker's load before and after the reassignment."""

    id: int = Field(ge=0, description="Broker id.")
    bytes_before: int = Field(default=0, ge=0, description="Bytes of replicas on the broker now.")
    bytes_after: int = Field(default=0, ge=0, description="Bytes of replicas on the broker after the moves.")
    replicas_before: int = Field(default=0, ge=0, description="Replicas on the broker now.")
    replicas_after: int = Field(default=0, ge=0, description="Replicas on the broker after the moves.")
    leaders_before: int = Field(default=0, ge=0, description="Preferred leaders on the broker now.")
    leaders_after: int = Field(default=0, ge=0, description="Preferred leaders on the broker after the moves.")


class LogDirLoad(StatusModel):
    """One online log dir of a broker before and after a disk plan or RelieveCapacity (every topic's replicas in
    it)."""

    broker: int = Field(ge=0, description="Broker id.")
    log_dir: str = Field(description="The log dir.")
    bytes_before: int = Field(default=0, ge=0, description="Bytes in the dir now.")
    bytes_after: int = Field(default=0, ge=0, description="Bytes in the dir after the moves.")
    replicas_before: int = Field(default=0, ge=0, description="Replicas in the dir now.")
    replicas_after: int = Field(default=0, ge=0, description="Replicas in the dir after the moves.")
    used_ratio_before: float | None = Field(
        default=None,
        ge=0,
        description="RelieveCapacity: the share of the dir's file system in use now (used over total bytes, KIP-827; "
        "4 decimals).",
    )
    used_ratio_after: float | None = Field(
        default=None,
        ge=0,
        description="RelieveCapacity: the share of the dir's file system in use after the moves, to compare with "
        "spec.plan.threshold.",
    )


#: status.summary.logDirs lists at most this many dirs.
MAX_SUMMARY_LOG_DIRS = 1000


class PlanSummary(StatusModel):
    """What the target changes, computed before anything moves."""

    partitions: int = Field(default=0, ge=0, description="Partitions whose replicas change (disk goals: whose "
                            "replicas change log dir).")
    replica_moves: int = Field(default=0, ge=0, description="Replicas created on a new broker (disk goals: replicas "
                               "copied to another log dir of their broker).")
    bytes_to_move: int = Field(default=0, ge=0, description="Bytes those replicas copy.")
    leader_changes: int = Field(default=0, ge=0, description="Partitions whose preferred leader changes.")
    lower_bound_bytes: int | None = Field(
        default=None,
        ge=0,
        description="Generated plans: the fewest bytes any plan reaching the goal must copy, to judge this one by.",
    )
    offline_partitions: int = Field(
        default=0,
        ge=0,
        description="Generated plans: selected partitions with no replica on an alive broker. Nothing can copy them, "
        "so the plan leaves them out; bring a broker holding them back first.",
    )
    offline_examples: list[str] = Field(
        default_factory=list,
        max_length=10,
        description="The first offline partitions (topic-partition), sorted.",
    )
    band_reached: bool | None = Field(
        default=None,
        description="Generated plans that balance: whether every broker ends within tolerance of the mean bytes. "
        "When false, note names the brokers outside; the plan is still the closest found.",
    )
    max_over_mean: float | None = Field(default=None, ge=0, description="Generated plans: the fullest broker's "
                                        "bytes after the plan, over the mean (1.0 is perfect).")
    min_over_mean: float | None = Field(default=None, ge=0, description="Generated plans: the emptiest broker's "
                                        "bytes after the plan, over the mean (1.0 is perfect).")
    note: str = Field(default="", max_length=1024, description="Generated plans: what the planning job says about "
                      "its plan, e.g. why the band was not reached.")
    brokers: list[BrokerLoad] = Field(
        default_factory=list,
        description="Load per broker, before and after.",
        json_schema_extra=list_map("id"),
    )
    log_dirs: list[LogDirLoad] | None = Field(
        default=None,
        max_length=MAX_SUMMARY_LOG_DIRS,
        description="Disk goals and RelieveCapacity: every online log dir of the brokers concerned (the first 1000 "
        "by broker and dir), bytes and replicas before and after (RelieveCapacity: the share of the file system in "
        "use, too).",
    )


class LogDirProgress(StatusModel):
    """Replicas of this resource moving into one log dir of one broker (AlterReplicaLogDirs)."""

    broker: int = Field(ge=0, description="Broker id.")
    log_dir: str = Field(description="The log dir the replicas move into.")
    partitions: int = Field(default=0, ge=0, description="Replicas still to get there.")
    copying: int = Field(default=0, ge=0, description="Of those, the ones the broker is copying now.")
    bytes_to_move: int = Field(default=0, ge=0, description="Their bytes in the dirs they are in now.")
    bytes_copied: int = Field(default=0, ge=0, description="Bytes the broker has copied into the new dir so far.")


class Progress(StatusModel):
    """How far the execution is, counted in partitions and bytes."""

    total: int = Field(default=0, ge=0, description="Partitions to move.")
    completed: int = Field(default=0, ge=0, description="Partitions at their target.")
    in_flight: int = Field(default=0, ge=0, description="Partitions moving now.")
    pending: int = Field(default=0, ge=0, description="Partitions not started yet.")
    failed: int = Field(default=0, ge=0, description="Partitions that failed (see failures).")
    skipped: int = Field(default=0, ge=0, description="Partitions a revert left alone (see skipped).")
    bytes_moved: int = Field(default=0, ge=0, description="Bytes copied so far.")
    bytes_to_move: int = Field(default=0, ge=0, description="Bytes to copy in all.")
    percent: int = Field(default=0, ge=0, le=100, description="Completion in percent of bytesToMove (or partitions).")
    eta_seconds: int | None = Field(
        default=None, ge=0, description="Estimated seconds of execution left: the bytes left at the copy rate over "
        "elapsedSeconds (paused time excluded). While paused it does not grow."
    )
    started_at: AwareDatetime | None = Field(default=None, description="When the first move started.")
    elapsed_seconds: int | None = Field(
        default=None, ge=0, description="Seconds of execution from the first move to kpo's last look, paused time "
        "(pausedSeconds) excluded; once finished, how long the moves took (to set against "
        "proposal.estimatedSeconds)."
    )
    paused_seconds: int | None = Field(
        default=None, ge=0, description="Seconds spent in phase Paused since the first move started: startedAt + "
        "elapsedSeconds + pausedSeconds is kpo's last look."
    )
    paused_since: AwareDatetime | None = Field(
        default=None, description="While paused: when the pause began (pausedSeconds counts it so far)."
    )
    summary: str = Field(default="", description='Completed/total partitions, e.g. "12/30" (the Progress column).')
    log_dirs: list[LogDirProgress] | None = Field(
        default=None, max_length=100,
        description="Replicas still to move between the log dirs of their broker (logDirs), per broker and target "
        "dir (the first 100); absent when none.")


class Conflict(StatusModel):
    """A partition this resource wants to move that something else is moving already."""

    topic: str = Field(description="Topic name.")
    partition: int = Field(ge=0, description="Partition index.")
    holder: str = Field(
        description='Name of the PartitionReassignment that claims the partition, or "external" when a move not '
        "started by kpo is in progress in Kafka."
    )


class SkippedPartition(StatusModel):
    """A partition a revert left alone."""

    topic: str = Field(description="Topic name.")
    partition: int = Field(ge=0, description="Partition index.")
    reason: str = Field(description="Why it was not reverted (e.g. it was deleted, or another move holds it).")


class Proposal(StatusModel):
    """A generated plan waiting for approval (or approved automatically)."""

    id: str = Field(description="Proposal id: copy it to spec.approval.proposalId to approve this proposal.")
    created_at: AwareDatetime | None = Field(default=None, description="When the proposal was computed.")
    config_map: str | None = Field(
        default=None, description="ConfigMap holding the proposed assignment in kafka-reassign-partitions JSON."
    )
    partitions: int = Field(default=0, ge=0, description="Partitions whose replicas change.")
    replica_moves: int = Field(default=0, ge=0, description="Replicas created on a new broker.")
    bytes_to_move: int = Field(default=0, ge=0, description="Bytes to copy.")
    leader_changes: int = Field(default=0, ge=0, description="Partitions whose preferred leader changes.")
    estimated_seconds: int | None = Field(
        default=None, ge=0, description="How long the moves should take at execution.throttle under its order and "
        "limits (kpo's scheduler on the fluid model of throttled replication, no writes assumed). An expectation, "
        "not a bound either way: Kafka's windowed quota can beat it (estimateNote says when it likely will). "
        "status.duration sets it against the run. Unset: see estimateNote."
    )
    estimate_at_throttle_seconds: int | None = Field(
        default=None, ge=0, description="The busiest broker's bytes in or out over the throttle: what the bytes "
        "take if Kafka holds every broker to the throttle at every instant. Not a bound: Kafka's quota lets up to "
        "replica.fetch.max.bytes per partition through per fetch and forgets what exceeds its window."
    )
    estimate_note: str = Field(default="", description="What the estimate assumes, or why there is none; whether "
                               "Kafka's quota will likely let the moves finish sooner, and through which broker.")


class Duration(StatusModel):
    """Estimate against actual, once the moves of a generated plan have ended."""

    estimated_seconds: int = Field(ge=0, description="proposal.estimatedSeconds of the proposal that ran.")
    took_seconds: int = Field(ge=0, description="Seconds from the first move kpo submitted to the look that found "
                              "the last one ended (progress.elapsedSeconds when it finished).")
    summary: str = Field(default="", max_length=1024, description='E.g. "took 38 s, 0.31 x the estimate of 121 s", '
                         "with the reason the proposal gave when Kafka was expected to beat it.")


class InFlightMove(StatusModel):
    """A move kpo submitted for this resource and Kafka still reports in flight."""

    topic: str = Field(description="Topic name.")
    partition: int = Field(ge=0, description="Partition index.")
    replicas: list[int] = Field(description="The target replicas kpo submitted (AlterPartitionReassignments).")
    copied_bytes: int | None = Field(
        default=None, ge=0, description="Bytes the move's new replicas held at the last look (DescribeLogDirs)."
    )
    progress_at: AwareDatetime | None = Field(
        default=None,
        description="When the new replicas last grew, a destination broker that was down came back, or the move was "
        "first seen: the clock of stall detection.",
    )
    down: list[int] = Field(
        default_factory=list,
        description="Destination brokers that were down (not live, or not answering) at the last look: when one "
        "comes back, the stall clock restarts.",
    )
    behind_bytes: int | None = Field(
        default=None, ge=0, description="The fewest bytes the slowest new replica lacked against the partition's "
        "largest replica since closingAt."
    )
    closing_at: AwareDatetime | None = Field(
        default=None, description="When the move last came closer to its largest replica than ever before (its lag "
        "at a new low): the clock of a move that copies but does not catch up."
    )


class StalledMove(StatusModel):
    """A move that made no progress for execution.stallAfterSeconds (no byte copied, or no closer to its largest
    replica): in flight, or cancelled for it."""

    topic: str = Field(description="Topic name.")
    partition: int = Field(ge=0, description="Partition index.")
    brokers: list[int] = Field(default_factory=list, description="The destination brokers the move copies to.")
    down: list[int] = Field(default_factory=list, description="Those of them that are not live brokers now.")
    copied_bytes: int = Field(default=0, ge=0, description="Bytes the new replicas hold.")
    since: AwareDatetime | None = Field(default=None, description="When they last grew.")
    cancelled: bool = Field(
        default=False, description="true: cancelled for it (execution.onStall Cancel; status.failures records the "
        "partition with reason MoveStalled); listed until a spec change starts a new run."
    )
    behind_bytes: int | None = Field(
        default=None, ge=0, description="Set when the move copies but comes no closer: the bytes its slowest new "
        "replica lacks against the partition's largest replica (the partition takes writes as fast as it is copied; "
        "under a throttle below its write rate, for instance). since: when that lag was lowest."
    )


class ThrottledTopic(StatusModel):
    """The replica throttle entries kpo added to one topic ("partition:broker", as Kafka lists them)."""

    topic: str = Field(description="Topic name.")
    leader: list[str] = Field(default_factory=list,
                              description="Entries kpo appended to leader.replication.throttled.replicas.")
    follower: list[str] = Field(default_factory=list,
                                description="Entries kpo appended to follower.replication.throttled.replicas.")


class ThrottleStatus(StatusModel):
    """The replication throttles kpo set for this resource; removed when its last move ends."""

    rate: int = Field(default=0, ge=0, description="Bytes/s set as leader and follower replication throttled rate.")
    brokers: list[int] = Field(default_factory=list,
                               description="Brokers whose throttled rates kpo set (a rate someone else had set is "
                               "left alone and not listed).")
    topics: list[ThrottledTopic] = Field(default_factory=list, description="Replica entries kpo added, by topic.")
    log_dir_rate: int | None = Field(default=None, ge=0, description="Bytes/s set as the intra-broker throttle "
                                     "(replica.alter.log.dirs.io.max.bytes.per.second, execution.logDirThrottle).")
    log_dir_brokers: list[int] | None = Field(default=None, description="Brokers whose intra-broker rate kpo set.")


class CordonedBroker(StatusModel):
    """A broker kpo cordoned (KIP-1066), with the cordoned.log.dirs it had before, restored when it lets go."""

    broker: int = Field(ge=0, description="Broker id.")
    previous: str = Field(default="", description="Its cordoned.log.dirs before kpo set it to * (empty: unset).")


class CordonStatus(StatusModel):
    """The brokers this RemoveBrokers drain holds cordoned (plan.cordon)."""

    brokers: list[CordonedBroker] = Field(default_factory=list, description="Brokers kpo cordoned.")
    unavailable: str | None = Field(default=None, description="Why the brokers are drained without cordons (an "
                                    "older cluster, a refused config); said once until the spec changes.")


class StillLeadingPartition(StatusModel):
    """A selected partition still led, after the election, by a broker that should lead nothing."""

    topic: str = Field(description="Topic name.")
    partition: int = Field(ge=0, description="Partition index.")
    leader: int = Field(description="The broker leading it when kpo looked (before the election).")
    reason: str = Field(max_length=1024, description="Why the election could not move it: no other in-sync replica, "
                        "its preferred replica is such a broker too, or Kafka's refusal.")


class LeaderElectionResult(StatusModel):
    """Result of the preferred leader election after the moves (execution.electLeadersAfter)."""

    elected: int = Field(default=0, ge=0, description="Partitions whose leader changed to the preferred replica.")
    already_preferred: int = Field(default=0, ge=0, description="Partitions already led by the preferred replica.")
    failed: int = Field(default=0, ge=0, description="Partitions where Kafka refused the election.")
    away_from: list[int] | None = Field(
        default=None,
        description="Brokers that must lead no selected partition (DemoteBrokers' brokers; plan.excludeLeaders "
        "with electLeadersAfter): every selected partition they led was elected, not only the moved ones.")
    still_leading: int | None = Field(
        default=None, ge=0, description="Selected partitions still led by a broker of awayFrom after the election.")
    still_leading_partitions: list[StillLeadingPartition] | None = Field(
        default=None, max_length=100, description="The first 100 of them, with why.")


class PartitionReassignmentStatus(StatusBase):
    """What kpo observed and did; Kafka's ListPartitionReassignments is the source of truth behind it."""

    phase: ReassignmentPhase | None = Field(
        default=None,
        description="Pending, Planning, Proposed, Executing, Paused, Stopping, Stopped, Reverting, Reverted, "
        "Succeeded, Failed or Invalid.",
    )
    summary: PlanSummary | None = Field(default=None, description="What the target changes.")
    progress: Progress | None = Field(default=None, description="How far the execution is.")
    failures: list[PartitionFailure] = Field(default_factory=list, description="Partitions that failed, and why.")
    conflicts: list[Conflict] = Field(
        default_factory=list, description="Partitions held by another reassignment; they wait and are not moved."
    )
    rollback_config_map: str | None = Field(
        default=None,
        description="ConfigMap with the replicas every partition had before this resource moved it, in "
        "kafka-reassign-partitions JSON (used by onStop Revert, usable by hand).",
    )
    in_flight: list[InFlightMove] = Field(
        default_factory=list,
        description="Moves kpo started for this resource that are still in flight. kpo's only memory of its own "
        "work: after a restart it resumes these instead of submitting them again, and it never cancels a move it "
        "did not start.",
    )
    throttle: ThrottleStatus | None = Field(
        default=None, description="Replication throttles in place for this resource (execution.throttle)."
    )
    cordon: CordonStatus | None = Field(
        default=None, description="KIP-1066 cordons this resource holds on the brokers it drains (plan.cordon)."
    )
    proposal: Proposal | None = Field(default=None, description="The current generated proposal.")
    duration: Duration | None = Field(
        default=None, description="Generated plans with an estimate: how long the moves took against "
        "proposal.estimatedSeconds, once they have ended (Succeeded)."
    )
    skipped: list[SkippedPartition] = Field(default_factory=list, description="Partitions a revert did not touch.")
    leader_election: LeaderElectionResult | None = Field(
        default=None, description="Result of electLeadersAfter."
    )
    stalled_moves: list[StalledMove] = Field(
        default_factory=list,
        description="Moves in flight with no progress for execution.stallAfterSeconds (no byte copied, or no "
        "closer to their largest replica; the first 100).",
    )
    topic_missing_since: AwareDatetime | None = Field(
        default=None, description="When kpo first found a topic of the spec missing for this generation. It waits "
        "a short grace period for a topic applied together with this resource before declaring the spec Invalid.")
