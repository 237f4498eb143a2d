"""One folder per custom resource: ``spec.py`` (parse and validate), ``lifecycle.py`` (phases and decisions, pure),
``handlers.py`` (the only Kopf wiring for that kind). What every kind's wiring shares lives here."""

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

import kopf
from pydantic import ValidationError

from kpo.domain.conditions import Event
from kpo.domain.reassignment import Problem
from kpo.kafka.admin import KafkaAdmin


class _ClusterSpec(Protocol):
    @property
    def cluster_ref(self) -> str | None: ...


ParsedSpec = TypeVar("ParsedSpec", bound=_ClusterSpec)


def spec_problems(error: ValidationError) -> list[Problem]:
    """What the API models refused in a spec (the CRD schema should have refused it first), one Problem a field."""
    return [Problem("spec." + ".".join(str(p) for p in e["loc"]), "InvalidSpec", e["msg"]) for e in error.errors()]


def post_outcome(body: kopf.Body, patch: kopf.Patch, status: Mapping[str, Any], events: Iterable[Event]) -> None:
    """Write a tick's status (Kopf patches it through the status subresource) and post its Events."""
    patch.status.update(status)
    for event in events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message[:1024])


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
