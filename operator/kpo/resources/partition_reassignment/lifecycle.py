"""The life cycle of a PartitionReassignment, written down as a small state machine.

kpo reconciles a PartitionReassignment on every tick (and whenever it changes) by calling :func:`decide` with what
the CR asks for (:class:`Intent`), what kpo remembers in the CR's status (:class:`Memory`) and what Kafka reports now
(:class:`Observation`). ``decide`` is pure: it returns the next phase and the actions to take — save original
replicas, submit moves, cancel moves — and the handler carries them out in that order. Kafka is the source of truth
for what is moving; the status only remembers which moves kpo started, so a restarted operator picks up exactly where
it was.

::

                     spec changed: back to Pending, validated again
        ┌──────────────────────────────────────────────────────────────────┐
        │                                                                  │
    ┌───┴─────┐  valid, no conflict  ┌───────────┐  all at target  ┌───────┴───┐
    │ Pending ├─────────────────────►│ Executing ├────────────────►│ Succeeded │
    └┬──┬──┬──┘                      └─┬───┬───┬─┘                 └───────────┘
     │  │  │ conflict: waits            │   │   │ Kafka refused a move: Failed (once nothing else runs)
     │  │  └─────────┐                  │   │   └──────────────────► Failed
     │  │ stop        ▼                 │   │ stop
     │  └─────────► Stopped ◄───Keep────┤ Stopping ◄──┘
     │ invalid                          │     └───Revert──► Reverting ──► Reverted
     │                                  ├─► Reverting (stop, onStop Revert, nothing in flight)
     ▼                                  │
    Invalid ◄───── spec changed to an invalid one
                                        │ paused         ┌────────┐  paused cleared: Executing's rules again
     Pending ── paused ────────────────►└───────────────►│ Paused ├──► Executing | Succeeded | Failed | Invalid
                                                          └───┬────┘
                                                              └── stop ──► Stopping | Stopped | Reverting

Phases, and what each transitions to:

- **Pending** — validates the spec against the live cluster and looks for conflicts. Transitions to *Invalid* (a
  problem, such as an unknown broker, an internal topic without ``allowInternalTopics`` or fewer replicas than the
  partition has without ``allowReplicationFactorDecrease``: nothing is sent to Kafka), stays *Pending* (a partition
  is claimed by an older live PartitionReassignment, or is moving because someone else started it: kpo waits and
  says who holds it; or the only problem is a topic that does not exist yet, waited for up to
  :data:`kpo.domain.topic_wait.TOPIC_GRACE` from the first look that missed it, reason *WaitingForTopic*, one
  Event, then *Invalid*), *Stopped* (``spec.stop`` before anything started), *Succeeded* (every partition already has
  its target: nothing to send), or *Executing* (original replicas saved to the rollback ConfigMap first, then the
  first moves submitted), or *Paused* (``spec.execution.paused``: validated, nothing started).
- **Executing** — each tick cancels moves of partitions dropped from the spec (KIP-455), re-targets moves whose
  target changed, and submits the pending moves the scheduler admits. Transitions to *Succeeded* (every partition at
  its target, nothing in flight), *Failed* (Kafka refused some move, and nothing else is left to run), *Stopping*
  (``spec.stop``), *Reverting* (``spec.stop`` with ``onStop: Revert`` when nothing of its own is in flight any
  more: there is nothing to cancel, so the way back starts at once), *Invalid* (the spec was changed to one that
  cannot be carried out; moves already running are left to finish, nothing new is sent), *Paused*
  (``spec.execution.paused``: checked after stop, which wins). A move copying to a broker that is down stays in
  flight (a move not started towards one is held back): the phase stays, with reason *BrokerUnavailable* naming the
  brokers and the moves.
- **Paused** — ``spec.execution.paused``: nothing is sent to Kafka (no new move, no re-target, no cancellation of a
  dropped partition); moves in flight run to their end and are followed, the throttle stays. Pending goes here
  instead of Executing when the spec is paused before anything started. Transitions to *Paused* (still paused: the
  message counts the moves in flight and those waiting), and, by Executing's rules once ``paused`` is cleared or
  ``stop`` is set, to *Executing* (the waiting moves start), *Succeeded* (all finished meanwhile), *Failed* (only
  refused moves left), *Invalid* (the changed spec cannot be carried out), *Stopping*, *Stopped* or *Reverting*
  (stop). A spec change of ``paused`` alone keeps the targets, so it neither re-targets nor cancels a move.
- **Stopping** — cancels every move this CR started that is still in flight, and every copy between log dirs
  towards a dir it names (the replica stays in its dir). Transitions to *Stopped* (``onStop: Keep``: completed
  partitions stay where they are) or *Reverting* (``onStop: Revert``) once nothing is in flight.
- **Reverting** — moves every partition back to the replicas it had before the CR started (KIP-236), from the
  rollback ConfigMap; partitions whose original replicas are all out of sync, or that would have to move back to a
  broker that is down, are skipped and reported (a partition already back on its original replicas is reverted,
  whatever their brokers' state). Transitions to *Reverted* (reason *PartiallyReverted* with the count when some
  were skipped), or *Failed* if Kafka refuses.
- **Stall detection** (Executing, Paused, Reverting; no phase of its own) — every move of this CR in flight keeps a
  clock (:mod:`kpo.domain.stall`): the bytes its new replicas held at the last look and since when they have not
  grown; it restarts when they grow and when a destination broker that was down comes back (its catch-up is not a
  stall). A move whose clock passes ``stall_after`` is stalled, in the decision of that very tick: flagged
  (``stalled``, condition Stalled=True, reason *MoveStalled*; Ready and Progressing keep the phase's reason), with
  one Warning Event when it stalls and a Normal *StallCleared* when it copies again or ends; with
  ``cancel_on_stall`` it is flagged the same way and cancelled, recorded as failed (code *MoveStalled*) and still
  reported (cancelled) while that failure stands, so the phase goes on and ends *Failed* with reason *MoveStalled*
  once nothing else runs.
- **Succeeded**, **Failed**, **Invalid**, **Stopped**, **Reverted** — terminal for this generation of the spec; a
  spec change sends the CR back to *Pending* (a *Stopped* CR whose ``stop`` is cleared resumes that way). While
  throttles it set are still on the cluster (a broker that is down cannot take its rates back), the phase stays but
  is not clean: ``Ready=False`` (the phase's reason), ``Progressing=True``, reason *ThrottleCleanupPending* naming
  what is left (``Stalled`` keeps the phase's: True with its reason for *Failed* and *Invalid*), until the
  reconciler has taken back every entity (no phase change: it is the cluster's throttles, not the partitions, that
  are not done).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kpo.api import INTERNAL_TOPICS, ReassignmentPhase
from kpo.domain import access
from kpo.domain import conditions as cond
from kpo.domain.conditions import ConditionUpdate, Event, check_transition, transition_event
from kpo.domain.incremental import kip455_submissions
from kpo.domain.model import ClusterView, KafkaRefusal, PartitionState, Replicas, TopicPartition
from kpo.domain.problems import Problem, summarize
from kpo.domain.reassignment import (
    LOG_DIR_OFFLINE,
    SETTLING,
    STORAGE_ERROR,
    Candidate,
    Classification,
    PartitionStatus,
    Target,
    Targets,
    classify,
    dir_copies_to_cancel,
    misplaced_dirs,
    new_replica_dirs,
    offline_target_dir,
    validate,
)
from kpo.domain.stall import (
    STALLED_CODE,
    Stall,
    Watch,
    copied_bytes,
    down_destinations,
    follow,
    lag_bytes,
    stalled,
)
from kpo.domain.topic_wait import WAITING_FOR_TOPIC, wait_for_topics

# The phases are the API's (status.phase): one enum, so the status can never name a phase the code does not know.
Phase = ReassignmentPhase

THROTTLE_CLEANUP_PENDING = "ThrottleCleanupPending"
BROKER_UNAVAILABLE = "BrokerUnavailable"
PAUSED = "Paused"
MOVE_STALLED = STALLED_CODE
STALL_CLEARED = "StallCleared"
TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.INVALID, Phase.STOPPED, Phase.REVERTED})
# Phases in which a CR claims its partitions: another CR wanting one of them must wait.
CLAIMING = frozenset({Phase.PENDING, Phase.PLANNING, Phase.PROPOSED, Phase.EXECUTING, Phase.PAUSED,
                      Phase.STOPPING, Phase.REVERTING})
# Phases whose moves in flight are watched for stalls (Stopping cancels them anyway; a terminal phase follows them).
WATCHING = frozenset({Phase.EXECUTING, Phase.PAUSED, Phase.REVERTING})

TRANSITIONS: Mapping[Phase, frozenset[Phase]] = {
    Phase.PENDING: frozenset({Phase.PENDING, Phase.INVALID, Phase.STOPPED, Phase.STOPPING, Phase.SUCCEEDED,
                              Phase.EXECUTING, Phase.PAUSED}),
    Phase.EXECUTING: frozenset({Phase.EXECUTING, Phase.SUCCEEDED, Phase.FAILED, Phase.STOPPING, Phase.REVERTING,
                                Phase.INVALID, Phase.PAUSED}),
    Phase.PAUSED: frozenset({Phase.PAUSED, Phase.EXECUTING, Phase.SUCCEEDED, Phase.FAILED, Phase.STOPPING,
                             Phase.STOPPED, Phase.REVERTING, Phase.INVALID}),
    Phase.STOPPING: frozenset({Phase.STOPPING, Phase.STOPPED, Phase.REVERTING}),
    Phase.REVERTING: frozenset({Phase.REVERTING, Phase.REVERTED, Phase.FAILED}),
    Phase.SUCCEEDED: frozenset({Phase.SUCCEEDED, Phase.PENDING}),
    Phase.FAILED: frozenset({Phase.FAILED, Phase.PENDING}),
    Phase.INVALID: frozenset({Phase.INVALID, Phase.PENDING}),
    Phase.STOPPED: frozenset({Phase.STOPPED, Phase.PENDING}),
    Phase.REVERTED: frozenset({Phase.REVERTED, Phase.PENDING}),
}


@dataclass(frozen=True)
class Intent:
    """What the CR's spec asks for, already parsed."""

    generation: int
    targets: dict[TopicPartition, Target]
    stop: bool = False
    revert_on_stop: bool = False
    # KAFKA-6794: one new replica at a time, each step submitted once the previous one is fully in sync.
    incremental: bool = False
    throttle: int | None = None
    #: Bytes/s for the replicas moving between the log dirs of one broker (None: no intra-broker throttle).
    log_dir_throttle: int | None = None
    elect_leaders_after: bool = False
    # Kafka's internal topics are off limits, and a shorter replica list is refused, unless the spec says otherwise.
    allow_internal_topics: bool = False
    allow_replication_factor_decrease: bool = False
    # spec.execution.paused: no new move starts, moves in flight run on.
    paused: bool = False
    # A move in flight whose new replicas do not grow for this long is stalled; cancelled with cancel_on_stall.
    stall_after: float = 600.0
    cancel_on_stall: bool = False
    # KIP-1066: brokers a RemoveBrokers plan drains, cordoned while it executes and after it succeeded.
    cordon: frozenset[int] = frozenset()
    # Brokers that must lead no partition of the plan's selection once it succeeded (DemoteBrokers' brokers, and
    # excludeLeaders with electLeadersAfter): the election takes every selected partition they lead, not only the
    # moved ones (:mod:`kpo.domain.leaders_away`).
    leaders_away: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Memory:
    """What kpo remembers in the CR's status (and its rollback ConfigMap)."""

    phase: Phase = Phase.PENDING
    observed_generation: int = 0
    owned: dict[TopicPartition, Replicas] = field(default_factory=dict)
    failures: dict[TopicPartition, KafkaRefusal] = field(default_factory=dict)
    originals: dict[TopicPartition, Replicas] = field(default_factory=dict)
    # The stall clock of each move in flight (status.inFlight), and the moves already reported stalled (in flight,
    # or cancelled for it: status.stalledMoves).
    watches: dict[TopicPartition, Watch] = field(default_factory=dict)
    stalled: Mapping[TopicPartition, Stall] = field(default_factory=dict)
    # When this generation's Pending first found a topic of the spec missing (status.topicMissingSince).
    topic_missing_since: dt.datetime | None = None


