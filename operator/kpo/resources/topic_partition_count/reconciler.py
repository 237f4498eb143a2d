"""One reconciliation tick of a TopicPartitionCount: observe, decide, grow, report.

The I/O shell around the pure :func:`lifecycle.decide`. It reads the topic and the live brokers, and more only when
the decision asks for it (every topic's replicas for a balanced placement, a sample of keys); it sends the one
CreatePartitions request a decision may carry, and returns the status to write and the Events to post. It knows
nothing of Kopf.

CreatePartitions is not idempotent: sent twice, the second is refused with INVALID_PARTITIONS because the topic
already has the count. That happens when a status write is lost after Kafka accepted the first request (an operator
killed at the wrong moment), so such a refusal is checked against the topic and taken as success when the topic has
the count.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from kpo.domain import access
from kpo.domain import conditions as cond
from kpo.domain.conditions import Event, now_rfc3339
from kpo.domain.keyremap import RemapReport
from kpo.domain.problems import Problem, summarize
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable
from kpo.resources.topic_partition_count.lifecycle import (
    TERMINAL,
    BrokerLoad,
    Decision,
    Intent,
    KeySample,
    Memory,
    Need,
    Observation,
    Phase,
    decide,
    refused,
    report_sources,
    sample_refused,
)

log = logging.getLogger(__name__)

#: Decimal places of the fractions in status.keyRemap (the exact value is in movedKeySpace).
DECIMAL_PLACES = 9


@dataclass
class TickOutcome:
    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    decision: Decision | None = None


def observe(kafka: KafkaAdmin, topic: str) -> Observation:
    """The live brokers and the topic's partitions (None when it does not exist)."""
    brokers = kafka.brokers()
    described = kafka.describe_topics([topic])
    partitions = {tp.partition: state for tp, state in described.items() if tp.topic == topic}
    return Observation(brokers=brokers, topic=partitions or None)


def broker_load(kafka: KafkaAdmin) -> BrokerLoad:
    """Replicas and preferred leaderships per broker over the whole cluster: what a balanced placement evens out."""
    everything = kafka.describe_topics(kafka.topic_names())
    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    for state in everything.values():
        replicas.update(state.replicas)
        if state.replicas:
            leaders[state.replicas[0]] += 1
    return BrokerLoad(replicas=dict(replicas), leaders=dict(leaders))


def tick(*, status: Mapping[str, Any], intent: Intent, memory: Memory, kafka: KafkaAdmin,
         now: str | None = None, resource: str = "") -> TickOutcome | None:
    """Reconcile once; ``None`` when there is nothing to write. ``resource`` only labels the log lines."""
    now = now or now_rfc3339()
    if memory.phase in TERMINAL and intent.generation == memory.observed_generation:
        return None
    try:
        observed = observe(kafka, intent.topic)
        decision = decide(intent, memory, observed)
        for _ in Need:  # each need is observed at most once, so this ends after at most len(Need) rounds
            if not decision.needs:
                break
            if Need.KEY_SAMPLE in decision.needs:
                try:
                    observed = replace(observed, sample=_sample(kafka, intent, observed, resource))
                except KafkaRequestRefused as exc:
                    decision = sample_refused(intent, memory, exc.refusal)
                    break
            if Need.BROKER_LOAD in decision.needs:
                observed = replace(observed, load=broker_load(kafka))
            decision = decide(intent, memory, observed)
        assert not decision.needs, f"still needs {set(decision.needs)} after observing it"
        if decision.grow is not None:
            decision = _grow(kafka, memory, decision, resource)
    except KafkaUnavailable as exc:
        return _unavailable(status, str(exc), now, exc.reason)
    new_status = status_of(status, intent, decision, now)
    if not decision.events and all(status.get(k) == v for k, v in new_status.items()):
        return None
    return TickOutcome(status=new_status, events=list(decision.events), decision=decision)


def _sample(kafka: KafkaAdmin, intent: Intent, observed: Observation, resource: str) -> KeySample:
    current = len(observed.topic or {})
    log.info("%s: sampling up to %d keys of %s", resource, intent.sample_messages, intent.topic)
    return KeySample(kafka.sample_key_partitions(intent.topic, intent.sample_messages, (current, intent.partitions)))


