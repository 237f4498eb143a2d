"""TopicPartitionCount as the tick shell sees it (:class:`~kpo.resources.shell.Kind`).

A timer reconciles every ``pollIntervalSeconds``: new partitions get their leaders on Kafka's clock, not as an event on
this resource, so kpo polls. A finished resource (Succeeded, Failed, Invalid for its current spec) has no timer at all:
it reads nothing until its spec changes. Partitions cannot be removed, so deleting the resource leaves the topic as it
is: the kind has nothing to release and no finalizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from kpo.api import TOPIC_PARTITION_COUNT, TopicPartitionCountSpec
from kpo.resources import shell
from kpo.resources.outcomes import Inputs, Outcome
from kpo.resources.topic_partition_count import reconciler
from kpo.resources.topic_partition_count.lifecycle import TERMINAL
from kpo.resources.topic_partition_count.spec import intent_of, parse_spec
from kpo.resources.topic_partition_count.status import memory_of


def topicpartitioncount_at_rest(generation: int, status: Mapping[str, Any]) -> bool:
    """Terminal for its current spec: the timer stops (Kopf evaluates this on every change of the resource, so a
    spec change starts it again)."""
    memory = memory_of(status)
    return memory.phase in TERMINAL and memory.observed_generation == generation


def topicpartitioncount_reconcile(tick: shell.Tick[TopicPartitionCountSpec]) -> Outcome[Any] | None:
    return reconciler.tick(Inputs(tick.body, intent_of(tick.spec, tick.generation), memory_of(tick.status), tick.now),
                           reconciler.Ports(kafka=tick.kafka))


KIND = shell.Kind(resource=TOPIC_PARTITION_COUNT, parse=parse_spec, at_rest=topicpartitioncount_at_rest,
                  reconcile=topicpartitioncount_reconcile)


def register(registry: kopf.OperatorRegistry, poll_interval_seconds: float) -> None:
    shell.register(KIND, registry, poll_interval_seconds)
