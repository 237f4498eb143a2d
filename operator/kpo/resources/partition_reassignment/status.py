"""A PartitionReassignment's status, both ways, through the API status model.

Read: what the life cycle remembers (:class:`Memory`: phase, generation, the moves kpo has in flight, Kafka's
refusals) and what the other resources see of this one (:class:`Claim`) come from the status as the API models parse
it. Written: every field kpo sets is built here as :class:`PartitionReassignmentStatus` (and its parts) and dumped in
the API's camelCase, so what kpo writes is what the CRD schema (generated from the same models) accepts, and no other
module names a status field. A field set to ``None`` is removed (the status is written as a JSON merge patch).

The status is a report, capped where a list could name every partition of a spec of thousands
(:data:`REPORTED_PARTITIONS`); what kpo must not forget (original replicas, the throttle journal) lives in the
resource's ConfigMap, written before Kafka is touched.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kpo.api import (
    BrokerLoad,
    Conflict,
    CordonedBroker,
    CordonStatus,
    Duration,
    InFlightMove,
    LeaderElectionResult,
    LogDirLoad,
    LogDirProgress,
    PartitionFailure,
    PartitionReassignmentStatus,
    PlanSummary,
    SkippedPartition,
    StalledMove,
    StillLeadingPartition,
    ThrottleStatus,
)
from kpo.api import Progress as ProgressStatus
from kpo.api import Proposal as ProposalStatus
from kpo.api.common import Condition
from kpo.api.partition_reassignment import MAX_SUMMARY_LOG_DIRS
from kpo.domain import conditions as cond
from kpo.domain.claims import Claim
from kpo.domain.cordon import CordonJournal, CordonState
from kpo.domain.estimate import Estimate
from kpo.domain.leaders_away import StillLeading
from kpo.domain.model import ClusterView, KafkaRefusal, Replicas, TopicPartition
from kpo.domain.pause import ExecutionClock, eta_while_paused
from kpo.domain.plan_contract import DirLoad, PlanMetrics
from kpo.domain.proposal import Proposal
from kpo.domain.reassignment import Classification, PartitionStatus, Progress, misplaced_dirs, progress
from kpo.domain.stall import STALLED_CODE, Stall, Watch
from kpo.domain.throttle import ThrottleJournal
from kpo.resources.outcomes import topic_missing_since
from kpo.resources.partition_reassignment.lifecycle import CLAIMING, Decision, Intent, Memory, Phase

#: Entries of status.conflicts and status.skipped: each can name every partition of a spec of thousands.
REPORTED_PARTITIONS = 100


def parse(status: Mapping[str, Any]) -> PartitionReassignmentStatus:
    return PartitionReassignmentStatus.model_validate(dict(status))


def dump(status: PartitionReassignmentStatus) -> dict[str, Any]:
    """The fields set on ``status``, and only those, in the API's camelCase: the merge patch to write."""
    return status.model_dump(mode="json", by_alias=True, exclude_unset=True)


def condition_of(status: Mapping[str, Any], type_: str) -> Condition | None:
    return parse(status).condition(type_)


def memory_of(status: Mapping[str, Any], originals: Mapping[TopicPartition, Replicas]) -> Memory:
    typed = parse(status)
    return Memory(
        phase=Phase(typed.phase or Phase.PENDING), observed_generation=typed.observed_generation or 0,
        owned={TopicPartition(m.topic, m.partition): tuple(m.replicas) for m in typed.in_flight},
        failures={TopicPartition(f.topic, f.partition): KafkaRefusal(code=f.reason, message=f.message)
                  for f in typed.failures},
        originals=dict(originals),
        watches={TopicPartition(m.topic, m.partition): Watch(m.copied_bytes or 0, m.progress_at, tuple(m.down),
                                                             m.behind_bytes, m.closing_at)
                 for m in typed.in_flight if m.progress_at is not None},
        stalled={TopicPartition(s.topic, s.partition): Stall(tuple(s.brokers), tuple(s.down), s.copied_bytes,
                                                             s.since, s.cancelled, s.behind_bytes)
                 for s in typed.stalled_moves if s.since is not None},
        topic_missing_since=typed.topic_missing_since)


