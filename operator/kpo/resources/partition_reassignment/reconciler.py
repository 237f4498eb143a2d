"""One reconciliation tick of a PartitionReassignment: observe Kafka, decide, act, report.

This is the I/O shell around the pure :func:`lifecycle.decide`. It reads the cluster through the
:class:`~kpo.kafka.admin.KafkaAdmin` Protocol and the rollback ConfigMap, carries the decision out in a safe order
(original replicas saved before any move is sent, cancellations before submissions), and returns the status to write
and the Events to post. It knows nothing of Kopf, so handlers stay a thin layer.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kpo.domain import access
from kpo.domain import conditions as cond
from kpo.domain.clock import utcnow
from kpo.domain.conditions import Event
from kpo.domain.cordon import CordonJournal, CordonState
from kpo.domain.leaders_away import ELECTION_NOT_NEEDED, LeadersAway, leaders_away
from kpo.domain.model import ClusterView, KafkaRefusal, LogDirReport, PartitionState, Replicas, TopicPartition
from kpo.domain.reassignment import (
    LOG_DIR_OFFLINE,
    Candidate,
    PartitionStatus,
    Target,
    changes_replication_factor,
    dir_copies_to_cancel,
    misplaced_dirs,
    settled,
)
from kpo.domain.refill import Work, remaining_bytes
from kpo.domain.throttle import CLEANUP_PENDING_PREFIX, ThrottleJournal, ThrottlePlan, describe_pending
from kpo.domain.throttle import plan as throttle_plan
from kpo.execution.observation import Look
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable
from kpo.resources.outcomes import KAFKA_UNAVAILABLE, Inputs, Outcome, RetryLater, unavailable_outcome
from kpo.resources.partition_reassignment import cordoning
from kpo.resources.partition_reassignment.lifecycle import (
    BROKER_UNAVAILABLE,
    TERMINAL,
    THROTTLE_CLEANUP_PENDING,
    Decision,
    Intent,
    Memory,
    Observation,
    Phase,
    broker_unavailable_headline,
    decide,
)
from kpo.resources.partition_reassignment.status import (
    REPORTED_PARTITIONS,
    LeaderElection,
    condition_of,
    cordon_of,
    held_of,
    skipped_of,
    status_of,
)

log = logging.getLogger(__name__)

#: The phases whose passes start moves.
_STARTING = frozenset({Phase.EXECUTING, Phase.REVERTING})

#: The Event naming selected partitions still led by a broker that should lead nothing after the election.
STILL_LEADING = "StillLeading"

# Memory.failures are cleared when a new run starts: back in Pending (a new spec) or when reverting begins.
_FRESH_START = frozenset({Phase.PENDING, Phase.REVERTING})


def observe(kafka: KafkaAdmin, look: Callable[[Collection[str]], Look], partitions: set[TopicPartition], *,
            with_configs: bool) -> ClusterView:
    """The slice of the cluster one tick needs: the cluster's shared look (taken after the tick began), sliced.

    The look reads what is moving (ListPartitionReassignments) *before* where the replicas are (DescribeTopics). The
    other way round, a move that completed between the two reads looked like a partition on its mid-move replicas
    with nothing moving — pending, so it was submitted again. In this order, a move that completes between the reads
    is still listed as moving, and DescribeTopics shows it at its target: :func:`settled` drops such a stale entry,
    and even kept it only makes the partition count as in flight for one more tick; a partition is never taken for
    pending while its move runs or after it ended. The reverse race, a move starting between the reads, matters
    where the tick validates the spec against the partition's replicas: there the moves are listed once more.

    Topics the look's metadata does not list are asked for by name, from this tick: metadata lists only the topics
    the principal may describe (so a missing ACL reads as NotAuthorized, not as "topic does not exist"), and a topic
    created a moment ago may not be listed yet.
    """
    topics = {tp.topic for tp in partitions}
    seen = look(topics)
    listed = topics & seen.topic_names
    unlisted = topics - seen.topic_names
    found = kafka.describe_topics(unlisted) if unlisted else {}
    late = {tp.topic for tp in found}
    present = listed | late
    ongoing = {tp: o for tp in partitions if tp.topic in listed and (o := seen.ongoing.get(tp)) is not None}
    states = seen.partition_states(listed)
    dirs = seen.log_dirs(listed)
    if late:
        # Metadata has not caught up with topics created a moment ago: those are read here, as a look would.
        ongoing.update(kafka.list_reassignments([tp for tp in partitions if tp.topic in late]))
        states.update(found)
        more = kafka.log_dirs(late, seen.brokers)
        dirs = LogDirReport(sizes={**dirs.sizes, **more.sizes}, broker_dirs={**dirs.broker_dirs, **more.broker_dirs},
                            replica_dirs={**dirs.replica_dirs, **more.replica_dirs},
                            future_dirs={**dirs.future_dirs, **more.future_dirs},
                            unreachable=dirs.unreachable | more.unreachable,
                            offline_dirs={**dirs.offline_dirs, **more.offline_dirs},
                            future_sizes={**dirs.future_sizes, **more.future_sizes})
    if with_configs:
        # Validation judges the replicas a partition has now. A move someone else starts between the two reads shows
        # in DescribeTopics as its mid-move union with nothing listed as moving: RF 1 moving [1] -> [2] reads [2, 1],
        # and a target of one replica looked like a replication factor decrease (Invalid, for good; it failed a CI
        # run). So a validating tick reads its own partitions itself, the three reads close together: what moves,
        # where the replicas are, and what moves once more, which catches such a move (its original replicas count).
        # The shared look's reads lie further apart (another tick may have taken it a while ago): a small move that
        # started after its listing could end before this tick's second listing, leaving the union unexplained.
        mine = [tp for tp in partitions if tp.topic in present]
        ongoing = kafka.list_reassignments(mine) if mine else {}
        states = kafka.describe_topics(present)
        quiet = [tp for tp in mine if tp not in ongoing]
        ongoing = {**ongoing, **kafka.list_reassignments(quiet)} if quiet else ongoing
    ongoing = settled(ongoing, states)
    min_insync: dict[str, int] = {}
    if with_configs and present:
        configs = kafka.topic_configs(present, ["min.insync.replicas"])
        min_insync = {t: int(c.get("min.insync.replicas", "1")) for t, c in configs.items()}
    return ClusterView(brokers=seen.brokers, partitions=states, ongoing=ongoing, replica_sizes=dirs.sizes,
                       min_insync=min_insync, log_dirs=dirs.broker_dirs, topics=seen.topic_names | late,
                       replica_dirs=dirs.replica_dirs, future_dirs=dirs.future_dirs, unreachable=dirs.unreachable,
                       offline_dirs=dirs.offline_dirs, future_sizes=dirs.future_sizes,
                       # The shared look may predate this tick's own reads: a move it still lists that they no
                       # longer do ended in between, and a broker whose metadata lags may still show its mid-move
                       # union (a CI run read [2, 1] for a move [1] -> [2] that had ended: Invalid, for good).
                       recently_moved=frozenset(tp for tp in partitions if tp not in ongoing
                                                and (tp in seen.recently_moved or tp in seen.ongoing)))


def _key(body: Mapping[str, Any]) -> str:
    meta = body.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


@dataclass(frozen=True)
class Ports:
    """Everything a tick reads and writes besides the CR itself, handed in by the Kopf wiring.

    Reads of the cluster come from its shared look (``look``) and, for what a look does not read, ``kafka``; every
    write to Kafka that concerns moves and throttles goes through the cluster's executor (``send``, ``elect``,
    ``ensure_throttle``, ``remove_throttle``), never through ``kafka``.
    """

    kafka: KafkaAdmin
    look: Callable[[Collection[str]], Look]
    send: Callable[[Mapping[TopicPartition, Replicas | None], bool], dict[TopicPartition, KafkaRefusal | None]]
    elect: Callable[[Sequence[TopicPartition]], dict[TopicPartition, KafkaRefusal | None]]
    #: The throttle these moves need (:func:`kpo.domain.throttle.plan`), given the journal so far and the live
    #: brokers; returns the journal (saved before anything is applied).
    ensure_throttle: Callable[[ThrottlePlan, ThrottleJournal, Collection[int]], ThrottleJournal]
    #: Take back what the journal holds (and no one else needs); returns what is left.
    remove_throttle: Callable[[ThrottleJournal, Collection[int] | None], ThrottleJournal]
    save_originals: Callable[[Mapping[TopicPartition, Replicas]], str]
    load_throttle: Callable[[], ThrottleJournal]
    claimed_by_others: Callable[[], dict[TopicPartition, str]]
    schedule: Callable[[Sequence[Candidate], ClusterView], Sequence[TopicPartition]]
    write_rates: Callable[[Collection[TopicPartition]], dict[TopicPartition, float]] = lambda _partitions: {}
    #: The tick ended: moves admitted but not sent are free for others again.
    settle: Callable[[], None] = lambda: None
    #: This resource's moves the executor holds as waiting for a slot (partition -> current replicas), and the
    #: partitions among them the executor may send itself once ready (:meth:`ClusterExecutor.arm`).
    waiting: Callable[[], Mapping[TopicPartition, Replicas]] = lambda: {}
    arm: Callable[[Collection[TopicPartition]], None] = lambda _partitions: None
    #: What Kafka refused for good of the moves the executor sent for this resource since its last tick.
    refused: Callable[[], Mapping[TopicPartition, KafkaRefusal]] = lambda: {}
    #: The ConfigMap that holds the resource's records (original replicas, throttle journal), named in the status.
    records: str = ""
    #: Told what each pass left in flight and waiting, for refill between polls (:mod:`refill`).
    report: Callable[[PassReport], object] = lambda _report: None
    #: The KIP-1066 cordon journal in the ConfigMap, and the cordons the other resources hold (:mod:`cordoning`).
    load_cordon: Callable[[], CordonJournal] = CordonJournal
    save_cordon: Callable[[CordonJournal], object] = lambda _journal: None
    others_cordons: Callable[[], list[CordonJournal]] = lambda: []
    #: The partitions a plan selects, as DescribeTopics shows them now: read once, when the plan has succeeded and
    #: brokers must lead none of them (Intent.leaders_away).
    selection: Callable[[], Mapping[TopicPartition, PartitionState]] = lambda: {}
    #: The time after acting (the tick's ``now`` is when it began).
    clock: Callable[[], dt.datetime] = utcnow
    #: AlterReplicaLogDirs through the executor (only while this replica may act; an admitted move counts as in
    #: flight until a look shows it); ``kafka``'s own call when not given.
    move_dirs: Callable[[Mapping[tuple[TopicPartition, int], str]],
                        dict[tuple[TopicPartition, int], KafkaRefusal | None]] | None = None


@dataclass(frozen=True)
class PassReport:
    """What one pass left behind, for the loop that refills between polls, and how many moves Kafka accepted."""

    work: Work
    started: int = 0


def work_left(intent: Intent, memory: Memory, decision: Decision, view: ClusterView,
              owned: Mapping[TopicPartition, Replicas]) -> Work:
    """Its own moves in flight after acting (bytes each has left) and the moves a freed slot could start; nothing
    while the phase does not start moves (Pending, Stopping, terminal)."""
    classification = decision.classification
    if decision.phase not in (Phase.EXECUTING, Phase.REVERTING) or classification is None:
        return Work(throttle=intent.throttle)
    blocked = {c.partition for c in decision.conflicts}
    pending = [tp for tp in classification.of(PartitionStatus.PENDING)
               if tp not in decision.submit and tp not in blocked and tp not in memory.failures]
    # An Incremental step in flight that is not the last: its completion makes the next step pending.
    steps_left = [tp for tp, replicas in owned.items()
                  if tp in decision.targets and decision.targets[tp].replicas != replicas]
    # A finished move the answering broker does not show finished yet is looked at again on the next pass.
    settling = classification.of(PartitionStatus.SETTLING)
    return Work(in_flight={tp: remaining_bytes(view, tp) for tp in owned},
                waiting=len(pending) + len(steps_left) + len(settling), throttle=intent.throttle)


def at_rest(generation: int, memory: Memory, status: Mapping[str, Any]) -> bool:
    """A terminal resource whose spec has not changed needs no Kafka call (and no timer), unless it still has moves
    of its own in flight or throttles to take back."""
    return (memory.phase in TERMINAL and generation == memory.observed_generation
            and not memory.owned and held_of(status).throttle is None
            # A drain that succeeded keeps its cordons until deletion; any other terminal phase takes them back.
            and (memory.phase is Phase.SUCCEEDED or not cordon_of(status).journal.brokers))


def kept_outcome(decision: Decision, memory: Memory, status: Mapping[str, Any]) -> Decision:
    """A terminal phase ticked again (moves of its own to follow, throttles to take back) keeps the reason and
    message it was reached with — "2 skipped" must not turn into "no change since" while a broker is down — and the
    partitions ``status.skipped`` lists, which that message points to (the decision of a terminal phase has none)."""
    if decision.phase is not memory.phase or decision.phase not in TERMINAL:
        return decision
    decision = replace(decision, skipped=decision.skipped or skipped_of(status))
    ready = condition_of(status, cond.READY)
    if ready is None or not ready.reason or not ready.message or ready.reason == THROTTLE_CLEANUP_PENDING:
        return decision
    return replace(decision, reason=ready.reason, message=ready.message.split(f"; {CLEANUP_PENDING_PREFIX}")[0])


def tick(inputs: Inputs[Intent, Memory], ports: Ports) -> Outcome[Decision] | None:
    """Reconcile once; ``None`` when there is nothing to do. At rest (:func:`at_rest`, the rule the shell asks
    before every tick) it does nothing: a refill pass after the first may find the resource there."""
    body, intent, memory, now, status = inputs.body, inputs.intent, inputs.memory, inputs.now, inputs.status
    if at_rest(intent.generation, memory, status):
        return None
    kafka = ports.kafka
    partitions = set(intent.targets) | set(memory.owned) | set(memory.originals)
    validating = memory.phase in TERMINAL or memory.phase is Phase.PENDING or \
        intent.generation != memory.observed_generation
    try:
        return _tick(body, status, intent=intent, memory=memory, ports=ports, now=now, kafka=kafka,
                     partitions=partitions, validating=validating)
    finally:
        ports.settle()


def _tick(body: Mapping[str, Any], status: Mapping[str, Any], *, intent: Intent, memory: Memory, ports: Ports,
          now: dt.datetime, kafka: KafkaAdmin, partitions: set[TopicPartition], validating: bool
          ) -> Outcome[Decision] | None:
    try:
        view = observe(kafka, ports.look, partitions, with_configs=validating)
        view = replace(view, write_rates=ports.write_rates(set(view.partitions)))
        observation = Observation(view=view, claimed_by_others=ports.claimed_by_others(), now=now)
        decision = kept_outcome(decide(intent, memory, observation,
                                       lambda candidates: ports.schedule(candidates, view)), memory, status)
    except KafkaUnavailable as exc:
        return unavailable_outcome(status, str(exc), now, reason=exc.reason)

    held = held_of(status)
    effects = _Effects(
        owned=dict(decision.classification.owned) if decision.classification is not None else
        # terminal: only follow the moves of its own that are still running
        {tp: r for tp, r in memory.owned.items() if tp in view.ongoing and view.ongoing[tp].target == r},
        failures={} if decision.phase in _FRESH_START and decision.phase is not memory.phase
        else dict(memory.failures),
        events=list(decision.events),
        rollback_name=held.rollback_config_map,
        journal=held.throttle,
    )
    try:
        _act(body, intent=intent, memory=memory, decision=decision, view=view, ports=ports, effects=effects)
    except KafkaUnavailable as exc:
        # What was done before the connection broke is recorded below; the next tick reconnects and goes on.
        if decision.phase is Phase.SUCCEEDED and memory.phase is not Phase.SUCCEEDED:
            return unavailable_outcome(status, str(exc), now, reason=exc.reason)
        effects.lost_kafka = True
        effects.events.append(Event("Warning", KAFKA_UNAVAILABLE, f"will retry: {exc}"))
    owned, failures, events, rollback_name = effects.owned, effects.failures, effects.events, effects.rollback_name
    journal, leader_election = effects.journal, effects.leader_election
    if effects.cleanup_pending:
        decision = replace(decision, cleanup_pending=effects.cleanup_pending)
        if _progressing(status)[0] != THROTTLE_CLEANUP_PENDING:
            events.append(Event("Warning", THROTTLE_CLEANUP_PENDING, effects.cleanup_pending))
    if decision.unavailable_brokers:
        # One Event per outage (the same brokers down), not one per tick: the condition carries the details.
        headline = broker_unavailable_headline(decision.unavailable_brokers)
        if not _progressing(status)[1].startswith(headline + ":"):
            events.append(Event("Warning", BROKER_UNAVAILABLE, decision.message))

    # The moves were sent just now, not when the tick began (a first tick reads and records for seconds): the
    # execution clock starts here (status.progress.startedAt).
    new_status = status_of(status, intent, decision, view, recorded_originals=memory.originals, owned=owned,
                           failures=failures, rollback_name=rollback_name, now=now, acted=max(now, ports.clock()),
                           throttle=journal, leader_election=leader_election, cordon=effects.cordon)
    previous_conflicts = held.conflicts
    current_conflicts = {(c.partition.topic, c.partition.partition, c.holder)
                         for c in decision.conflicts[:REPORTED_PARTITIONS]}
    if current_conflicts - previous_conflicts:
        holders = sorted({c.holder for c in decision.conflicts})
        log.info("%s: %d partition(s) wait for %s", _key(body), len(decision.conflicts), ", ".join(holders))
        events.append(Event("Warning", "Conflict", f"{len(decision.conflicts)} partition(s) wait for "
                                                   f"{', '.join(holders)}: {decision.message}"))
    elif previous_conflicts and not current_conflicts:
        log.info("%s: no partition waits for another resource any more", _key(body))
    if not effects.lost_kafka:
        started = sum(1 for tp, replicas in decision.submit.items() if owned.get(tp) == replicas)
        ports.report(PassReport(work_left(intent, memory, decision, view, owned), started))
    return Outcome(status=new_status, events=events, decision=decision, lost_kafka=effects.lost_kafka,
                   originals={**effects.recorded, **decision.save_originals, **memory.originals})


@dataclass
class _Effects:
    """What acting on a decision changed: kpo's moves, refusals, Events, and the records it keeps."""

    owned: dict[TopicPartition, Replicas]
    failures: dict[TopicPartition, KafkaRefusal]
    events: list[Event]
    rollback_name: str | None
    journal: ThrottleJournal | None
    leader_election: LeaderElection | None = None
    cordon: CordonState | None = None
    cleanup_pending: str = ""
    lost_kafka: bool = False
    #: Original replicas this pass put on record (the moves it sent and those the executor may send).
    recorded: Mapping[TopicPartition, Replicas] = field(default_factory=dict)


