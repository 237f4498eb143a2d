"""A PartitionReassignment's status, both ways, through the API status model.

Read: what the life cycle remembers (:class:`Memory`: phase, generation, the moves kpo has in flight, Kafka's
refusals) and what the other resources see of this one (:class:`Claim`) come from the status as the API models parse
it. Written: the fields a decision sets go through :class:`PartitionReassignmentStatus` and are dumped in the API's
camelCase, so what kpo writes is what the CRD schema (generated from the same models) accepts. A field set to
``None`` is removed (the status is written as a JSON merge patch).

The status is a report, capped where a list could name every partition of a spec of thousands
(:data:`REPORTED_PARTITIONS`); what kpo must not forget (original replicas, the throttle journal) lives in the
resource's ConfigMap, written before Kafka is touched.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kpo.api import PartitionReassignmentStatus
from kpo.domain import conditions as cond
from kpo.domain.claims import Claim
from kpo.domain.clock import parse_rfc3339, rfc3339
from kpo.domain.cordon import CordonJournal
from kpo.domain.estimate import Estimate
from kpo.domain.model import ClusterView, KafkaRefusal, Replicas, TopicPartition
from kpo.domain.pause import ExecutionClock, eta_while_paused
from kpo.domain.plan_contract import PlanMetrics
from kpo.domain.proposal import Proposal
from kpo.domain.reassignment import Progress, progress
from kpo.domain.stall import STALLED_CODE, Stall, Watch
from kpo.domain.throttle import ThrottleJournal
from kpo.resources.partition_reassignment.lifecycle import CLAIMING, Decision, Intent, Memory, Phase

#: Entries of status.conflicts and status.skipped: each can name every partition of a spec of thousands.
REPORTED_PARTITIONS = 100


def parse(status: Mapping[str, Any]) -> PartitionReassignmentStatus:
    return PartitionReassignmentStatus.model_validate(dict(status))


def write(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Status fields (camelCase) as the API model reads and dumps them; the keys given, and only those, are written."""
    return PartitionReassignmentStatus.model_validate(dict(fields)).model_dump(
        mode="json", by_alias=True, exclude_unset=True)


def memory_of(status: Mapping[str, Any], originals: Mapping[TopicPartition, Replicas]) -> Memory:
    typed = parse(status)
    return Memory(
        phase=Phase(typed.phase or Phase.PENDING), observed_generation=typed.observed_generation or 0,
        owned={TopicPartition(m.topic, m.partition): tuple(m.replicas) for m in typed.in_flight},
        failures={TopicPartition(f.topic, f.partition): KafkaRefusal(code=f.reason, message=f.message)
                  for f in typed.failures},
        originals=dict(originals),
        watches={TopicPartition(m.topic, m.partition): Watch(m.copied_bytes or 0, m.progress_at, tuple(m.down))
                 for m in typed.in_flight if m.progress_at is not None},
        stalled={TopicPartition(s.topic, s.partition): Stall(tuple(s.brokers), tuple(s.down), s.copied_bytes,
                                                             s.since, s.cancelled)
                 for s in typed.stalled_moves if s.since is not None})


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
                 cordons=CordonJournal.from_json((status.get("cordon") or {}).get("brokers")))


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


def _entries(values: Mapping[TopicPartition, Any], render: Callable[[Any], dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition, **render(v)} for tp, v in sorted(values.items())]