@dataclass(frozen=True)
class Held:
    """What the status records the resource holds beside its moves: the throttle journal (None: none, or empty),
    the rollback ConfigMap's name, and the conflicts it last reported (topic, partition, holder)."""

    throttle: ThrottleJournal | None = None
    rollback_config_map: str | None = None
    conflicts: frozenset[tuple[str, int, str]] = frozenset()


def held_of(status: Mapping[str, Any]) -> Held:
    typed = parse(status)
    journal = ThrottleJournal.from_json(status["throttle"]) if typed.throttle is not None else ThrottleJournal()
    return Held(throttle=None if journal.empty else journal,
                rollback_config_map=typed.rollback_config_map,
                conflicts=frozenset((c.topic, c.partition, c.holder) for c in typed.conflicts))


def claim_of(key: str, created: str, partitions: Collection[TopicPartition], status: Mapping[str, Any]) -> Claim:
    """What the other PartitionReassignments see of this one: the partitions it wants (its spec's, or its approved
    proposal's), those it has in flight, whether it is live, and its throttle journal."""
    typed = parse(status)
    throttle = held_of(status).throttle or ThrottleJournal()
    phase = typed.phase or Phase.PENDING
    return Claim(key=key, created=created, partitions=frozenset(partitions),
                 in_flight=frozenset(TopicPartition(m.topic, m.partition) for m in typed.in_flight),
                 # A resource that still holds throttles keeps them "live" for the others, whatever its phase.
                 live=phase in CLAIMING or not throttle.empty, throttle=throttle,
                 # Cordons are held after success too (until deletion): the others must see them in any phase.
                 cordons=cordon_of(status).journal)


def cordon_of(status: Mapping[str, Any]) -> CordonState:
    """``status.cordon``: the brokers the resource cordoned and why it could not (see :mod:`kpo.domain.cordon`)."""
    typed = parse(status).cordon
    if typed is None:
        return CordonState()
    return CordonState(CordonJournal({b.broker: b.previous for b in typed.brokers}), typed.unavailable or None)


def skipped_of(status: Mapping[str, Any]) -> dict[TopicPartition, str]:
    """The partitions ``status.skipped`` reports a revert left alone, with why (the first REPORTED_PARTITIONS)."""
    if not status.get("skipped"):
        return {}
    return {TopicPartition(s.topic, s.partition): s.reason for s in parse(status).skipped}


#: Phases in which a planned resource carries out its approved proposal, so it claims the proposal's partitions.
EXECUTING_PROPOSAL = frozenset({Phase.EXECUTING, Phase.PAUSED, Phase.STOPPING, Phase.REVERTING})


def wanted_partitions(spec: Mapping[str, Any], status: Mapping[str, Any],
                      proposal_partitions: Callable[[str], frozenset[TopicPartition]]) -> frozenset[TopicPartition]:
    """The partitions a resource claims: its spec's; for a plan being carried out, its approved proposal's (read by
    id through ``proposal_partitions``); a plan still planning or awaiting approval claims none (the approval checks
    the cluster against the snapshot the plan was made from)."""
    if not spec.get("plan"):
        return frozenset(TopicPartition(str(p["topic"]), int(p["partition"])) for p in spec.get("partitions") or [])
    typed = parse(status)
    if typed.phase not in EXECUTING_PROPOSAL or typed.proposal is None:
        return frozenset()
    return proposal_partitions(typed.proposal.id)