def _act(body: Mapping[str, Any], *, intent: Intent, memory: Memory, decision: Decision, view: ClusterView,
         ports: Ports, effects: _Effects) -> None:
    """Carry the decision out, in the order that keeps every step safe to interrupt."""
    kafka = ports.kafka
    _refused_meanwhile(ports, effects)
    _lost_dirs(decision, effects)
    waiting = _waiting(decision, ports)
    # 1. The original replicas are on record before any move of theirs is sent.
    recording = {**{tp: r for tp, r in waiting.items() if tp not in memory.originals}, **decision.save_originals}
    if recording:
        effects.rollback_name = ports.save_originals(recording)
        effects.recorded = recording
    # 2. The throttles are in place (and journaled) before the moves they govern start, the intra-broker one before
    #    the log dir moves; a paused resource keeps them for the moves that run on (and follows a changed rate).
    _ensure_throttles(intent, memory, decision, view=view, ports=ports, effects=effects, waiting=waiting)
    # 2b. KIP-1066: the brokers a RemoveBrokers drain empties are cordoned before its moves start, and only while it
    #     executes, pauses or has succeeded; any other phase takes the cordons back.
    wanted = intent.cordon if decision.phase in cordoning.HOLDING else frozenset()
    cordons = cordon_of(body.get("status") or {})
    if wanted or not cordons.journal.empty or cordons.unavailable:
        state = replace(cordons, journal=ports.load_cordon()) if not cordons.journal.empty else cordons
        effects.cordon, events = cordoning.follow(kafka, wanted, state, others=ports.others_cordons(),
                                                  save=ports.save_cordon, live_brokers=view.brokers)
        effects.events.extend(events)
        for event in events:
            log.info("%s: %s", _key(body), event.message)
        if not effects.cordon.journal.empty:
            effects.rollback_name = effects.rollback_name or ports.records
    # 3. Cancellations (dropped partitions, stop): KIP-455 puts each partition back on its original replicas.
    if decision.cancel:
        log.info("%s: cancelling %d move(s): %s", _key(body), len(decision.cancel),
                 ", ".join(map(str, decision.cancel)))
        for tp, answer in ports.send(dict.fromkeys(decision.cancel), False).items():
            if answer is None or answer.code == "NO_REASSIGNMENT_IN_PROGRESS":
                effects.owned.pop(tp, None)
                if tp in decision.give_up:
                    # A stalled move cancelled under onStall Cancel: failed, not retried until the spec changes.
                    effects.failures[tp] = decision.give_up[tp]
    # 4. New and re-targeted moves.
    if decision.submit:
        _submit(body, ports, decision, view, effects)
    # 5. Replicas that sit on their target brokers but in another log dir than the spec names.
    if decision.move_dirs:
        log.info("%s: moving %d replica(s) between log dirs", _key(body), len(decision.move_dirs))
        move_dirs = ports.move_dirs or kafka.alter_replica_log_dirs
        for (tp, broker), answer in move_dirs(decision.move_dirs).items():
            if answer is not None and not answer.retriable:
                effects.failures[tp] = answer
                effects.events.append(Event("Warning", access.refusal_reason([answer]),
                                            f"{tp}: broker {broker} refused the log dir move: {answer}"))
    # 6. Preferred leaders for the moved partitions, before the resource reports success.
    if decision.phase is Phase.SUCCEEDED and memory.phase is not Phase.SUCCEEDED and intent.elect_leaders_after:
        effects.leader_election = _elect(ports, decision, {**memory.originals, **decision.save_originals},
                                         effects.events, away_from=intent.leaders_away)
    # 6b. Everything a waiting move needs is done: the executor may send it the moment a slot frees.
    if decision.phase in _STARTING:
        ports.arm(waiting)
    # 7. The last move has ended: take the throttle back (never while a move of this resource runs).
    # The journal in the ConfigMap is the truth: it is written before any throttle is applied.
    # Entity by entity: what a down broker keeps is retried on every tick (a terminal phase with entries in
    # status.throttle still ticks) and named in the conditions meanwhile.
    throttle_done = decision.phase in TERMINAL or not (intent.throttle or intent.log_dir_throttle)
    if throttle_done and not effects.owned and (effects.journal is not None or decision.phase is not memory.phase):
        journal = ports.load_throttle()
        effects.journal = journal
        if not journal.empty:
            left = ports.remove_throttle(journal, _answering(view))
            effects.journal = left
            if left.empty:
                effects.events.append(Event("Normal", "ThrottleRemoved", "replication throttles removed"))
            else:
                effects.cleanup_pending = describe_pending(left, unreachable=set(left.brokers) - _answering(view))