@dataclass(frozen=True)
class Observation:
    view: ClusterView
    # Partitions of this CR claimed by another live PartitionReassignment that goes first: partition -> its name.
    claimed_by_others: dict[TopicPartition, str] = field(default_factory=dict)
    # When the view was read: the clock of stall detection (None: no stall detection, as in a bare decision).
    now: dt.datetime | None = None


@dataclass(frozen=True)
class Conflict:
    partition: TopicPartition
    holder: str  # "namespace/name" of the other PartitionReassignment, or "external"


@dataclass(frozen=True)
class Decision:
    phase: Phase
    reason: str
    message: str
    save_originals: dict[TopicPartition, Replicas] = field(default_factory=dict)
    cancel: tuple[TopicPartition, ...] = ()
    submit: dict[TopicPartition, Replicas] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    skipped: dict[TopicPartition, str] = field(default_factory=dict)
    # Replicas to move between their broker's log dirs (AlterReplicaLogDirs): (partition, broker) -> dir.
    move_dirs: dict[tuple[TopicPartition, int], str] = field(default_factory=dict)
    # The targets this step worked towards: the spec's, or the original replicas while reverting.
    targets: Mapping[TopicPartition, Target] = field(default_factory=dict)
    classification: Classification | None = None
    events: tuple[Event, ...] = ()
    # Throttle entities that could not be taken back yet (a broker down), set by the reconciler after acting: a
    # terminal phase is then not clean — not Ready, still Progressing — until they are gone.
    cleanup_pending: str = ""
    # Brokers that moves of this step wait on because they are down (reason BrokerUnavailable).
    unavailable_brokers: tuple[int, ...] = ()
    # Stall detection: the clock of every move followed in flight, the stalled ones (reported, condition Stalled) and
    # the stalled moves cancelled under onStall Cancel, with the failure to record once the cancellation is accepted.
    watches: Mapping[TopicPartition, Watch] = field(default_factory=dict)
    stalled: Mapping[TopicPartition, Stall] = field(default_factory=dict)
    stall_message: str = ""
    give_up: Mapping[TopicPartition, KafkaRefusal] = field(default_factory=dict)
    # Partitions found unable to reach their target log dir this step (offline on its broker): failures to record.
    dir_failures: Mapping[TopicPartition, KafkaRefusal] = field(default_factory=dict)
    # Set while Pending waits for a missing topic (:mod:`kpo.domain.topic_wait`): when it was first missed.
    topic_missing_since: dt.datetime | None = None

    @property
    def conditions(self) -> list[ConditionUpdate]:
        if self.cleanup_pending and self.phase in TERMINAL:
            stalled = self.phase in (Phase.FAILED, Phase.INVALID)
            message = f"{self.message}; {self.cleanup_pending}"
            # Ready keeps the phase's own reason, so the outcome survives the cleanup (see reconciler.kept_outcome);
            # so does Stalled (True for Failed and Invalid, e.g. MoveStalled); Progressing: kpo is still at work.
            return [ConditionUpdate(cond.READY, False, self.reason, message),
                    ConditionUpdate(cond.PROGRESSING, True, THROTTLE_CLEANUP_PENDING, message),
                    ConditionUpdate(cond.STALLED, stalled, self.reason if stalled else THROTTLE_CLEANUP_PENDING,
                                    message)]
        ready = self.phase is Phase.SUCCEEDED
        progressing = self.phase in (Phase.PENDING, Phase.EXECUTING, Phase.STOPPING, Phase.REVERTING) and not (
            self.conflicts and self.phase is Phase.PENDING)
        stalled = self.phase in (Phase.FAILED, Phase.INVALID) or bool(self.conflicts and self.phase is Phase.PENDING)
        updates = cond.kstatus(ready=ready, progressing=progressing, stalled=stalled, reason=self.reason,
                               message=self.message)
        if self.stalled and self.phase not in TERMINAL:
            # Moves that copy nothing (flagged, or being or already cancelled under onStall Cancel): the user must
            # look (a broker to bring back, or stop), so Stalled says so with a reason of its own; Ready and
            # Progressing keep the phase's.
            updates[-1] = ConditionUpdate(cond.STALLED, True, MOVE_STALLED, self.stall_message)
        return updates