def status_of(previous: Mapping[str, Any], intent: Intent, decision: Decision, view: ClusterView, *,
              recorded_originals: Mapping[TopicPartition, Replicas], owned: Mapping[TopicPartition, Replicas],
              failures: Mapping[TopicPartition, KafkaRefusal], rollback_name: str | None,
              now: dt.datetime, acted: dt.datetime | None = None, throttle: ThrottleJournal | None = None,
              leader_election: LeaderElection | None = None, cordon: CordonState | None = None) -> dict[str, Any]:
    """The status an execution tick writes; ``acted``: when the tick had sent its moves (the execution clock starts
    then; default ``now``). ``throttle``, ``leader_election`` and ``cordon`` are written when given (an empty
    journal or state removes its field)."""
    before = parse(previous)
    fields: dict[str, Any] = {
        "phase": decision.phase.value,
        "observed_generation": intent.generation,
        "conditions": cond.merge(previous.get("conditions") or [], decision.conditions, intent.generation, now),
        "in_flight": [_in_flight(tp, replicas, decision.watches.get(tp), now)
                      for tp, replicas in sorted(owned.items())],
        "failures": [PartitionFailure(topic=tp.topic, partition=tp.partition, reason=f.code or "Unknown",
                                      message=f.message) for tp, f in sorted(failures.items())],
        # Reports, not memory: the first REPORTED_PARTITIONS of each; the conditions' message counts them all.
        "conflicts": [Conflict(topic=c.partition.topic, partition=c.partition.partition, holder=c.holder)
                      for c in decision.conflicts[:REPORTED_PARTITIONS]],
        "skipped": [SkippedPartition(topic=tp.topic, partition=tp.partition, reason=reason)
                    for tp, reason in sorted(decision.skipped.items())[:REPORTED_PARTITIONS]],
        "stalled_moves": [_stalled_move(tp, stall) for tp, stall
                          in sorted(_stalled(decision.stalled, failures).items())[:REPORTED_PARTITIONS]],
    } | topic_missing_since(previous, decision.topic_missing_since)
    if rollback_name:
        fields["rollback_config_map"] = rollback_name
    if decision.classification is not None and decision.targets:
        fields |= _progress_fields(before, decision, decision.classification, view,
                                   recorded_originals=recorded_originals, failures=failures, owned=owned, now=now,
                                   acted=acted)
    elif before.progress is not None and before.progress.model_fields_set:
        fields["progress"] = before.progress
    if throttle is not None:
        fields["throttle"] = _throttle(throttle)
    if leader_election is not None:
        fields["leader_election"] = leader_election.to_status()
    if cordon is not None:
        fields["cordon"] = _cordon(cordon)
    return dump(PartitionReassignmentStatus(**fields))


def _progress_fields(before: PartitionReassignmentStatus, decision: Decision, classification: Classification,
                     view: ClusterView, *,
                     recorded_originals: Mapping[TopicPartition, Replicas],
                     failures: Mapping[TopicPartition, KafkaRefusal], owned: Mapping[TopicPartition, Replicas],
                     now: dt.datetime, acted: dt.datetime | None) -> dict[str, Any]:
    """``status.progress`` (and ``status.duration`` when the run has just succeeded), counted from Kafka's view."""
    old = before.progress or ProgressStatus()
    clock = ExecutionClock.read(old.started_at, float(old.elapsed_seconds or 0), float(old.paused_seconds or 0),
                                old.paused_since)
    clock = clock.advance(running=bool(owned) or decision.phase is Phase.EXECUTING,
                          paused=decision.phase is Phase.PAUSED, now=now, start=acted)
    # Bytes to move are counted from the placement before kpo started: the rollback ConfigMap's record.
    originals = {tp: view.partitions[tp].replicas for tp in decision.targets if tp in view.partitions}
    originals.update(recorded_originals)
    originals.update(decision.save_originals)
    counted = progress(decision.targets, originals, classification, list(failures), view)
    if decision.phase in (Phase.SUCCEEDED, Phase.REVERTED):
        counted = _all_done(counted)
    if decision.skipped:
        # Skipped partitions are part of what the revert was asked to do: in the total, never counted as done.
        counted = replace(counted, total=counted.total + len(decision.skipped), skipped=len(decision.skipped))
    elapsed = clock.elapsed(now)
    written: dict[str, Any] = {
        "total": counted.total, "completed": counted.completed, "in_flight": counted.in_flight,
        "pending": counted.pending, "failed": counted.failed, "skipped": counted.skipped,
        "bytes_to_move": counted.bytes_to_move, "bytes_moved": counted.bytes_moved, "percent": counted.percent,
        "summary": counted.summary,
    }
    dirs = _log_dir_progress(decision, classification, view, failures)
    if dirs:
        written["log_dirs"] = dirs
    elif old.log_dirs:
        written["log_dirs"] = None  # the last one got there: removed (merge patch)
    eta = counted.eta_seconds(elapsed)
    if decision.phase is Phase.PAUSED:
        eta = eta_while_paused(eta, old.eta_seconds)
    if eta is not None:
        written["eta_seconds"] = eta
    fields: dict[str, Any] = {}
    if clock.started:
        written |= {"started_at": clock.started, "elapsed_seconds": int(elapsed),
                    "paused_seconds": int(clock.paused_total(now))}
        if clock.paused_since is not None:
            written["paused_since"] = clock.paused_since
        elif old.paused_since is not None:
            written["paused_since"] = None  # resumed: removed (the status is a merge patch)
        if decision.phase is Phase.SUCCEEDED and before.phase != Phase.SUCCEEDED.value:
            # The estimate against the run's time without its pauses.
            fields["duration"] = _duration(before.proposal, int(elapsed))
    return {"progress": ProgressStatus(**written), **fields}