def _progressing(status: Mapping[str, Any]) -> tuple[str, str]:
    """The reason and message of the Progressing condition the status shows ("" when none)."""
    progressing = condition_of(status, cond.PROGRESSING)
    return (progressing.reason, progressing.message) if progressing is not None else ("", "")


def _ensure_throttles(intent: Intent, memory: Memory, decision: Decision, *, view: ClusterView, ports: Ports,
                      effects: _Effects, waiting: Mapping[TopicPartition, Replicas]) -> None:
    dir_brokers = _moving_between_dirs(decision, view)
    if not (intent.throttle or intent.log_dir_throttle) or decision.phase not in (
            Phase.EXECUTING, Phase.PAUSED, Phase.REVERTING) or not (
            decision.submit or effects.owned or waiting or dir_brokers):
        return
    originals = {**memory.originals, **decision.save_originals}
    moves = {tp: (originals.get(tp) or view.partitions[tp].replicas, t.replicas)
             for tp, t in decision.targets.items() if tp in view.partitions}
    wanted = throttle_plan(intent.throttle or 0, moves, log_dir_rate=intent.log_dir_throttle or 0,
                           log_dir_brokers=dir_brokers)
    effects.journal = ports.ensure_throttle(wanted, ports.load_throttle(), _answering(view))
    effects.rollback_name = effects.rollback_name or ports.records