# Which candidates may start now: the cluster-wide scheduler's answer (limits, order, fair turns).
Admit = Callable[[Sequence[Candidate]], Sequence[TopicPartition]]


def admit_all(candidates: Sequence[Candidate]) -> Sequence[TopicPartition]:
    return [c.partition for c in candidates]


def next_submission(final: Replicas, state: PartitionState, incremental: bool) -> Replicas | None:
    """What to submit for a partition that is not moving: the target, or (incremental) the next step of the way —
    ``None`` while the previous step is not fully in sync yet."""
    if not incremental:
        return final
    if not set(state.replicas) <= set(state.isr):
        return None
    leader = state.leader if state.leader in state.replicas else None
    steps = kip455_submissions(state.replicas, final, leader)
    return steps[0] if steps else final


def decide(intent: Intent, memory: Memory, observed: Observation, admit: Admit = admit_all) -> Decision:
    phase = memory.phase
    if phase in TERMINAL and intent.generation != memory.observed_generation:
        phase = Phase.PENDING
    decision = _watch_stalls(intent, memory, observed, _HANDLERS[phase](intent, memory, observed, admit))
    check_transition(TRANSITIONS, phase, decision.phase)
    if decision.phase is not memory.phase:
        event = transition_event(memory.phase, decision.phase, decision.reason, decision.message,
                                 warning=decision.phase in (Phase.FAILED, Phase.INVALID))
        decision = _with(decision, events=(*decision.events, event))
    return decision