def _log_dir_progress(decision: Decision, classification: Classification, view: ClusterView,
                      failures: Mapping[TopicPartition, KafkaRefusal]) -> list[LogDirProgress]:
    """status.progress.logDirs: the replicas still to move between their broker's dirs, per broker and target dir,
    with what DescribeLogDirs shows of the copies running (a failed one is in status.failures instead)."""
    groups: dict[tuple[int, str], list[int]] = {}
    for tp in classification.of(PartitionStatus.LOG_DIRS):
        if tp in failures:
            continue
        for key, wanted in misplaced_dirs(tp, decision.targets[tp], view).items():
            if key not in view.replica_dirs:
                continue  # still to be created on its broker by a move: it is created in its dir
            counts = groups.setdefault((key[1], wanted), [0, 0, 0, 0])
            size = view.replica_sizes.get(key, 0)
            counts[0] += 1
            counts[2] += size
            if view.future_dirs.get(key) == wanted:
                counts[1] += 1
                counts[3] += min(size, view.future_sizes.get(key, 0))
    return [LogDirProgress(broker=broker, log_dir=log_dir, partitions=n, copying=copying, bytes_to_move=to_move,
                           bytes_copied=copied)
            for (broker, log_dir), (n, copying, to_move, copied) in sorted(groups.items())[:REPORTED_PARTITIONS]]


def _in_flight(tp: TopicPartition, replicas: Replicas, watch: Watch | None, now: dt.datetime) -> InFlightMove:
    """One status.inFlight entry: the move, and its stall clock (a move not watched yet starts one now)."""
    watch = watch or Watch(0, now)
    move = InFlightMove(topic=tp.topic, partition=tp.partition, replicas=list(replicas), copied_bytes=watch.copied,
                        progress_at=watch.since, down=list(watch.down))
    if watch.behind is not None and watch.closing_since is not None:
        # Set only when known, so an entry without a lag reads as one (a move not judged by it), not as nulls.
        move.behind_bytes, move.closing_at = watch.behind, watch.closing_since
    return move


def _stalled_move(tp: TopicPartition, stall: Stall) -> StalledMove:
    move = StalledMove(topic=tp.topic, partition=tp.partition, brokers=list(stall.brokers), down=list(stall.down),
                       copied_bytes=stall.copied, since=stall.since, cancelled=stall.cancelled)
    if stall.behind is not None:
        move.behind_bytes = stall.behind
    return move


def _stalled(stalled: Mapping[TopicPartition, Stall], failures: Mapping[TopicPartition, KafkaRefusal]
             ) -> dict[TopicPartition, Stall]:
    """status.stalledMoves after acting: a move whose cancellation Kafka accepted (its failure is recorded) is
    listed as cancelled; one cancelled before whose failure a new run cleared is not listed any more."""
    listed = {}
    for tp, stall in stalled.items():
        gave_up = tp in failures and failures[tp].code == STALLED_CODE
        if gave_up or not stall.cancelled:
            listed[tp] = replace(stall, cancelled=gave_up)
    return listed