def _moving_between_dirs(decision: Decision, view: ClusterView) -> frozenset[int]:
    """The brokers that hold a replica of the resource's in a log dir other than the one its target names: they copy
    it between their own dirs (AlterReplicaLogDirs), which the intra-broker throttle governs. A replica still to be
    created on a broker by a move is not one of them: it is created in its dir."""
    if decision.classification is None:
        return frozenset()
    return frozenset(broker for tp in decision.classification.of(PartitionStatus.LOG_DIRS)
                     for (_tp, broker) in misplaced_dirs(tp, decision.targets[tp], view)
                     if (tp, broker) in view.replica_dirs)


def _answering(view: ClusterView) -> set[int]:
    """The brokers whose configs a tick may read and write: listed by Kafka and answering. A broker's configs go to
    that broker, and one that just died stays listed until it is fenced: each request to it waited out the whole
    timeout, holding the tick (and the cluster's other calls) for seconds."""
    return {b for b in view.brokers if view.available(b)}


def _lost_dirs(decision: Decision, effects: _Effects) -> None:
    """Partitions found unable to reach their target log dir (offline on its broker) are recorded as failures: found
    this step, so said once, and not looked for again until the spec changes."""
    if not decision.dir_failures:
        return
    effects.failures.update(decision.dir_failures)
    if decision.reason != LOG_DIR_OFFLINE:  # a step that fails the resource for it says so in the phase's own Event
        detail = "; ".join(f"{tp}: {f.message}" for tp, f in sorted(decision.dir_failures.items())[:3])
        effects.events.append(Event("Warning", LOG_DIR_OFFLINE, f"{len(decision.dir_failures)} partition(s) cannot "
                                                                f"reach their target log dir: {detail}"))


