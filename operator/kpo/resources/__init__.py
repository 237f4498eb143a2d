"""One folder per custom resource: ``spec.py`` (parse and validate), ``lifecycle.py`` (phases and decisions, pure),
``handlers.py`` (the only Kopf wiring for that kind). What every kind's wiring shares lives here."""

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import kopf
from pydantic import ValidationError

from kpo.domain.conditions import Event
from kpo.domain.reassignment import Problem
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused

Logger = logging.Logger | logging.LoggerAdapter[Any]
#: The Event reason every kind's tick posts when it lost the connection to Kafka (it reconnects on the next tick).
KAFKA_UNAVAILABLE = "KafkaUnavailable"


class _ClusterSpec(Protocol):
    @property
    def cluster_ref(self) -> str | None: ...


ParsedSpec = TypeVar("ParsedSpec", bound=_ClusterSpec)


class TickResult(Protocol):
    """What a tick of any kind ends with: the status to write and the Events to post."""

    @property
    def status(self) -> Mapping[str, Any]: ...

    @property
    def events(self) -> Sequence[Event]: ...


def spec_problems(error: ValidationError) -> list[Problem]:
    """What the API models refused in a spec (the CRD schema should have refused it first), one Problem a field."""
    return [Problem("spec." + ".".join(str(p) for p in e["loc"]), "InvalidSpec", e["msg"]) for e in error.errors()]


def post_outcome(body: kopf.Body, patch: kopf.Patch, outcome: TickResult | None) -> None:
    """Write a tick's status (Kopf patches it through the status subresource) and post its Events; None: nothing."""
    if outcome is None:
        return
    patch.status.update(outcome.status)
    for event in outcome.events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message[:1024])


def lost_kafka(outcome: TickResult | None) -> bool:
    """Whether the tick lost its connection to Kafka, so the cached client should be dropped and rebuilt."""
    return outcome is not None and any(e.reason == KAFKA_UNAVAILABLE for e in outcome.events)


@contextmanager
def kafka_refusals_retried(logger: Logger) -> Iterator[None]:
    """A read Kafka refused (an ACL, a broker that is not ready) ends the tick and is retried on Kopf's backoff."""
    try:
        yield
    except KafkaRequestRefused as exc:
        logger.warning("Kafka refused a read: %s", exc)
        raise kopf.TemporaryError(f"Kafka refused: {exc}", delay=10) from exc


def parse_and_connect(spec: Mapping[str, Any], parse: Callable[[Mapping[str, Any]], ParsedSpec],
                      kafka_of: Callable[[str | None], KafkaAdmin], refuse: Callable[[list[Problem]], None], *,
                      refuse_unknown_cluster: bool = True) -> tuple[ParsedSpec, KafkaAdmin] | None:
    """A tick's first two steps for every kind: the spec as the API models read it, and the Kafka cluster it names.

    A spec the models reject, or a ``clusterRef`` the operator's configuration does not know, goes to ``refuse`` with
    every problem named and the tick ends there (``None``). ``refuse_unknown_cluster=False`` ends it silently, for a
    kind that has already said so for this generation.
    """
    try:
        parsed = parse(spec)
    except ValidationError as exc:
        refuse(spec_problems(exc))
        return None
    try:
        kafka = kafka_of(parsed.cluster_ref)
    except KeyError as exc:
        if refuse_unknown_cluster:
            refuse([Problem("spec.clusterRef", "UnknownCluster", str(exc.args[0]))])
        return None
    return parsed, kafka