# --------------------------------------------------------------------------------------------------------- phases


def _pending(intent: Intent, memory: Memory, observed: Observation, admit: Admit) -> Decision:
    view = observed.view
    problems = _validate(intent, memory, view)
    if problems and not _judged(problems):
        # A partition that was moving a moment ago may still read as its mid-move union: judged on a later tick.
        return Decision(Phase.PENDING, SETTLING, summarize(problems))
    if problems:
        problems = _judged(problems)
        missing_since = memory.topic_missing_since if intent.generation == memory.observed_generation else None
        wait = wait_for_topics(problems, missing_since, observed.now)
        if wait is not None:
            # One Event when the wait starts: a phase change (a spec change from a terminal phase) makes its own.
            first = (wait.event,) if wait.starts and memory.phase is Phase.PENDING else ()
            return Decision(Phase.PENDING, WAITING_FOR_TOPIC, wait.message, problems=tuple(problems), events=first,
                            topic_missing_since=wait.since)
        return Decision(Phase.INVALID, problems[0].reason, summarize(problems),
                        problems=tuple(problems))
    if intent.stop:
        copies = dir_copies_to_cancel(intent.targets, view.future_dirs, view.replica_dirs)
        if _owned_in_flight(memory, view) or copies or (intent.revert_on_stop and memory.originals):
            return Decision(Phase.STOPPING, "Stopping", "spec.stop is set", cancel=_owned_in_flight(memory, view),
                            move_dirs=copies)
        return Decision(Phase.STOPPED, "Stopped", "spec.stop is set; nothing is moving")
    classification = classify(intent.targets, memory.owned, view, incremental=intent.incremental)
    conflicts = _conflicts(classification, observed, memory)
    if conflicts:
        holders = sorted({c.holder for c in conflicts})
        parts = ", ".join(str(c.partition) for c in conflicts[:5]) + ("…" if len(conflicts) > 5 else "")
        return Decision(Phase.PENDING, "Conflict",
                        f"waiting: partition(s) {parts} are held by {', '.join(holders)}",
                        conflicts=tuple(conflicts), classification=classification)
    if all(s is PartitionStatus.COMPLETED for s in classification.status.values()) and not classification.dropped:
        return Decision(Phase.SUCCEEDED, "Succeeded", "every partition already has its target replicas",
                        classification=classification)
    if intent.paused:
        return _hold(intent, classification)
    return _execute(Phase.EXECUTING, intent.targets, memory, observed, admit=admit, classification=classification,
                    incremental=intent.incremental)


def _executing(intent: Intent, memory: Memory, observed: Observation, admit: Admit) -> Decision:
    if intent.stop:
        return _stopping(intent, _with_memory(memory, phase=Phase.STOPPING), observed, admit)
    if intent.generation != memory.observed_generation:
        # Partitions still settling are not judged; _execute sends them nothing until they read right.
        problems = _judged(_validate(intent, memory, observed.view))
        if problems:
            return Decision(Phase.INVALID, problems[0].reason,
                            "the changed spec cannot be carried out (moves already running are left to finish): "
                            + summarize(problems), problems=tuple(problems))
    classification = classify(intent.targets, memory.owned, observed.view, incremental=intent.incremental)
    if intent.paused:
        return _hold(intent, classification)
    return _execute(Phase.EXECUTING, intent.targets, memory, observed, admit=admit, classification=classification,
                    incremental=intent.incremental)