def _all_done(counted: Progress) -> Progress:
    return replace(counted, completed=counted.total - counted.failed, in_flight=0, pending=0,
                   bytes_moved=counted.bytes_to_move)


def _throttle(journal: ThrottleJournal) -> ThrottleStatus | None:
    """``status.throttle``: what the journal holds (``None``: nothing, and the field is removed)."""
    return None if journal.empty else ThrottleStatus.model_validate(journal.to_json())


def _cordon(state: CordonState) -> CordonStatus | None:
    """``status.cordon`` (``None``: nothing to say, and the field is removed)."""
    if state.empty:
        return None
    brokers = [CordonedBroker(broker=b, previous=v) for b, v in sorted(state.journal.previous.items())]
    return CordonStatus(brokers=brokers, unavailable=state.unavailable) if state.unavailable \
        else CordonStatus(brokers=brokers)


def throttle_fields(journal: ThrottleJournal) -> dict[str, Any]:
    """The patch that reports ``journal`` alone (a resource failed for want of an ACL names what it still holds)."""
    return dump(PartitionReassignmentStatus(throttle=_throttle(journal)))


def cordon_fields(state: CordonState) -> dict[str, Any]:
    """The patch that reports ``state`` alone (a resource planning again has let go of its cordons)."""
    return dump(PartitionReassignmentStatus(cordon=_cordon(state)))


@dataclass(frozen=True)
class LeaderElection:
    """What the preferred leader election after the moves did: counts, and, with ``away_from`` (DemoteBrokers,
    plan.excludeLeaders), the selected partitions still led by one of those brokers."""

    elected: int
    already_preferred: int
    failed: int
    away_from: frozenset[int] = frozenset()
    still_leading: Mapping[TopicPartition, StillLeading] | None = None

    def to_status(self) -> LeaderElectionResult:
        counts = LeaderElectionResult(elected=self.elected, already_preferred=self.already_preferred,
                                      failed=self.failed)
        if self.still_leading is None:
            return counts
        left = list(self.still_leading.items())
        return LeaderElectionResult(
            elected=self.elected, already_preferred=self.already_preferred, failed=self.failed,
            away_from=sorted(self.away_from), still_leading=len(left),
            still_leading_partitions=[StillLeadingPartition(topic=tp.topic, partition=tp.partition, leader=s.leader,
                                                            reason=s.reason[:1024])
                                      for tp, s in left[:REPORTED_PARTITIONS]])


def proposal_status(proposal: Proposal, metrics: PlanMetrics, config_map: str, now: dt.datetime,
                    estimate: Estimate | None = None) -> ProposalStatus:
    """``status.proposal``: what the user approves, by id, and how long it should take."""
    fields: dict[str, Any] = {
        "id": proposal.id, "created_at": now, "config_map": config_map, "partitions": len(proposal.targets),
        "replica_moves": metrics.replicas_to_move, "bytes_to_move": metrics.bytes_to_move,
        "leader_changes": metrics.leader_changes}
    if estimate is not None:
        fields |= {"estimated_seconds": _whole(estimate.seconds),
                   "estimate_at_throttle_seconds": _whole(estimate.at_throttle_seconds),
                   "estimate_note": estimate.note[:1024]}
    return ProposalStatus(**fields)


def planning_status(previous: Mapping[str, Any], *, phase: Phase, generation: int,
                    conditions: Sequence[cond.ConditionUpdate], now: dt.datetime,
                    proposal: ProposalStatus | None = None, summary: PlanSummary | None = None,
                    missing_since: dt.datetime | None = None) -> dict[str, Any]:
    """The status a planning tick writes: phase and conditions; with a new proposal, the proposal, its summary, and
    no ``duration`` (an earlier run's estimate against its time says nothing of this proposal; None removes it);
    ``topicMissingSince`` while Pending waits for a topic (else removed)."""
    fields: dict[str, Any] = {
        "phase": phase.value, "observed_generation": generation,
        "conditions": cond.merge(previous.get("conditions") or [], conditions, generation, now)}
    fields |= topic_missing_since(previous, missing_since)
    if proposal is not None:
        fields |= {"proposal": proposal, "summary": summary}
        if parse(previous).duration is not None:
            fields["duration"] = None
    return dump(PartitionReassignmentStatus(**fields))


