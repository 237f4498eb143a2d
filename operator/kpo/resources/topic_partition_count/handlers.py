"""Kopf wiring for TopicPartitionCount — the only module of this kind that knows Kopf.

One timer reconciles every ``pollIntervalSeconds``: new partitions get their leaders on Kafka's clock, not as an
event on this resource, so kpo polls. A finished resource (Succeeded, Failed, Invalid for its current spec) has no
timer at all: it reads nothing until its spec changes. Partitions cannot be removed, so deleting the resource leaves
the topic as it is and only drops it from the metrics (an optional handler: it adds no finalizer of its own).
"""

from __future__ import annotations

from typing import Any

import kopf

from kpo import metrics
from kpo.api import GROUP, VERSION
from kpo.domain.conditions import now_rfc3339
from kpo.resources import (
    Logger,
    Outcome,
    kafka_refusals_retried,
    lost_kafka,
    not_authorized_outcome,
    parse_and_connect,
    post_outcome,
)
from kpo.resources.topic_partition_count import reconciler
from kpo.resources.topic_partition_count.lifecycle import TERMINAL
from kpo.resources.topic_partition_count.spec import intent_of, memory_of, parse_spec
from kpo.runtime import OperatorContext

PLURAL = "topicpartitioncounts"


def _context(memo: Any) -> OperatorContext:
    context = memo["context"]
    assert isinstance(context, OperatorContext)
    return context


def topicpartitioncount_polls(*, meta: kopf.Meta, status: kopf.Status, **_: Any) -> bool:
    """Whether the timer runs at all: not once the resource is terminal for its current spec. Kopf evaluates this
    on every change of the resource, so a spec change (a new generation) starts the timer again."""
    memory = memory_of(status)
    return not (memory.phase in TERMINAL and memory.observed_generation == int(meta.get("generation") or 1))


def topicpartitioncount_tick(*, memo: Any, **kwargs: Any) -> None:
    _context(memo).api_outage.run(lambda: _tick(memo=memo, **kwargs))


def _tick(*, body: kopf.Body, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, uid: str, patch: kopf.Patch,
          memo: Any, logger: Logger, **_: Any) -> None:
    if meta.get("deletionTimestamp"):
        return
    context = _context(memo)
    generation = int(meta.get("generation") or 1)
    cluster_label = context.cluster_name(spec.get("clusterRef"))
    with context.resource_lock(uid), metrics.reconcile("TopicPartitionCount", uid, status=status, patch=patch,
                                                       cluster=cluster_label) as tick_metrics:
        now = now_rfc3339()
        inputs = parse_and_connect(
            spec, parse_spec, context.kafka,
            lambda problems: post_outcome(body, patch, reconciler.invalid_outcome(status, generation, problems, now)))
        if inputs is None:
            return
        parsed, kafka = inputs
        outcome: reconciler.TickOutcome | Outcome | None = None
        with kafka_refusals_retried(logger) as refused:
            outcome = reconciler.tick(status=status, intent=intent_of(parsed, generation), memory=memory_of(status),
                                      kafka=kafka, now=now, resource=f"{meta['namespace']}/{meta['name']}")
        if refused.refusal is not None:
            outcome = not_authorized_outcome(status, generation, refused.refusal, now)
        tick_metrics.settle(events=outcome.events if outcome else ())
        if lost_kafka(outcome):
            context.forget_kafka(parsed.cluster_ref)
        post_outcome(body, patch, outcome)


def topicpartitioncount_delete(*, uid: str, **_: Any) -> None:
    metrics.forget(uid)


def register(registry: kopf.OperatorRegistry, poll_interval_seconds: float) -> None:
    kopf.timer(GROUP, VERSION, PLURAL, id="topicpartitioncount_tick", interval=poll_interval_seconds,
               when=topicpartitioncount_polls, registry=registry)(topicpartitioncount_tick)
    kopf.on.delete(GROUP, VERSION, PLURAL, id="topicpartitioncount_delete", optional=True,
                   registry=registry)(topicpartitioncount_delete)