def _paused(intent: Intent, memory: Memory, observed: Observation, admit: Admit) -> Decision:
    # Cleared (or stop set): Executing's rules take over, from validation of the changed spec to the next moves.
    return _executing(intent, memory, observed, admit)


def _hold(intent: Intent, classification: Classification) -> Decision:
    """Paused: nothing is sent to Kafka — no new move, no re-target, no cancellation; moves in flight run on (Kafka
    carries them out) and are followed, and the throttles stay for them."""
    in_flight = len(classification.owned)
    done = len(classification.of(PartitionStatus.COMPLETED))
    waiting = sum(1 for tp, s in classification.status.items() if s is not PartitionStatus.COMPLETED
                  and tp not in classification.owned)
    return Decision(Phase.PAUSED, PAUSED,
                    f"spec.execution.paused is set: no new moves start; {in_flight} move(s) in flight run to the end; "
                    f"{done}/{len(intent.targets)} partitions done, {waiting} waiting",
                    classification=classification, targets=intent.targets)


DirMoves = dict[tuple[TopicPartition, int], str]


def _dir_work(classification: Classification, targets: Targets, view: ClusterView, failed: Collection[TopicPartition]
              ) -> tuple[dict[TopicPartition, KafkaRefusal], dict[TopicPartition, DirMoves], set[TopicPartition]]:
    """The partitions whose replicas sit on their brokers in other log dirs than the spec names: those that cannot
    get there, the dir moves each of the others needs, and those some broker already copies between its dirs.

    A replica whose target dir is offline on its broker (a failed disk) cannot get there: failed, naming the dir, not
    asked again until the spec changes (Kafka would refuse it with KAFKA_STORAGE_ERROR, a retriable code, on every
    tick for as long as the disk is out)."""
    lost = {tp: refusal for tp in classification.of(PartitionStatus.LOG_DIRS) if tp not in failed
            if (refusal := offline_target_dir(tp, targets[tp], view)) is not None}
    misplaced = {tp: found for tp in classification.of(PartitionStatus.LOG_DIRS) if tp not in failed and tp not in lost
                 if (found := misplaced_dirs(tp, targets[tp], view))}
    copying = {tp for tp, found in misplaced.items() if any(key in view.future_dirs for key in found)}
    return lost, misplaced, copying


def _dir_candidates(misplaced: Mapping[TopicPartition, DirMoves], view: ClusterView,
                    position: Mapping[TopicPartition, int], *, skip: Collection[TopicPartition]) -> list[Candidate]:
    """Replicas on their brokers but not in the log dirs the spec names: intra-broker moves, admitted like the others
    (they count against the limits, their brokers busy). A partition some broker already copies between dirs holds
    its slot (``skip``): the rest of its replicas' dir moves go with it, unasked."""
    found = []
    for tp, keys in misplaced.items():
        state = view.partitions.get(tp)
        if tp in skip or state is None:
            continue
        found.append(Candidate(tp, state.replicas, state.replicas, view.partition_size(tp), state.leader,
                               position[tp], dir_brokers=frozenset(broker for _tp, broker in keys)))
    return found