def status_of(previous: Mapping[str, Any], intent: Intent, decision: Decision, view: ClusterView, *,
              recorded_originals: Mapping[TopicPartition, Replicas], owned: Mapping[TopicPartition, Replicas],
              failures: Mapping[TopicPartition, KafkaRefusal], rollback_name: str | None,
              now: dt.datetime, acted: dt.datetime | None = None) -> dict[str, Any]:
    """The status an execution tick writes (the throttle and leader election fields are the reconciler's);
    ``acted``: when the tick had sent its moves (the execution clock starts then; default ``now``)."""
    old_progress = previous.get("progress") or {}
    clock = ExecutionClock.read(parse_rfc3339(old_progress.get("startedAt")),
                                float(old_progress.get("elapsedSeconds") or 0),
                                float(old_progress.get("pausedSeconds") or 0),
                                parse_rfc3339(old_progress.get("pausedSince")))
    clock = clock.advance(running=bool(owned) or decision.phase is Phase.EXECUTING,
                          paused=decision.phase is Phase.PAUSED, now=now, start=acted)
    status: dict[str, Any] = {
        "phase": decision.phase.value,
        "observedGeneration": intent.generation,
        "conditions": cond.merge(previous.get("conditions") or [], decision.conditions, intent.generation, now),
        "inFlight": _entries({tp: (r, decision.watches.get(tp)) for tp, r in owned.items()},
                             lambda entry: _in_flight(entry[0], entry[1], now)),
        "failures": _entries(failures, lambda f: {"reason": f.code or "Unknown", "message": f.message}),
        # Reports, not memory: the first REPORTED_PARTITIONS of each; the conditions' message counts them all.
        "conflicts": [{"topic": c.partition.topic, "partition": c.partition.partition, "holder": c.holder}
                      for c in decision.conflicts[:REPORTED_PARTITIONS]],
        "skipped": _entries(decision.skipped, lambda reason: {"reason": reason})[:REPORTED_PARTITIONS],
        "stalledMoves": _entries(_stalled(decision.stalled, failures), lambda s: {
            "brokers": list(s.brokers), "down": list(s.down), "copiedBytes": s.copied,
            "since": rfc3339(s.since), "cancelled": s.cancelled})[:REPORTED_PARTITIONS],
    }
    if rollback_name:
        status["rollbackConfigMap"] = rollback_name
    if decision.classification is not None and decision.targets:
        # Bytes to move are counted from the placement before kpo started: the rollback ConfigMap's record.
        originals = {tp: view.partitions[tp].replicas for tp in decision.targets if tp in view.partitions}
        originals.update(recorded_originals)
        originals.update(decision.save_originals)
        counted = progress(decision.targets, originals, decision.classification, list(failures), view)
        if decision.phase in (Phase.SUCCEEDED, Phase.REVERTED):
            counted = _all_done(counted)
        if decision.skipped:
            # Skipped partitions are part of what the revert was asked to do: in the total, never counted as done.
            counted = replace(counted, total=counted.total + len(decision.skipped), skipped=len(decision.skipped))
        elapsed = clock.elapsed(now)
        status["progress"] = {
            "total": counted.total, "completed": counted.completed, "inFlight": counted.in_flight,
            "pending": counted.pending, "failed": counted.failed, "skipped": counted.skipped,
            "bytesToMove": counted.bytes_to_move,
            "bytesMoved": counted.bytes_moved, "percent": counted.percent, "summary": counted.summary,
        }
        eta = counted.eta_seconds(elapsed)
        if decision.phase is Phase.PAUSED:
            eta = eta_while_paused(eta, old_progress.get("etaSeconds"))
        if eta is not None:
            status["progress"]["etaSeconds"] = eta
        if clock.started:
            status["progress"] |= {"startedAt": rfc3339(clock.started), "elapsedSeconds": int(elapsed),
                                   "pausedSeconds": int(clock.paused_total(now))}
            if clock.paused_since is not None:
                status["progress"]["pausedSince"] = rfc3339(clock.paused_since)
            elif old_progress.get("pausedSince"):
                status["progress"]["pausedSince"] = None  # resumed: removed (the status is a merge patch)
        if clock.started and decision.phase is Phase.SUCCEEDED and previous.get("phase") != Phase.SUCCEEDED.value:
            # The estimate against the run's time without its pauses.
            status["duration"] = duration_status(previous.get("proposal") or {}, int(elapsed))
    elif old_progress:
        status["progress"] = dict(old_progress)
    return write(status)


def _in_flight(replicas: Replicas, watch: Watch | None, now: dt.datetime) -> dict[str, Any]:
    """One status.inFlight entry: the move, and its stall clock (a move not watched yet starts one now)."""
    watch = watch or Watch(0, now)
    return {"replicas": list(replicas), "copiedBytes": watch.copied, "progressAt": rfc3339(watch.since),
            "down": list(watch.down)}


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