def _duration(proposal: ProposalStatus | None, took_seconds: int) -> Duration | None:
    """``status.duration``: the estimate of the proposal that ran against how long its moves took (``None``: the
    proposal stated no estimate, and there is nothing to compare)."""
    if proposal is None or proposal.estimated_seconds is None:
        return None
    estimated = proposal.estimated_seconds
    ratio = f"{took_seconds / estimated:.2f} x the estimate of {estimated} s" if estimated else "estimated 0 s"
    summary = f"took {took_seconds} s, {ratio}"
    if proposal.estimate_at_throttle_seconds is not None:
        summary += f" ({proposal.estimate_at_throttle_seconds} s of bytes over the throttle)"
    if "finish sooner" in proposal.estimate_note:
        summary += "; the proposal expected Kafka's replication quota to let the moves through sooner"
    return Duration(estimated_seconds=estimated, took_seconds=took_seconds, summary=summary[:1024])


def _whole(seconds: float | None) -> int | None:
    return None if seconds is None else max(0, round(seconds))


def _used_ratio(load: DirLoad | None) -> float | None:
    """The share of a dir's file system in use (RelieveCapacity's metrics carry it), 4 decimals; None without it."""
    if load is None or load.used_bytes is None or not load.total_bytes:
        return None
    return round(max(0, load.used_bytes) / load.total_bytes, 4)


def summary_status(metrics: PlanMetrics) -> PlanSummary:
    """``status.summary``: what the proposal changes, broker by broker."""
    before = {b.broker: b for b in metrics.brokers_before}
    after = {b.broker: b for b in metrics.brokers_after}
    brokers = [BrokerLoad(id=broker,
                          bytes_before=before[broker].bytes if broker in before else 0,
                          bytes_after=after[broker].bytes if broker in after else 0,
                          replicas_before=before[broker].replicas if broker in before else 0,
                          replicas_after=after[broker].replicas if broker in after else 0,
                          leaders_before=before[broker].leaders if broker in before else 0,
                          leaders_after=after[broker].leaders if broker in after else 0)
               for broker in sorted(set(before) | set(after))]
    dirs_before = {(d.broker, d.log_dir): d for d in metrics.dirs_before}
    dirs_after = {(d.broker, d.log_dir): d for d in metrics.dirs_after}
    log_dirs = []
    for key in sorted(dirs_before.keys() | dirs_after.keys())[:MAX_SUMMARY_LOG_DIRS]:
        # A dir the job did not list after the moves is as it was.
        was, will = dirs_before.get(key), dirs_after.get(key) or dirs_before.get(key)
        log_dirs.append(LogDirLoad(broker=key[0], log_dir=key[1],
                                   bytes_before=was.bytes if was else 0, replicas_before=was.replicas if was else 0,
                                   bytes_after=will.bytes if will else 0, replicas_after=will.replicas if will else 0,
                                   used_ratio_before=_used_ratio(was), used_ratio_after=_used_ratio(will)))
    return PlanSummary(partitions=metrics.partitions_changed, replica_moves=metrics.replicas_to_move,
                       bytes_to_move=metrics.bytes_to_move, leader_changes=metrics.leader_changes,
                       lower_bound_bytes=metrics.lower_bound_bytes, offline_partitions=metrics.offline_partitions,
                       offline_examples=list(metrics.offline_examples), band_reached=metrics.band_reached,
                       max_over_mean=metrics.balance_after.bytes if metrics.balance_after else None,
                       min_over_mean=metrics.balance_after.bytes_min if metrics.balance_after else None,
                       note=metrics.message[:1024], brokers=brokers, log_dirs=log_dirs or None)