def _grow(kafka: KafkaAdmin, memory: Memory, decision: Decision, resource: str) -> Decision:
    grow = decision.grow
    assert grow is not None
    log.info("%s: CreatePartitions %s -> %d, assignment %s", resource, grow.topic, grow.total, grow.assignment)
    try:
        answer = kafka.create_partitions(grow.topic, grow.total, grow.assignment)
    except KafkaRequestRefused as exc:
        answer = exc.refusal
    if answer is not None and answer.code == "INVALID_PARTITIONS":
        now_has = len(observe(kafka, grow.topic).topic or {})
        if now_has == grow.total:
            log.info("%s: %s already has %d partitions: an earlier request was accepted", resource, grow.topic,
                     grow.total)
            answer = None
    if answer is None:
        return decision
    if answer.retriable:
        raise KafkaUnavailable(str(answer))
    return refused(memory, decision, answer)


def decimal(fraction: Fraction, places: int = DECIMAL_PLACES) -> str:
    """A fraction in [0, 1] as a decimal string, truncated (never rounded up to "1" unless it is 1)."""
    scaled = fraction.numerator * 10**places // fraction.denominator
    whole, rest = divmod(scaled, 10**places)
    digits = f"{rest:0{places}d}".rstrip("0")
    return f"{whole}.{digits}" if digits else str(whole)


def remap_status(report: RemapReport, sample: KeySample | None) -> dict[str, Any]:
    fraction = report.remapped_fraction
    remap: dict[str, Any] = {
        "fromPartitions": report.old_partitions,
        "toPartitions": report.new_partitions,
        "movedFraction": decimal(fraction),
        "movedKeySpace": f"{fraction.numerator}/{fraction.denominator}",
        "sources": [{"partition": p, "fedBy": list(feeding)} for p, feeding in report_sources(report)],
    }
    if sample is not None:
        remap["sampledMessages"] = sample.messages
        moved = sample.moved_fraction
        if moved is not None:
            remap["sampledMovedFraction"] = decimal(moved)
    return remap


def status_of(previous: Mapping[str, Any], intent: Intent, decision: Decision, now: str) -> dict[str, Any]:
    """The status fields this decision sets; ``None`` removes a field (JSON merge patch)."""
    status: dict[str, Any] = {
        "phase": decision.phase.value,
        "observedGeneration": intent.generation,
        "conditions": cond.merge(previous.get("conditions") or [], decision.conditions, intent.generation, now),
    }
    if decision.current is not None:
        status["currentPartitions"] = decision.current
    report = decision.report
    earlier = previous.get("keyRemap") or {}
    if report is not None:
        # Reaching a count already present keeps the report of the growth that got there (a re-applied spec, or a
        # status write lost after Kafka accepted the growth).
        no_change = report.old_partitions == report.new_partitions
        if not (no_change and earlier.get("toPartitions") == report.new_partitions):
            status["keyRemap"] = remap_status(report, decision.sample)
    elif decision.phase in (Phase.INVALID, Phase.FAILED):
        status["keyRemap"] = None
    return status


def _unavailable(status: Mapping[str, Any], message: str, now: str, reason: str) -> TickOutcome:
    previous = status.get("conditions") or []
    updates, news = access.unreachable_updates(previous, reason, message)
    conditions = cond.merge(previous, updates, int(status.get("observedGeneration") or 0), now)
    events = [Event("Warning", reason, f"will retry: {message}")] if news else []
    return TickOutcome(status={"conditions": conditions}, events=events)


def invalid_outcome(status: Mapping[str, Any], generation: int, problems: list[Problem],
                    now: str) -> TickOutcome | None:
    """For a spec the models reject (the CRD schema should have already): Invalid, with every problem named."""
    if status.get("phase") == Phase.INVALID.value and status.get("observedGeneration") == generation:
        return None
    message = summarize(problems)
    decision = Decision(Phase.INVALID, problems[0].reason if problems else "InvalidSpec", message,
                        problems=tuple(problems))
    return TickOutcome(
        status={"phase": Phase.INVALID.value, "observedGeneration": generation,
                "conditions": cond.merge(status.get("conditions") or [], decision.conditions, generation, now)},
        events=[Event("Warning", decision.reason, message)], decision=decision)


__all__ = ["TickOutcome", "broker_load", "decimal", "invalid_outcome", "observe", "remap_status", "status_of", "tick"]
