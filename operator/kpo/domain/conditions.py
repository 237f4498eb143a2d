"""Status conditions in the Kubernetes / kstatus shape.

``Ready`` is True only at success, so ``kubectl wait --for=condition=Ready``, Flux health checks and Argo CD all work
unchanged; ``Progressing`` is True while kpo works; ``Stalled`` is True when kpo cannot go on without the user
(invalid input, a refusal, a conflict). ``lastTransitionTime`` changes only when a condition's status changes, as the
API conventions require.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kpo.domain.clock import rfc3339

READY = "Ready"
PROGRESSING = "Progressing"
STALLED = "Stalled"


@dataclass(frozen=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str
    last_transition_time: str
    observed_generation: int

    def to_status(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
            "observedGeneration": self.observed_generation,
        }

    @classmethod
    def from_status(cls, data: Mapping[str, Any]) -> Condition:
        return cls(
            type=str(data.get("type", "")),
            status=str(data.get("status", "Unknown")),
            reason=str(data.get("reason", "")),
            message=str(data.get("message", "")),
            last_transition_time=str(data.get("lastTransitionTime", "")),
            observed_generation=int(data.get("observedGeneration", 0) or 0),
        )


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event to post about a resource: every transition and every refusal gets one."""

    type: str  # Normal | Warning
    reason: str
    message: str


class IllegalTransitionError(RuntimeError):
    """A life cycle decided a phase its transition map does not allow: a bug in kpo, never the user's input."""


def check_transition(transitions: Mapping[Any, Collection[Any]], before: StrEnum, after: StrEnum) -> None:
    """Raise unless ``before -> after`` is on the life cycle's diagram (its ``TRANSITIONS`` map). A raise, not an
    ``assert``, so the guard holds under ``python -O`` too, as Cruise Control's executor checks its task states."""
    if after not in transitions.get(before, ()):
        raise IllegalTransitionError(f"illegal transition {before.value} -> {after.value}")


def transition_event(before: str, after: str, reason: str, message: str, *, warning: bool) -> Event:
    """The Event of a decision: "Before -> After: message" when the phase changes, the message alone when only the
    reason does; a Warning for what the user must look at (a failure, a refusal), else Normal."""
    prefix = f"{before} -> {after}: " if before != after else ""
    return Event("Warning" if warning else "Normal", reason, prefix + message)


@dataclass(frozen=True)
class ConditionUpdate:
    """What a life cycle wants a condition to say now; ``merge`` decides the transition time."""

    type: str
    status: bool
    reason: str
    message: str


def merge(existing: Iterable[Mapping[str, Any]], updates: Iterable[ConditionUpdate], generation: int,
          now: dt.datetime) -> list[dict[str, Any]]:
    """Apply ``updates`` to ``existing`` conditions, keeping ``lastTransitionTime`` when the status did not change."""
    by_type = {c.type: c for c in (Condition.from_status(e) for e in existing)}
    for update in updates:
        status = "True" if update.status else "False"
        previous = by_type.get(update.type)
        since = previous.last_transition_time if previous is not None and previous.status == status else rfc3339(now)
        by_type[update.type] = Condition(update.type, status, update.reason, update.message, since, generation)
    order = {READY: 0, PROGRESSING: 1, STALLED: 2}
    return [c.to_status() for c in sorted(by_type.values(), key=lambda c: (order.get(c.type, 9), c.type))]


def kstatus(*, ready: bool, progressing: bool, stalled: bool, reason: str, message: str) -> list[ConditionUpdate]:
    """The three kstatus conditions at once, all with the same reason and message."""
    return [
        ConditionUpdate(READY, ready, reason, message),
        ConditionUpdate(PROGRESSING, progressing, reason, message),
        ConditionUpdate(STALLED, stalled, reason, message),
    ]