def _refused_meanwhile(ports: Ports, effects: _Effects) -> None:
    """Moves the executor sent for this resource between its ticks (a slot freed) that Kafka refused for good."""
    for tp, refusal in ports.refused().items():
        effects.failures[tp] = refusal
        effects.events.append(Event("Warning", access.refusal_reason([refusal]),
                                    f"{tp}: Kafka refused the move sent as a slot freed: {refusal}"))


def _waiting(decision: Decision, ports: Ports) -> dict[TopicPartition, Replicas]:
    """Moves waiting for a slot that the executor may send by itself once this pass has recorded their original
    replicas and put their throttle in place; none while the phase starts no moves (paused, stopping, terminal),
    and then the executor is told so at once."""
    if decision.phase not in _STARTING:
        ports.arm(())
        return {}
    return {tp: r for tp, r in ports.waiting().items() if tp in decision.targets}


def _submit(body: Mapping[str, Any], ports: Ports, decision: Decision, view: ClusterView,
            effects: _Effects) -> None:
    log.info("%s: submitting %d move(s): %s", _key(body), len(decision.submit),
             ", ".join(f"{tp}->{list(r)}" for tp, r in sorted(decision.submit.items())))
    # KIP-860: a submission that keeps the replication factor goes with allowReplicationFactorChange=false, so Kafka
    # refuses it should the factor have changed since it was read; only the ones the life cycle meant to resize (a
    # target of another length, an Incremental step, a revert) are sent with true.
    resize = {tp for tp, replicas in decision.submit.items() if changes_replication_factor(tp, replicas, view)}
    answers: dict[TopicPartition, KafkaRefusal | None] = {}
    for allow, batch in ((False, {tp: r for tp, r in decision.submit.items() if tp not in resize}),
                         (True, {tp: r for tp, r in decision.submit.items() if tp in resize})):
        try:
            answers.update(ports.send(batch, allow) if batch else {})
        except KafkaRequestRefused as exc:
            answers.update(dict.fromkeys(batch, exc.refusal))
    for tp, answer in answers.items():
        if answer is None:
            effects.owned[tp] = decision.submit[tp]
            effects.failures.pop(tp, None)
        elif not answer.retriable:
            effects.failures[tp] = answer
            effects.events.append(Event("Warning", access.refusal_reason([answer]),
                                f"{tp}: Kafka refused the move to {list(decision.submit[tp])}: {answer}"))


