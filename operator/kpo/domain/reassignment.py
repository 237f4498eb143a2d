"""Pure decisions for explicit partition reassignments: validation, classification against Kafka, progress.

Kafka is the source of truth for what is moving (ListPartitionReassignments); a PartitionReassignment's status is a
projection of it. The only thing kpo must remember itself is which in-flight moves it started (``owned``), so that
after a restart it neither submits a move twice nor mistakes its own move for someone else's, and so that a partition
dropped from the spec is cancelled while anyone else's move is left alone.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from kpo.domain.model import ClusterView, KafkaRefusal, OngoingReassignment, PartitionState, Replicas, TopicPartition
from kpo.domain.problems import Problem

#: A log dir a target names is offline on its broker (a failed disk): a condition reason, and the Event's.
LOG_DIR_OFFLINE = "LogDirOffline"
STORAGE_ERROR = "KAFKA_STORAGE_ERROR"


@dataclass(frozen=True)
class Target:
    replicas: Replicas
    log_dirs: tuple[str, ...] | None = None


Targets = Mapping[TopicPartition, Target]


#: Bytes of the rollback record (compact JSON) in its ConfigMap: 1 MiB holds every key of a ConfigMap, and a quarter
#: of it is left to the throttle journal kept next to it.
ROLLBACK_BUDGET_BYTES = 768 * 1024

#: The reason a partition that was moving a moment ago is not judged yet (see ``ClusterView.recently_moved``).
SETTLING = "Settling"


def current_replicas(tp: TopicPartition, view: ClusterView) -> Replicas:
    """The replicas ``tp`` has as far as its user is concerned: those before a move in progress (the adding replicas
    are not its own yet), else the replicas DescribeTopics lists."""
    ongoing = view.ongoing.get(tp)
    if ongoing is not None:
        return ongoing.original
    state = view.partitions.get(tp)
    return state.replicas if state is not None else ()


def changes_replication_factor(tp: TopicPartition, replicas: Replicas, view: ClusterView) -> bool:
    """Whether submitting ``replicas`` for ``tp`` changes its replication factor as Kafka's controller counts it for
    KIP-860 (``allowReplicationFactorChange``): against the target of a move in progress, else the replicas now."""
    ongoing = view.ongoing.get(tp)
    if ongoing is not None:
        return len(replicas) != len(ongoing.target)
    state = view.partitions.get(tp)
    return state is not None and len(replicas) != len(state.replicas)


def validate(targets: Targets, view: ClusterView, field_prefix: str = "spec.partitions", *,
             internal_topics: Collection[str], allow_rf_decrease: bool,
             originals: Mapping[TopicPartition, Replicas] | None = None) -> list[Problem]:
    """Check targets against the live cluster before anything is sent to Kafka.

    ``internal_topics`` are the topic names the spec may not touch (Kafka's internal topics, unless the spec allows
    them). Unless ``allow_rf_decrease``, a target with fewer replicas than the partition has now is refused — and
    than it had before this resource moved it (``originals``): an Incremental step holds an extra replica for a
    while, and going back to the factor a partition had is no decrease.
    """
    problems: list[Problem] = []
    live = sorted(view.brokers)
    for index, (tp, target) in enumerate(targets.items()):
        where = f"{field_prefix}[{index}]"
        if tp.topic in internal_topics:
            problems.append(Problem(f"{where}.topic", "InternalTopic",
                                    f"{tp.topic!r} is an internal Kafka topic: moving it needs "
                                    f"spec.allowInternalTopics: true"))
            continue
        if tp.topic not in view.topics:
            problems.append(Problem(f"{where}.topic", "UnknownTopic", f"topic {tp.topic!r} does not exist"))
            continue
        if tp not in view.partitions:
            count = sum(1 for p in view.partitions if p.topic == tp.topic)
            problems.append(Problem(f"{where}.partition", "UnknownPartition",
                                    f"topic {tp.topic!r} has no partition {tp.partition} (it has {count})"))
            continue
        replicas = target.replicas
        if not replicas:
            problems.append(Problem(f"{where}.replicas", "EmptyReplicas", f"{tp} needs at least one replica"))
            continue
        if len(set(replicas)) != len(replicas):
            problems.append(Problem(f"{where}.replicas", "DuplicateReplicas",
                                    f"{tp} lists a broker twice: {list(replicas)}"))
        unknown = [b for b in replicas if b not in view.brokers]
        if unknown:
            problems.append(Problem(f"{where}.replicas", "UnknownBroker",
                                    f"{tp}: broker(s) {unknown} are not live brokers of the cluster (live: {live})"))
        now = current_replicas(tp, view)
        before = (originals or {}).get(tp, now)
        if len(replicas) < min(len(now), len(before)) and not allow_rf_decrease and tp in view.recently_moved:
            problems.append(Problem(f"{where}.replicas", SETTLING,
                                    f"{tp} was moving a moment ago and reads {list(now)}: its replicas are read "
                                    f"again before the spec is judged"))
        elif len(replicas) < min(len(now), len(before)) and not allow_rf_decrease:
            problems.append(Problem(f"{where}.replicas", "ReplicationFactorDecrease",
                                    f"{tp}: {len(replicas)} replica(s) {list(replicas)} is fewer than the "
                                    f"{len(now)} it has now {list(now)}; decreasing the replication factor needs "
                                    f"spec.allowReplicationFactorDecrease: true"))
        min_isr = view.min_insync.get(tp.topic, 1)
        if len(replicas) < min_isr:
            problems.append(Problem(f"{where}.replicas", "BelowMinInsyncReplicas",
                                    f"{tp}: {len(replicas)} replica(s) is below the topic's min.insync.replicas="
                                    f"{min_isr}; producers with acks=all would be refused"))
        if target.log_dirs is not None:
            if len(target.log_dirs) != len(replicas):
                problems.append(Problem(f"{where}.logDirs", "LogDirsMismatch",
                                        f"{tp}: {len(target.log_dirs)} log dirs for {len(replicas)} replicas"))
            else:
                for broker, log_dir in zip(replicas, target.log_dirs, strict=True):
                    known = view.log_dirs.get(broker)
                    if log_dir != "any" and log_dir in view.offline_dirs.get(broker, ()):
                        problems.append(Problem(f"{where}.logDirs", LOG_DIR_OFFLINE,
                                                f"{tp}: broker {broker}'s log dir {log_dir!r} is offline (a failed "
                                                f"disk: KAFKA_STORAGE_ERROR); its online dirs are "
                                                f"{sorted(known or ())}"))
                    elif log_dir != "any" and known is not None and log_dir not in known:
                        problems.append(Problem(f"{where}.logDirs", "UnknownLogDir",
                                                f"{tp}: broker {broker} has no log dir {log_dir!r} "
                                                f"(it has {sorted(known)})"))
    if not problems:
        problems.extend(rollback_problems(targets, view))
    return problems


def settled(ongoing: Mapping[TopicPartition, OngoingReassignment], partitions: Mapping[TopicPartition, PartitionState]
            ) -> dict[TopicPartition, OngoingReassignment]:
    """The moves listed by ListPartitionReassignments, less those DescribeTopics, read *after* it, shows finished.

    While a move runs, Kafka's replica list for the partition is exactly the move's replicas (target plus removing).
    A partition DescribeTopics shows on the move's target alone (the replicas being removed gone) finished between
    the two reads: its entry is stale and is dropped, so the later read decides (at its target: completed).

    Any other difference keeps the entry: the list comes from the controller, DescribeTopics from a broker's metadata
    cache, which can lag (a broker just restarted showed a move started seconds before on its original replicas).
    Dropping such an entry freed the move's brokers for the scheduler while the move ran on: two moves on one broker
    under ``maxMovesPerBroker: 1`` (e2e, refill between polls after a broker restart). Kept, a move cancelled between
    the two reads counts as in flight for one more pass, which only holds a slot a moment longer.
    """
    return {tp: move for tp, move in ongoing.items()
            if tp in partitions and not _finished(move, set(partitions[tp].replicas))}


def _finished(move: OngoingReassignment, replicas: set[int]) -> bool:
    return replicas == set(move.target) != set(move.replicas)


@dataclass(frozen=True)
class Candidate:
    """A move that could start now: what the cluster-wide scheduler needs to know about it."""

    partition: TopicPartition
    current: Replicas
    target: Replicas  # what would be submitted: the final target, or the next incremental step
    size_bytes: int
    leader: int | None
    position: int  # index in the spec, for AsGiven
    write_rate: float = 0.0  # bytes/s written to the partition: a move must out-run it to catch up
    #: Brokers to copy a replica between their own log dirs (current == target): an intra-broker move.
    dir_brokers: frozenset[int] = frozenset()
    #: The log dir the spec names for each new replica of ``target`` (broker, dir): told to its broker just before
    #: the move, so the replica is created there rather than copied again afterwards.
    new_dirs: tuple[tuple[int, str], ...] = ()


class PartitionStatus(Enum):
    COMPLETED = "Completed"
    IN_FLIGHT = "InFlight"  # moving towards this CR's current target, started by kpo for this CR
    RETARGET = "Retarget"  # moving, started by kpo for this CR, but towards a target the spec no longer asks for
    PENDING = "Pending"  # not moving and not at its target yet
    LOG_DIRS = "LogDirs"  # on its target brokers, but some replica is not (yet) in the log dir the spec names
    EXTERNAL = "External"  # moving because someone else started it: never overridden
    # kpo's move is no longer listed, but DescribeTopics still shows its mid-move replicas (target plus removing): it
    # ended at the controller and the answering broker's metadata lags. Neither done nor to be sent again this tick.
    SETTLING = "Settling"


def offline_target_dir(tp: TopicPartition, target: Target, view: ClusterView) -> KafkaRefusal | None:
    """Why a replica of ``tp`` cannot get into the log dir its target names: that dir is offline on its broker (a
    failed disk; Kafka refuses AlterReplicaLogDirs into it with KAFKA_STORAGE_ERROR for as long as it is), or the
    replica itself sits in an offline dir (its broker reports one, and no online dir holds the replica: Kafka cannot
    read it, so a copy never starts, or one under way never ends). ``None``: every dir the partition still waits for
    is online, and so is every replica that must move."""
    for (_tp, broker), wanted in sorted(misplaced_dirs(tp, target, view).items()):
        offline = view.offline_dirs.get(broker, frozenset())
        now = view.replica_dirs.get((tp, broker))
        if wanted in offline:
            stays = f"; the replica stays in {now}" if now else ""
            return KafkaRefusal(STORAGE_ERROR, f"log dir {wanted} of broker {broker} is offline{stays}",
                                retriable=False)
        if now is None and offline and broker in view.log_dirs:
            dirs = ", ".join(sorted(offline))
            return KafkaRefusal(STORAGE_ERROR, f"the replica on broker {broker} is in an offline log dir ({dirs}): "
                                               f"Kafka cannot read it, so it cannot be copied to {wanted}",
                                retriable=False)
    return None


ReplicaDirs = Mapping[tuple[TopicPartition, int], str]


def dir_copies_to_cancel(targets: Mapping[TopicPartition, Target], future_dirs: ReplicaDirs,
                         replica_dirs: ReplicaDirs) -> dict[tuple[TopicPartition, int], str]:
    """The copies between log dirs under way towards a dir ``targets`` name, each with the dir its replica is in:
    AlterReplicaLogDirs to that dir cancels the copy (the broker drops the future replica; the replica stays)."""
    found: dict[tuple[TopicPartition, int], str] = {}
    for (tp, broker), future in future_dirs.items():
        target = targets.get(tp)
        if target is None or target.log_dirs is None:
            continue
        wanted = dict(zip(target.replicas, target.log_dirs, strict=False))
        if wanted.get(broker) == future and (current := replica_dirs.get((tp, broker))) is not None:
            found[(tp, broker)] = current
    return found


def new_replica_dirs(target: Target, step: Replicas, current: Replicas) -> tuple[tuple[int, str], ...]:
    """The dirs ``target`` names for the replicas ``step`` creates (brokers of ``step`` not in ``current``).

    kafka-reassign-partitions sends AlterReplicaLogDirs for such a replica before the reassignment: the broker
    answers that it has no such replica yet, and remembers the dir, in which it then creates the replica (Kafka's
    LogManager.maybeUpdatePreferredLogDir). Without it the broker picks a dir and kpo copies the replica again."""
    if target.log_dirs is None:
        return ()
    named = dict(zip(target.replicas, target.log_dirs, strict=False))
    return tuple((b, named[b]) for b in step if b not in current and named.get(b, "any") != "any")


def misplaced_dirs(tp: TopicPartition, target: Target, view: ClusterView) -> dict[tuple[TopicPartition, int], str]:
    """Replicas of ``tp`` not in the log dir the target names ("any" names none): replica -> wanted dir."""
    if target.log_dirs is None:
        return {}
    return {(tp, broker): wanted for broker, wanted in zip(target.replicas, target.log_dirs, strict=False)
            if wanted != "any" and view.replica_dirs.get((tp, broker)) != wanted}


@dataclass(frozen=True)
class Classification:
    status: dict[TopicPartition, PartitionStatus]
    # Moves kpo started for this CR whose partitions the spec no longer lists: cancel them (KIP-455).
    dropped: tuple[TopicPartition, ...] = ()
    # The moves this CR owns after adoption: partitions moving exactly to their target count as this CR's even when
    # the status write that recorded them was lost (a crash between submit and patch).
    owned: dict[TopicPartition, Replicas] = field(default_factory=dict)

    def of(self, kind: PartitionStatus) -> list[TopicPartition]:
        return [tp for tp, s in self.status.items() if s is kind]


def classify(targets: Targets, owned: Mapping[TopicPartition, Replicas], view: ClusterView, *,
             incremental: bool = False) -> Classification:
    """Place each targeted partition in one state, given what kpo started (``owned``) and what Kafka reports.

    With ``incremental`` moves, kpo's own move towards an intermediate step of the way to the target (KAFKA-6794)
    is progress, not a stale target.
    """
    status: dict[TopicPartition, PartitionStatus] = {}
    still_owned: dict[TopicPartition, Replicas] = {}
    for tp, target in targets.items():
        ongoing = view.ongoing.get(tp)
        if ongoing is not None:
            if ongoing.target == target.replicas:
                status[tp] = PartitionStatus.IN_FLIGHT
                still_owned[tp] = target.replicas
            elif tp in owned and owned[tp] == ongoing.target:
                # A step is still on the way if every replica it adds belongs to the (possibly changed) target.
                on_the_way = incremental and set(ongoing.adding) <= set(target.replicas)
                status[tp] = PartitionStatus.IN_FLIGHT if on_the_way else PartitionStatus.RETARGET
                still_owned[tp] = ongoing.target
            else:
                status[tp] = PartitionStatus.EXTERNAL
            continue
        current = view.partitions.get(tp)
        if current is not None and current.replicas == target.replicas:
            status[tp] = PartitionStatus.LOG_DIRS if misplaced_dirs(tp, target, view) else PartitionStatus.COMPLETED
        elif current is not None and tp in owned and set(current.replicas) > set(owned[tp]):
            # Only a reassignment gives a partition more replicas than kpo's move targets, and none is listed: the
            # move ended and the broker that answered DescribeTopics has not caught up. Sending it again was a no-op
            # resend of a finished move. Not kept in ``owned``: a view that still lags on the next tick sends it.
            status[tp] = PartitionStatus.SETTLING
        else:
            status[tp] = PartitionStatus.PENDING
    dropped = tuple(
        tp for tp, replicas in owned.items()
        if tp not in targets and tp in view.ongoing and view.ongoing[tp].target == replicas
    )
    for tp in dropped:
        still_owned[tp] = owned[tp]
    return Classification(status=status, dropped=dropped, owned=still_owned)


@dataclass(frozen=True)
class Progress:
    total: int
    completed: int
    in_flight: int
    pending: int
    failed: int
    bytes_to_move: int
    bytes_moved: int
    skipped: int = 0  # partitions a revert leaves alone (status.skipped): in the total, never counted as done

    @property
    def percent(self) -> int:
        if self.bytes_to_move > 0:
            return min(100, (100 * self.bytes_moved) // self.bytes_to_move)
        return 100 if self.total == 0 else (100 * self.completed) // self.total

    def eta_seconds(self, elapsed_seconds: float) -> int | None:
        if self.bytes_moved <= 0 or elapsed_seconds <= 0 or self.bytes_to_move <= self.bytes_moved:
            return None if self.bytes_to_move > self.bytes_moved else 0
        rate = self.bytes_moved / elapsed_seconds
        return int((self.bytes_to_move - self.bytes_moved) / rate)

    @property
    def summary(self) -> str:
        return f"{self.completed}/{self.total}"


def progress(targets: Targets, originals: Mapping[TopicPartition, Replicas], classification: Classification,
             failed: Sequence[TopicPartition], view: ClusterView) -> Progress:
    """Counts and bytes: a move copies the partition once to every replica its target adds to the original set."""
    failed_set = set(failed)
    completed = in_flight = pending = 0
    bytes_to_move = bytes_moved = 0
    for tp, target in targets.items():
        original = originals.get(tp) or (view.partitions[tp].replicas if tp in view.partitions else ())
        new_brokers = [b for b in target.replicas if b not in original]
        size = view.partition_size(tp)
        bytes_to_move += size * len(new_brokers)
        state = classification.status.get(tp, PartitionStatus.PENDING)
        if tp in failed_set:
            continue
        if state is PartitionStatus.COMPLETED:
            completed += 1
            bytes_moved += size * len(new_brokers)
        elif state in (PartitionStatus.IN_FLIGHT, PartitionStatus.RETARGET, PartitionStatus.SETTLING):
            in_flight += 1
            bytes_moved += sum(min(size, view.replica_sizes.get((tp, b), 0)) for b in new_brokers)
        elif state is PartitionStatus.LOG_DIRS:
            in_flight += 1
            bytes_moved += size * len(new_brokers)
        else:
            pending += 1
    return Progress(total=len(targets), completed=completed, in_flight=in_flight, pending=pending,
                    failed=len(failed_set & set(targets)), bytes_to_move=bytes_to_move, bytes_moved=bytes_moved)


def rollback_document(originals: Mapping[TopicPartition, Replicas]) -> dict[str, object]:
    """The original placement in kafka-reassign-partitions' JSON, usable with that tool as it is.

    Without ``log_dirs``: the tool reads a missing list as "any" in every position, and leaving out what says
    nothing keeps the record of 10,000 partitions inside one ConfigMap (see :data:`ROLLBACK_BUDGET_BYTES`).
    """
    return {
        "version": 1,
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
            for tp, replicas in sorted(originals.items())
        ],
    }


def rollback_json(originals: Mapping[TopicPartition, Replicas]) -> str:
    """:func:`rollback_document` as compact JSON: what the rollback ConfigMap stores."""
    return json.dumps(rollback_document(originals), separators=(",", ":"))


def rollback_problems(targets: Targets, view: ClusterView) -> list[Problem]:
    """A spec whose rollback record would not fit its ConfigMap cannot be carried out safely: refuse it up front.

    The record holds every partition's replicas from before the move, written before the move starts; a ConfigMap
    holds at most 1 MiB, shared with the throttle journal. The size is that of the current replicas, which is what
    would be recorded.
    """
    originals = {tp: view.partitions[tp].replicas for tp in targets if tp in view.partitions}
    size = len(rollback_json(originals))
    if size <= ROLLBACK_BUDGET_BYTES:
        return []
    most = len(originals) * ROLLBACK_BUDGET_BYTES // size
    return [Problem("spec.partitions", "RollbackTooLarge",
                    f"the rollback record of these {len(originals)} partitions (their current replicas, kept in the "
                    f"ConfigMap <name>-rollback) would take {size} bytes, more than the {ROLLBACK_BUDGET_BYTES} a "
                    f"ConfigMap leaves it; split the spec into PartitionReassignments of at most about {most} "
                    "partitions each")]


def parse_reassignment_document(doc: Mapping[str, object]) -> dict[TopicPartition, Replicas]:
    partitions = doc.get("partitions", [])
    assert isinstance(partitions, list)
    out: dict[TopicPartition, Replicas] = {}
    for entry in partitions:
        out[TopicPartition(str(entry["topic"]), int(entry["partition"]))] = tuple(int(r) for r in entry["replicas"])
    return out