def _execute(phase: Phase, targets: Targets, memory: Memory, observed: Observation, *, admit: Admit,
             classification: Classification, incremental: bool = False,
             skipped: Mapping[TopicPartition, str] | None = None) -> Decision:
    """One step of carrying out ``targets``: the shared core of Executing and Reverting."""
    view = observed.view
    conflicts = _conflicts(classification, observed, memory)
    blocked = {c.partition for c in conflicts}
    failed = {tp for tp in memory.failures if tp in targets}
    retarget: dict[TopicPartition, Replicas] = {}
    cancel = list(classification.dropped)
    for tp in classification.of(PartitionStatus.RETARGET):
        ongoing = view.ongoing[tp]
        if not set(ongoing.adding) <= set(targets[tp].replicas):
            # The move is copying to a replica the new target does not want. Re-targeting in place would keep it as
            # a "removing" replica until the new move completes (copying all the while): cancel now (KIP-455: back
            # to the original replicas, the unwanted one deleted) and start afresh on the next tick (KIP-236).
            cancel.append(tp)
            continue
        steps = kip455_submissions(ongoing.original, targets[tp].replicas) if incremental else []
        retarget[tp] = steps[0] if steps else targets[tp].replicas
    pending = [tp for tp in classification.of(PartitionStatus.PENDING) if tp not in blocked and tp not in failed]
    in_flight = {tp: r for tp, r in classification.owned.items() if tp not in classification.dropped}
    # Moves that cannot finish while a broker they copy to is down: in flight (Kafka keeps them until the broker is
    # back and in sync) or not started (held back: submitting would only add one more stuck move). A move in flight
    # also waits on a broker Kafka still lists but that does not answer; a new move is held back only for a broker
    # Kafka does not list: one just restarted can take a request timeout to answer, and Kafka takes the move anyway.
    waiting = {tp: down for tp in in_flight if tp in view.ongoing
               if (down := tuple(b for b in view.ongoing[tp].adding if not view.available(b)))}
    position = {tp: i for i, tp in enumerate(targets)}
    candidates = []
    for tp in pending:
        state = view.partitions.get(tp)
        if state is None:
            continue  # the topic went away mid-flight; validation of the next spec change will say so
        step = next_submission(targets[tp].replicas, state, incremental)
        if step is not None and tp in view.recently_moved and len(state.replicas) > len(step):
            continue  # may be a mid-move union a lagging broker still shows: sent once it reads as it is
        if step is not None and (down := tuple(b for b in step if b not in state.replicas and b not in view.brokers)):
            waiting[tp] = down
        elif step is not None:
            candidates.append(Candidate(tp, state.replicas, step, view.partition_size(tp), state.leader,
                                        position[tp], view.write_rates.get(tp, 0.0),
                                        new_dirs=new_replica_dirs(targets[tp], step, state.replicas)))
    lost_dirs, misplaced, copying = _dir_work(classification, targets, view, failed)
    failed |= set(lost_dirs)
    candidates += _dir_candidates(misplaced, view, position, skip=copying | blocked)
    by_partition = {c.partition: c for c in candidates}
    admitted = [tp for tp in admit(candidates) if tp in by_partition]
    submit = {**retarget, **{tp: by_partition[tp].target for tp in admitted if not by_partition[tp].dir_brokers}}
    # Ask the brokers to move them (once per dir move).
    move_dirs = {key: wanted for tp in sorted(copying | {tp for tp in admitted if by_partition[tp].dir_brokers})
                 for key, wanted in misplaced[tp].items() if view.future_dirs.get(key) != wanted}
    # Original replicas are written down before the first move of a partition is sent, never overwritten afterwards.
    save = {tp: observed.view.partitions[tp].replicas for tp in submit
            if tp not in memory.originals and tp in observed.view.partitions}
    done = all(s is PartitionStatus.COMPLETED for tp, s in classification.status.items() if tp not in failed)
    running = bool(in_flight or submit or cancel or pending or blocked or misplaced)
    base = Decision(phase, "", "", save_originals=save, cancel=tuple(sorted(cancel)), submit=submit,
                    move_dirs=move_dirs, conflicts=tuple(conflicts), classification=classification,
                    skipped=dict(skipped or {}), targets=targets, dir_failures=lost_dirs)
    final = Phase.REVERTED if phase is Phase.REVERTING else Phase.SUCCEEDED
    if done and not running and not failed:
        if final is Phase.REVERTED and skipped:
            return _with(base, phase=final, reason="PartiallyReverted",
                         message=f"{len(targets)} of {len(targets) + len(skipped)} partition(s) reverted to their "
                                 f"original replicas; {len(skipped)} skipped (status.skipped): {_first(skipped)}")
        verb = "reverted to its original replicas" if final is Phase.REVERTED else "has its target replicas"
        return _with(base, phase=final, reason=final.value, message=f"every partition {verb}")
    if failed and not running:
        failures = {**memory.failures, **lost_dirs}
        worst = sorted(failed)[:3]
        detail = "; ".join(f"{tp}: {failures[tp]}" for tp in worst)
        if all(failures[tp].code == STORAGE_ERROR for tp in failed):
            return _with(base, phase=Phase.FAILED, reason=LOG_DIR_OFFLINE,
                         message=f"{len(failed)} of {len(targets)} partition(s) cannot reach the log dir their "
                                 f"target names, offline on its broker (a failed disk): {detail}")
        if all(failures[tp].code == STALLED_CODE for tp in failed):
            return _with(base, phase=Phase.FAILED, reason=MOVE_STALLED,
                         message=f"{len(failed)} of {len(targets)} partition move(s) stalled and were cancelled "
                                 f"(execution.onStall Cancel): {detail}")
        return _with(base, phase=Phase.FAILED, reason=access.refusal_reason(failures[tp] for tp in failed),
                     message=f"Kafka refused {len(failed)} of {len(targets)} partition move(s): {detail}")
    moving = len(in_flight) + len(submit) - len(retarget) + len(classification.of(PartitionStatus.SETTLING))
    return _running(base, moving=moving, skipped=len(skipped or {}), failed=len(failed), waiting=waiting,
                    in_flight=in_flight)


def _running(base: Decision, *, moving: int, skipped: int, failed: int,
             waiting: Mapping[TopicPartition, tuple[int, ...]], in_flight: Mapping[TopicPartition, Replicas]
             ) -> Decision:
    """The decision while moves still run: counts, and which moves wait on a broker that is down."""
    classification = base.classification
    assert classification is not None
    counts = f"{len(classification.of(PartitionStatus.COMPLETED))}/{len(base.targets) + skipped} " \
             f"partitions done, {moving} moving"
    if skipped:
        counts += f", {skipped} skipped"
    if base.conflicts:
        counts += f", {len(base.conflicts)} waiting for other holders"
    if failed:
        counts += f", {failed} refused by Kafka"
    if waiting:
        down = sorted({b for brokers in waiting.values() for b in brokers})
        detail = ", ".join(f"{tp} ({'in flight' if tp in in_flight else 'not started'})" for tp in sorted(waiting)[:5])
        more = f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
        return _with(base, reason=BROKER_UNAVAILABLE, unavailable_brokers=tuple(down),
                     message=f"{broker_unavailable_headline(down)}: {len(waiting)} move(s) wait on it: "
                             f"{detail}{more}; {counts}")
    return _with(base, reason="Reverting" if base.phase is Phase.REVERTING else "Executing", message=counts)