def _elect(ports: Ports, decision: Decision, originals: Mapping[TopicPartition, Replicas],
           events: list[Event], *, away_from: frozenset[int] = frozenset()) -> LeaderElection:
    """Preferred leader election of the moved partitions, and of every selected partition led by a broker of
    ``away_from`` (:mod:`kpo.domain.leaders_away`); those still led by one of them afterwards are named."""
    moved = {tp for tp, t in decision.targets.items() if originals.get(tp, t.replicas) != t.replicas}
    away = leaders_away(ports.selection(), away_from) if away_from else LeadersAway()
    asked = sorted(moved | set(away.elect))
    answers = ports.elect(asked) if asked else {}
    elected = sum(1 for a in answers.values() if a is None)
    already = sum(1 for a in answers.values() if a is not None and a.code == ELECTION_NOT_NEEDED)
    failed = {tp: a for tp, a in answers.items() if a is not None and a.code != ELECTION_NOT_NEEDED}
    if failed:
        detail = "; ".join(f"{tp}: {a}" for tp, a in sorted(failed.items())[:3])
        events.append(Event("Warning", "LeaderElectionFailed", f"{len(failed)} partition(s): {detail}"))
    events.append(Event("Normal", "LeadersElected",
                        f"preferred leader election: {elected} elected, {already} already preferred, "
                        f"{len(failed)} failed"))
    if not away_from:
        return LeaderElection(elected, already, len(failed))
    left = away.after(answers)
    if left:
        detail = "; ".join(f"{tp} (leader {s.leader}): {s.reason}" for tp, s in list(left.items())[:3])
        more = f" and {len(left) - 3} more" if len(left) > 3 else ""
        events.append(Event("Warning", STILL_LEADING, f"{len(left)} selected partition(s) stay led by broker(s) "
                                                      f"{sorted(away_from)}: {detail}{more}"))
    return LeaderElection(elected, already, len(failed), away_from=away_from, still_leading=left)