def throttle_status(journal: ThrottleJournal) -> dict[str, object] | None:
    """``status.throttle``: what the journal holds (``None``: nothing, and the field is removed)."""
    if journal.empty:
        return None
    data = journal.to_json()
    return {"rate": data["rate"], "brokers": data["brokers"], "topics": data["topics"]}


def proposal_status(proposal: Proposal, metrics: PlanMetrics, config_map: str, now: dt.datetime,
                    estimate: Estimate | None = None) -> dict[str, Any]:
    """``status.proposal``: what the user approves, by id, and how long it should take."""
    written: dict[str, Any] = {
        "id": proposal.id, "createdAt": rfc3339(now), "configMap": config_map,
        "partitions": len(proposal.targets), "replicaMoves": metrics.replicas_to_move,
        "bytesToMove": metrics.bytes_to_move, "leaderChanges": metrics.leader_changes}
    if estimate is not None:
        written |= {"estimatedSeconds": _whole(estimate.seconds),
                    "estimateAtThrottleSeconds": _whole(estimate.at_throttle_seconds),
                    "estimateNote": estimate.note[:1024]}
    return written


def new_proposal_fields(previous: Mapping[str, Any], proposal: Mapping[str, Any], summary: Mapping[str, Any]
                        ) -> dict[str, Any]:
    """The status fields a new proposal writes: the proposal, its summary, and no ``duration`` (an earlier run's
    estimate against its time, which says nothing of this proposal; None removes it from the merge patch)."""
    fields: dict[str, Any] = {"proposal": dict(proposal), "summary": dict(summary)}
    if previous.get("duration") is not None:
        fields["duration"] = None
    return fields


def duration_status(proposal: Mapping[str, Any], took_seconds: int) -> dict[str, Any] | None:
    """``status.duration``: the estimate of the proposal that ran against how long its moves took (``None``: the
    proposal stated no estimate, and there is nothing to compare)."""
    estimated = proposal.get("estimatedSeconds")
    if estimated is None:
        return None
    ratio = f"{took_seconds / estimated:.2f} x the estimate of {estimated} s" if estimated else "estimated 0 s"
    at_throttle = proposal.get("estimateAtThrottleSeconds")
    summary = f"took {took_seconds} s, {ratio}"
    if at_throttle is not None:
        summary += f" ({at_throttle} s of bytes over the throttle)"
    if "finish sooner" in str(proposal.get("estimateNote", "")):
        summary += "; the proposal expected Kafka's replication quota to let the moves through sooner"
    return {"estimatedSeconds": estimated, "tookSeconds": took_seconds, "summary": summary[:1024]}


def _whole(seconds: float | None) -> int | None:
    return None if seconds is None else max(0, round(seconds))


def summary_status(metrics: PlanMetrics) -> dict[str, Any]:
    """``status.summary``: what the proposal changes, broker by broker."""
    before = {b.broker: b for b in metrics.brokers_before}
    after = {b.broker: b for b in metrics.brokers_after}
    brokers = [{"id": broker,
                "bytesBefore": before[broker].bytes if broker in before else 0,
                "bytesAfter": after[broker].bytes if broker in after else 0,
                "replicasBefore": before[broker].replicas if broker in before else 0,
                "replicasAfter": after[broker].replicas if broker in after else 0,
                "leadersBefore": before[broker].leaders if broker in before else 0,
                "leadersAfter": after[broker].leaders if broker in after else 0}
               for broker in sorted(set(before) | set(after))]
    return {"partitions": metrics.partitions_changed, "replicaMoves": metrics.replicas_to_move,
            "bytesToMove": metrics.bytes_to_move, "leaderChanges": metrics.leader_changes,
            "lowerBoundBytes": metrics.lower_bound_bytes, "offlinePartitions": metrics.offline_partitions,
            "offlineExamples": list(metrics.offline_examples), "bandReached": metrics.band_reached,
            "maxOverMean": metrics.balance_after.bytes if metrics.balance_after else None,
            "minOverMean": metrics.balance_after.bytes_min if metrics.balance_after else None,
            "note": metrics.message[:1024], "brokers": brokers}