def _stopping(intent: Intent, memory: Memory, observed: Observation, admit: Admit) -> Decision:
    view = observed.view
    mine = _owned_in_flight(memory, view)
    # Reverting never cancels a move whose original replicas are all out of sync: the partition would be left with
    # no in-sync replica. Such a move runs on and is reported as skipped (KIP-236).
    unsafe = {tp: reason for tp in mine if (reason := _unsafe_to_cancel(tp, view))} if intent.revert_on_stop else {}
    to_cancel = tuple(tp for tp in mine if tp not in unsafe)
    # Copies between log dirs stop too (the replica stays where it is): a stopped resource takes its intra-broker
    # throttle back, and a copy left running would go on unthrottled.
    copies = dir_copies_to_cancel(intent.targets, view.future_dirs, view.replica_dirs)
    if to_cancel or copies:
        also = f" and {len(copies)} cop(ies) between log dirs" if copies else ""
        return Decision(Phase.STOPPING, "Stopping", f"cancelling {len(to_cancel)} move(s) in flight (KIP-455){also}",
                        cancel=to_cancel, skipped=unsafe, move_dirs=copies)
    if intent.revert_on_stop and memory.phase is Phase.STOPPING:
        # Start reverting at once; the next tick, in Reverting, reports Reverted or Failed.
        reverting = _with_memory(memory, phase=Phase.REVERTING, owned={}, failures={})
        return _with(_reverting(intent, reverting, observed, admit), phase=Phase.REVERTING)
    return Decision(Phase.STOPPED, "Stopped", "moves in flight were cancelled; completed partitions stay")


def _reverting(intent: Intent, memory: Memory, observed: Observation, admit: Admit) -> Decision:
    view = observed.view
    targets: dict[TopicPartition, Target] = {}
    skipped: dict[TopicPartition, str] = {}
    for tp, original in memory.originals.items():
        state = view.partitions.get(tp)
        offline = [b for b in original if b not in view.brokers]
        in_flight = tp in view.ongoing and view.ongoing[tp].target != original
        if state is None:
            skipped[tp] = "the partition no longer exists"
        elif state.replicas == original and tp not in view.ongoing:
            # Already back (a cancelled move returns to its original replicas): reverted, even with one of them down.
            targets[tp] = Target(original)
        elif in_flight and (reason := _unsafe_to_cancel(tp, view)):
            skipped[tp] = reason
        elif offline:
            skipped[tp] = f"original replica broker(s) {offline} are not live: the move back could not complete"
        else:
            targets[tp] = Target(original)
    classification = classify(targets, memory.owned, view, incremental=intent.incremental)
    return _execute(Phase.REVERTING, targets, memory, observed, admit=admit, classification=classification,
                    incremental=intent.incremental, skipped=skipped)


def _terminal(intent: Intent, memory: Memory, observed: Observation, admit: Admit) -> Decision:
    return Decision(memory.phase, memory.phase.value, f"{memory.phase.value.lower()} (no change since)")


_HANDLERS: Mapping[Phase, Callable[[Intent, Memory, Observation, Admit], Decision]] = {
    Phase.PENDING: _pending,
    Phase.EXECUTING: _executing,
    Phase.PAUSED: _paused,
    Phase.STOPPING: _stopping,
    Phase.REVERTING: _reverting,
    Phase.SUCCEEDED: _terminal,
    Phase.FAILED: _terminal,
    Phase.INVALID: _terminal,
    Phase.STOPPED: _terminal,
    Phase.REVERTED: _terminal,
}


# ------------------------------------------------------------------------------------------------ stall detection


def _watch_stalls(intent: Intent, memory: Memory, observed: Observation, decision: Decision) -> Decision:
    """Follow the byte progress of the moves in flight (see :mod:`kpo.domain.stall`): flag those that copied nothing
    for ``stall_after`` seconds, with one Event when a move stalls (and one when it copies again), and cancel them
    under onStall Cancel — flagged in this same decision (condition Stalled, ``stalled``), so the tick that decides a
    stall reports it. A move re-targeted or cancelled by this very decision is not followed: its clock restarts
    with its next submission. Moves cancelled for a stall stay reported while their failure stands."""
    now = observed.now
    if now is None:
        return decision
    watching = decision.phase in WATCHING
    view = observed.view
    owned = decision.classification.owned if decision.classification is not None else memory.owned
    moving = {tp for tp, replicas in owned.items() if tp in view.ongoing and view.ongoing[tp].target == replicas
              and tp not in decision.submit and tp not in decision.cancel} if watching else set()
    watches = follow(memory.watches, {tp: copied_bytes(view, tp) for tp in moving}, now,
                     {tp: down_destinations(view, tp) for tp in moving}, {tp: lag_bytes(view, tp) for tp in moving})
    stalls = stalled(watches, view, now, intent.stall_after)
    # Cancelled for a stall (onStall Cancel, accepted): reported until a new run clears the partition's failure.
    cancelled = {tp: s for tp, s in memory.stalled.items() if s.cancelled and tp not in stalls
                 and tp in memory.failures and memory.failures[tp].code == STALLED_CODE}
    events = list(decision.events)
    # A stalled move that copies again, ended (the phase may have moved on: Succeeded) or was cancelled (Stopping).
    cleared = sorted(tp for tp, s in memory.stalled.items() if not s.cancelled and tp not in stalls)
    if cleared:
        events.append(Event("Normal", STALL_CLEARED, f"{len(cleared)} move(s) no longer stalled (copying again, "
                                                     f"ended or cancelled): {', '.join(map(str, cleared[:10]))}"))
    if not watching:
        return _with(decision, events=tuple(events), stalled=cancelled, stall_message=_stall_message(
            intent, {}, cancelled, now))
    new = [tp for tp in stalls if tp not in memory.stalled]
    listed = "; ".join(stalls[tp].describe(tp, now) for tp in new[:5])
    listed += _behind_hint(intent, [stalls[tp] for tp in new])
    give_up: dict[TopicPartition, KafkaRefusal] = {}
    if intent.cancel_on_stall and stalls:
        give_up = {tp: KafkaRefusal(STALLED_CODE, f"no progress for {int(intent.stall_after)}s or more "
                                                  f"({stall.describe(tp, now)}): cancelled (execution.onStall Cancel)")
                   for tp, stall in stalls.items()}
        if new:
            events.append(Event("Warning", MOVE_STALLED, f"{len(new)} move(s) made no progress for "
                                                         f"{int(intent.stall_after)}s or more, cancelling "
                                                         f"(execution.onStall Cancel): {listed}"))
    elif new:
        events.append(Event("Warning", MOVE_STALLED, f"{len(new)} move(s) stalled (execution.onStall Report: left "
                                                     f"running): {listed}"))
    return _with(decision, watches=watches, stalled={**cancelled, **stalls}, events=tuple(events), give_up=give_up,
                 cancel=tuple(sorted({*decision.cancel, *give_up})),
                 stall_message=_stall_message(intent, stalls, cancelled, now))