@dataclass(frozen=True)
class Holdings:
    """What a PartitionReassignment being deleted may still hold in Kafka, as its status and ConfigMaps say."""

    phase: Phase
    owned: Mapping[TopicPartition, Replicas]
    targets: Mapping[TopicPartition, Replicas]
    journal: ThrottleJournal
    originals_recorded: bool
    cordons: CordonJournal = field(default_factory=CordonJournal)
    #: The targets that name log dirs: copies between a broker's dirs towards them are cancelled too.
    dir_targets: Mapping[TopicPartition, Target] = field(default_factory=dict)


def release(holdings: Holdings, ports: Ports) -> list[Event]:
    """Let go of a deleted resource's moves and throttles (its finalizer waits for this); the Events to post.

    Moves of its own still running are cancelled (KIP-455: back to their original replicas), including moves
    towards its targets that a lost status write did not record; then its throttles are taken back, keeping what
    another live resource still needs. Raises :class:`RetryLater` while Kafka refuses a cancellation (it would
    leave no in-sync replica: wait for the move to finish) or a throttle cannot be removed yet (a broker down).
    """
    if holdings.phase in TERMINAL and not holdings.owned and holdings.journal.empty and holdings.cordons.empty:
        return []  # finished, nothing of its own in flight, no throttle, no cordon: nothing to ask Kafka
    copying = bool(holdings.dir_targets) and holdings.phase not in TERMINAL
    if not holdings.owned and holdings.journal.empty and holdings.cordons.empty and not holdings.originals_recorded \
            and not copying:
        # No move was ever sent: a partition's original replicas are on record before its first move is. So there
        # is nothing to cancel, whether or not Kafka can be reached (or lets kpo log in) right now.
        return []
    kafka, events = ports.kafka, []
    try:
        live = kafka.brokers()  # one DescribeCluster for the copies, the throttles and the cordons
        if copying:
            # Copies between log dirs stop with the resource (the replica stays in its dir); left running they would
            # go on unthrottled once the intra-broker rate below is taken back.
            report = kafka.log_dirs({tp.topic for tp in holdings.dir_targets}, live)
            copies = dir_copies_to_cancel(holdings.dir_targets, report.future_dirs, report.replica_dirs)
            if copies:
                (ports.move_dirs or kafka.alter_replica_log_dirs)(copies)
                events.append(Event("Normal", "Cancelled", f"deleted while running: cancelled {len(copies)} "
                                                           "cop(ies) between log dirs"))
        ongoing = kafka.list_reassignments(set(holdings.owned) | set(holdings.targets))
        mine = [tp for tp, o in ongoing.items() if o.target in (holdings.owned.get(tp), holdings.targets.get(tp))]
        if mine:
            answers = ports.send(dict.fromkeys(mine), False)
            refused = {tp: a for tp, a in answers.items() if a is not None and a.code != "NO_REASSIGNMENT_IN_PROGRESS"}
            if refused:
                # Kafka keeps refusing such a cancellation until the move completes: wait for that at a walk.
                raise RetryLater(f"Kafka refused to cancel {len(refused)} move(s), waiting for them to finish: "
                                 f"{next(iter(refused.values()))}", delay=30)
            events.append(Event("Normal", "Cancelled", f"deleted while running: cancelled {len(mine)} move(s)"))
        if not holdings.journal.empty:
            left = ports.remove_throttle(holdings.journal, live)
            if not left.empty:
                # The journal goes with the ConfigMap once the finalizer lets go: hold on until nothing leaks.
                raise RetryLater(f"cannot remove every throttle yet: {describe_pending(left)}", delay=10)
        events.extend(cordoning.release(kafka, holdings.cordons, others=ports.others_cordons(),
                                        save=ports.save_cordon, live_brokers=live))
    except (KafkaUnavailable, KafkaRequestRefused) as exc:
        raise RetryLater(f"cannot cancel the moves in flight yet: {exc}", delay=5, lost_kafka=True) from exc
    return events
