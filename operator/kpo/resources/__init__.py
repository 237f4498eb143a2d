"""One folder per custom resource: ``spec.py`` (parse and validate), ``lifecycle.py`` (phases and decisions, pure),
``handlers.py`` (the only Kopf wiring for that kind). What every kind's wiring shares lives here."""

from collections.abc import Iterable, Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from kpo.domain.conditions import Event
from kpo.domain.reassignment import Problem


def spec_problems(error: ValidationError) -> list[Problem]:
    """What the API models refused in a spec (the CRD schema should have refused it first), one Problem a field."""
    return [Problem("spec." + ".".join(str(p) for p in e["loc"]), "InvalidSpec", e["msg"]) for e in error.errors()]


def post_outcome(body: kopf.Body, patch: kopf.Patch, status: Mapping[str, Any], events: Iterable[Event]) -> None:
    """Write a tick's status (Kopf patches it through the status subresource) and post its Events."""
    patch.status.update(status)
    for event in events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message[:1024])
