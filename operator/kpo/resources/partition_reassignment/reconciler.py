"""One reconciliation tick of a PartitionReassignment: observe Kafka, decide, act, report.

This is the I/O shell around the pure :func:`lifecycle.decide`. It reads the cluster through the
:class:`~kpo.kafka.admin.KafkaAdmin` Protocol and the rollback ConfigMap, carries the decision out in a safe order
(original replicas saved before any move is sent, cancellations before submissions), and returns the status to write
and the Events to post. It knows nothing of Kopf, so handlers stay a thin layer.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kpo.domain import conditions as cond
from kpo.domain.model import ClusterView, KafkaRefusal, Replicas, TopicPartition
from kpo.domain.reassignment import PartitionStatus, Problem, Progress, progress
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable
from kpo.resources.partition_reassignment.lifecycle import (
    TERMINAL,
    Admit,
    Decision,
    Event,
    Intent,
    Memory,
    Observation,
    Phase,
    decide,
)

log = logging.getLogger(__name__)

# Memory.failures are cleared when a new run starts: back in Pending (a new spec) or when reverting begins.
_FRESH_START = frozenset({Phase.PENDING, Phase.REVERTING})


@dataclass
class TickOutcome:
    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    decision: Decision | None = None


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def observe(kafka: KafkaAdmin, partitions: set[TopicPartition], *, with_configs: bool) -> ClusterView:
    """The slice of the cluster one tick needs, read fresh from Kafka."""
    topics = {tp.topic for tp in partitions}
    brokers = kafka.brokers()
    names = kafka.topic_names()
    present = topics & names
    states = kafka.describe_topics(present)
    ongoing = kafka.list_reassignments([tp for tp in partitions if tp in states])
    sizes, log_dirs = kafka.replica_sizes(present)
    min_insync: dict[str, int] = {}
    if with_configs and present:
        configs = kafka.topic_configs(present, ["min.insync.replicas"])
        min_insync = {t: int(c.get("min.insync.replicas", "1")) for t, c in configs.items()}
    return ClusterView(brokers=brokers, partitions=states, ongoing=ongoing, replica_sizes=sizes,
                       min_insync=min_insync, log_dirs=log_dirs, topics=frozenset(names))


def _key(body: Mapping[str, Any]) -> str:
    meta = body.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _entries(values: Mapping[TopicPartition, Any], render: Callable[[Any], dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition, **render(v)} for tp, v in sorted(values.items())]


def tick(
    *,
    body: Mapping[str, Any],
    intent: Intent,
    memory: Memory,
    kafka: KafkaAdmin,
    save_originals: Callable[[Mapping[TopicPartition, Replicas]], str],
    claimed_by_others: Callable[[], dict[TopicPartition, str]],
    admit: Admit,
    now: str | None = None,
) -> TickOutcome | None:
    """Reconcile once; ``None`` when there is nothing to do (a terminal phase whose spec has not changed)."""
    now = now or now_rfc3339()
    status: Mapping[str, Any] = body.get("status") or {}
    if memory.phase in TERMINAL and intent.generation == memory.observed_generation:
        return None
    partitions = set(intent.targets) | set(memory.owned) | set(memory.originals)
    validating = memory.phase in TERMINAL or memory.phase is Phase.PENDING or \
        intent.generation != memory.observed_generation
    try:
        view = observe(kafka, partitions, with_configs=validating)
        decision = decide(intent, memory, Observation(view=view, claimed_by_others=claimed_by_others()), admit)
    except KafkaUnavailable as exc:
        return _unavailable(status, intent, str(exc), now)

    failures = {} if decision.phase in _FRESH_START and decision.phase is not memory.phase else dict(memory.failures)
    owned = dict(decision.classification.owned) if decision.classification is not None else dict(memory.owned)
    events = list(decision.events)
    rollback_name = status.get("rollbackConfigMap")

    # 1. The original replicas are on record before any move of theirs is sent.
    if decision.save_originals:
        rollback_name = save_originals(decision.save_originals)
    # 2. Cancellations (dropped partitions, stop): KIP-455 puts each partition back on its original replicas.
    try:
        if decision.cancel:
            log.info("%s: cancelling %d move(s): %s", _key(body), len(decision.cancel),
                     ", ".join(map(str, decision.cancel)))
            answers = kafka.alter_reassignments(dict.fromkeys(decision.cancel))
            for tp, answer in answers.items():
                if answer is None or answer.code == "NO_REASSIGNMENT_IN_PROGRESS":
                    owned.pop(tp, None)
        # 3. New and re-targeted moves.
        if decision.submit:
            log.info("%s: submitting %d move(s): %s", _key(body), len(decision.submit),
                     ", ".join(f"{tp}->{list(r)}" for tp, r in sorted(decision.submit.items())))
            try:
                answers = kafka.alter_reassignments(decision.submit)
            except KafkaRequestRefused as exc:
                answers = dict.fromkeys(decision.submit, exc.refusal)
            for tp, answer in answers.items():
                if answer is None:
                    owned[tp] = decision.submit[tp]
                    failures.pop(tp, None)
                elif not answer.retriable:
                    failures[tp] = answer
                    events.append(Event("Warning", "KafkaRefused", f"{tp}: Kafka refused the move to "
                                                                   f"{list(decision.submit[tp])}: {answer}"))
    except KafkaUnavailable as exc:
        events.append(Event("Warning", "KafkaUnavailable", f"will retry: {exc}"))

    new_status = _status(status, intent, decision, view, recorded_originals=memory.originals, owned=owned,
                         failures=failures, rollback_name=rollback_name, now=now)
    previous_conflicts = {(c["topic"], c["partition"], c["holder"]) for c in status.get("conflicts") or []}
    current_conflicts = {(c.partition.topic, c.partition.partition, c.holder) for c in decision.conflicts}
    if current_conflicts - previous_conflicts:
        holders = sorted({c.holder for c in decision.conflicts})
        events.append(Event("Warning", "Conflict", f"{len(current_conflicts)} partition(s) wait for "
                                                   f"{', '.join(holders)}: {decision.message}"))
    return TickOutcome(status=new_status, events=events, decision=decision)


def _status(previous: Mapping[str, Any], intent: Intent, decision: Decision, view: ClusterView, *,
            recorded_originals: Mapping[TopicPartition, Replicas], owned: Mapping[TopicPartition, Replicas],
            failures: Mapping[TopicPartition, KafkaRefusal], rollback_name: str | None, now: str) -> dict[str, Any]:
    old_progress = previous.get("progress") or {}
    started = old_progress.get("startedAt")
    if started is None and (owned or decision.phase is Phase.EXECUTING):
        started = now
    status: dict[str, Any] = {
        "phase": decision.phase.value,
        "observedGeneration": intent.generation,
        "conditions": cond.merge(previous.get("conditions") or [], decision.conditions, intent.generation, now),
        "inFlight": _entries(owned, lambda r: {"replicas": list(r)}),
        "failures": _entries(failures, lambda f: {"reason": f.code or "Unknown", "message": f.message}),
        "conflicts": [{"topic": c.partition.topic, "partition": c.partition.partition, "holder": c.holder}
                      for c in decision.conflicts],
        "skipped": _entries(decision.skipped, lambda reason: {"reason": reason}),
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
        elapsed = _seconds_between(started, now) if started else 0.0
        status["progress"] = {
            "total": counted.total, "completed": counted.completed, "inFlight": counted.in_flight,
            "pending": counted.pending, "failed": counted.failed, "bytesToMove": counted.bytes_to_move,
            "bytesMoved": counted.bytes_moved, "percent": counted.percent, "summary": counted.summary,
        }
        eta = counted.eta_seconds(elapsed)
        if eta is not None:
            status["progress"]["etaSeconds"] = eta
        if started:
            status["progress"]["startedAt"] = started
    elif old_progress:
        status["progress"] = dict(old_progress)
    return status


def _all_done(counted: Progress) -> Progress:
    return replace(counted, completed=counted.total - counted.failed, in_flight=0, pending=0,
                   bytes_moved=counted.bytes_to_move)


def _seconds_between(start: str, end: str) -> float:
    parse = dt.datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))).total_seconds()


def _unavailable(status: Mapping[str, Any], intent: Intent, message: str, now: str) -> TickOutcome:
    updates = [cond.ConditionUpdate(cond.PROGRESSING, True, "KafkaUnavailable", f"retrying: {message}")]
    conditions = cond.merge(status.get("conditions") or [], updates, int(status.get("observedGeneration") or 0), now)
    return TickOutcome(status={"conditions": conditions},
                       events=[Event("Warning", "KafkaUnavailable", f"will retry: {message}")])


def invalid_outcome(status: Mapping[str, Any], generation: int, problems: list[Problem], now: str) -> TickOutcome:
    """For a spec the models reject (the CRD schema should have already): Invalid, with every problem named."""
    message = "; ".join(str(p) for p in problems)
    decision = Decision(Phase.INVALID, problems[0].reason if problems else "InvalidSpec", message,
                        problems=tuple(problems))
    return TickOutcome(
        status={"phase": Phase.INVALID.value, "observedGeneration": generation,
                "conditions": cond.merge(status.get("conditions") or [], decision.conditions, generation, now)},
        events=[Event("Warning", decision.reason, message)], decision=decision)


__all__ = ["PartitionStatus", "TickOutcome", "invalid_outcome", "now_rfc3339", "observe", "tick"]