def _stall_message(intent: Intent, stalls: Mapping[TopicPartition, Stall],
                   cancelled: Mapping[TopicPartition, Stall], now: dt.datetime) -> str:
    """The Stalled condition's message: the moves stalled now (and what onStall does), then those cancelled before."""
    parts = []
    for found, headline in (
            (stalls, f"made no progress for {int(intent.stall_after)}s or more"
                     + (", cancelling (execution.onStall Cancel)" if intent.cancel_on_stall else "")),
            (cancelled, "stalled and were cancelled (execution.onStall Cancel)")):
        if found:
            details = "; ".join(s.describe(tp, now) for tp, s in list(found.items())[:5])
            more = f" and {len(found) - 5} more" if len(found) > 5 else ""
            parts.append(f"{len(found)} move(s) {headline}: {details}{more}")
    return "; ".join(parts) + _behind_hint(intent, [*stalls.values(), *cancelled.values()])


def _behind_hint(intent: Intent, stalls: list[Stall]) -> str:
    """What to do about moves that copy but do not catch up: under kpo's throttle the remedy is a higher rate (Kafka
    lets a follower copy no faster than it, and the partition's writes must be outrun); without one, the write rate
    outruns what the destination brokers fetch."""
    if not any(s.behind is not None for s in stalls):
        return ""
    if intent.throttle:
        return (f". A copy must outrun the partition's writes: raise execution.throttle ({intent.throttle} B/s now) "
                f"above their write rate")
    return ". A copy must outrun the partition's writes: its destination brokers fetch slower than it takes writes"


# -------------------------------------------------------------------------------------------------------- helpers


def _judged(problems: list[Problem]) -> list[Problem]:
    """The problems that can be judged now: not those of partitions still settling after a move."""
    return [p for p in problems if p.reason != SETTLING]


def _validate(intent: Intent, memory: Memory, view: ClusterView) -> list[Problem]:
    return validate(intent.targets, view, internal_topics=() if intent.allow_internal_topics else INTERNAL_TOPICS,
                    allow_rf_decrease=intent.allow_replication_factor_decrease, originals=memory.originals)


def _conflicts(classification: Classification, observed: Observation, memory: Memory) -> list[Conflict]:
    # A move started by another PartitionReassignment is reported with that resource's name, not as "external".
    found = [Conflict(tp, "external") for tp in classification.of(PartitionStatus.EXTERNAL)
             if tp not in observed.claimed_by_others]
    found += [Conflict(tp, holder) for tp, holder in observed.claimed_by_others.items()
              if tp in classification.status and tp not in memory.owned
              and classification.status[tp] is not PartitionStatus.COMPLETED]
    return sorted(found, key=lambda c: c.partition)


def _unsafe_to_cancel(tp: TopicPartition, view: ClusterView) -> str | None:
    ongoing, state = view.ongoing.get(tp), view.partitions.get(tp)
    if ongoing is None or state is None or set(ongoing.original) & set(state.isr):
        return None
    return (f"all original replicas {list(ongoing.original)} are out of sync (ISR {list(state.isr)}): cancelling "
            f"the move would leave no in-sync replica, so it runs on")


def _owned_in_flight(memory: Memory, view: ClusterView) -> tuple[TopicPartition, ...]:
    return tuple(tp for tp, replicas in memory.owned.items()
                 if tp in view.ongoing and view.ongoing[tp].target == replicas)


def broker_unavailable_headline(brokers: Sequence[int]) -> str:
    """The start of a BrokerUnavailable message: the same for as long as the same brokers are down."""
    return f"broker(s) {sorted(brokers)} not available"


def _first(skipped: Mapping[TopicPartition, str]) -> str:
    tp = min(skipped)
    return f"{tp}: {skipped[tp]}" + (f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else "")


def _with(decision: Decision, **changes: object) -> Decision:
    return replace(decision, **changes)  # type: ignore[arg-type]


def _with_memory(memory: Memory, **changes: object) -> Memory:
    return replace(memory, **changes)  # type: ignore[arg-type]
