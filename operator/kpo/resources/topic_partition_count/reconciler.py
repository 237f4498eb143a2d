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
from dataclasses import dataclass, replace

from kpo.domain.model import KafkaRefusal
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable
from kpo.resources.outcomes import Inputs, Outcome, decide_observing, unavailable_outcome, unchanged
from kpo.resources.topic_partition_count.lifecycle import (
    BrokerLoad,
    Decision,
    Intent,
    KeySample,
    Memory,
    Need,
    Observation,
    decide,
    refused,
    sample_refused,
)
from kpo.resources.topic_partition_count.status import status_of

log = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class Ports:
    """What a TopicPartitionCount tick may read and write: Kafka alone."""

    kafka: KafkaAdmin


def tick(inputs: Inputs[Intent, Memory], ports: Ports) -> Outcome[Decision] | None:
    """Reconcile once; ``None`` when there is nothing to write. Never called at rest (the shell asks ``at_rest``)."""
    status, intent, memory, now, resource = inputs.status, inputs.intent, inputs.memory, inputs.now, inputs.resource
    kafka = ports.kafka
    try:
        try:
            decision = decide_observing(
                lambda seen: decide(intent, memory, seen, now), observe(kafka, intent.topic),
                {Need.KEY_SAMPLE: lambda seen: replace(seen, sample=_sample(kafka, intent, seen, resource)),
                 Need.BROKER_LOAD: lambda seen: replace(seen, load=broker_load(kafka))})
        except _SampleRefused as exc:
            decision = sample_refused(intent, memory, exc.refusal)
        if decision.grow is not None:
            decision = _grow(kafka, memory, decision, resource)
    except KafkaUnavailable as exc:
        return unavailable_outcome(status, str(exc), now, exc.reason)
    new_status = status_of(status, intent, decision, now)
    if not decision.events and unchanged(status, new_status):
        return None
    return Outcome(status=new_status, events=list(decision.events), decision=decision)


class _SampleRefused(Exception):  # noqa: N818 - a refusal, carried out of the observation
    def __init__(self, refusal: KafkaRefusal) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal


def _sample(kafka: KafkaAdmin, intent: Intent, observed: Observation, resource: str) -> KeySample:
    current = len(observed.topic or {})
    log.info("%s: sampling up to %d keys of %s", resource, intent.sample_messages, intent.topic)
    try:
        counts = kafka.sample_key_partitions(intent.topic, intent.sample_messages, (current, intent.partitions))
    except KafkaRequestRefused as exc:
        raise _SampleRefused(exc.refusal) from exc
    return KeySample(counts)


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


__all__ = ["broker_load", "observe", "tick"]
