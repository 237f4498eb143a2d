"""How a tick of any kind ends: one outcome type, and the three endings every kind shares.

Every kind's reconciler returns an :class:`Outcome` (the status fields to write, the Events to post) or ``None``
(nothing to write). Three endings do not depend on the kind, so they are written once here, and each is said once,
not once per tick:

- **Invalid**: the spec fails the API models (the CRD schema should have refused it first) or names a cluster the
  operator does not know. Every problem is named; nothing is sent to Kafka.
- **Kafka unavailable**: the phase stays, Progressing says kpo retries (a refused login also sets Stalled), one Event
  per outage, and the cached client is dropped so the next tick reconnects.
- **Not authorized**: Kafka refused a request for want of an ACL. Failed for this generation with the ACL named:
  retrying cannot help until someone grants it.

Nothing here knows Kopf; :mod:`kpo.resources.shell` posts what these return.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from kpo.domain import access
from kpo.domain import conditions as cond
from kpo.domain.conditions import Event
from kpo.domain.model import KafkaRefusal, Replicas, TopicPartition
from kpo.domain.problems import Problem, summarize

#: The Event and condition reason of a tick that lost its connection to Kafka (it reconnects on the next tick).
KAFKA_UNAVAILABLE = "KafkaUnavailable"
INVALID = "Invalid"
#: Every kind's phase before anything is known (the same value in each API model).
PENDING = "Pending"

Decided = TypeVar("Decided")
Seen = TypeVar("Seen")
Intended = TypeVar("Intended")
Remembered = TypeVar("Remembered")


@dataclass(frozen=True)
class Inputs(Generic[Intended, Remembered]):
    """What every kind's tick decides from, in one shape: ``reconciler.tick(inputs, ports)``.

    The object as read (its status is what the tick writes over), the spec as the life cycle's intent, the status as
    its memory, and the shell's time for the tick; each kind's ``Ports`` holds the reads and writes it may make.
    """

    body: Mapping[str, Any]
    intent: Intended
    memory: Remembered
    now: dt.datetime

    @property
    def status(self) -> Mapping[str, Any]:
        return self.body.get("status") or {}

    @property
    def resource(self) -> str:
        """``namespace/name``, for log lines."""
        meta = self.body.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class AsksForMore(Protocol):
    """A decision that may ask for more observation before it can be made (each kind has its own ``Need`` enum)."""

    @property
    def needs(self) -> frozenset[Any]: ...


Asking = TypeVar("Asking", bound=AsksForMore)


def decide_observing(decide: Callable[[Seen], Asking], observed: Seen,
                     observe: Mapping[Any, Callable[[Seen], Seen]]) -> Asking:
    """The one way a life cycle asks for more observation: ``decide`` on what has been observed; while the decision
    names ``needs``, observe each of them once (cheapest first is the life cycle's order) and decide again.

    Each need is observed at most once, so this ends; a decision still needing something it has been given is a bug
    in the life cycle and fails loudly.
    """
    decision = decide(observed)
    given: set[Any] = set()
    while decision.needs:
        wanted = [need for need in decision.needs if need not in given]
        assert wanted, f"still needs {set(decision.needs)} after observing it"
        for need in wanted:
            observed = observe[need](observed)
            given.add(need)
        decision = decide(observed)
    return decision


@dataclass
class Outcome(Generic[Decided]):
    """A tick's result: the status fields to write (``None`` removes one: a JSON merge patch) and the Events to post.

    ``decision`` is the kind's own decision, for tests and logs. ``lost_kafka`` drops the cached client, so the next
    tick reconnects. ``originals`` are the original replicas on record (PartitionReassignment), for the per-broker
    metrics.
    """

    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    decision: Decided | None = None
    lost_kafka: bool = False
    originals: Mapping[TopicPartition, Replicas] = field(default_factory=dict)


class RetryLater(Exception):  # noqa: N818 - reads as what it asks for
    """The tick or the deletion cannot finish yet: try again after ``delay`` seconds (Kopf's TemporaryError)."""

    def __init__(self, message: str, delay: float, *, lost_kafka: bool = False) -> None:
        super().__init__(message)
        self.delay = delay
        self.lost_kafka = lost_kafka


def invalid_outcome(status: Mapping[str, Any], generation: int, problems: list[Problem],
                    now: dt.datetime) -> Outcome[Any] | None:
    """Invalid for this generation, with every problem named, and one Event (``None``: already said)."""
    if status.get("phase") == INVALID and status.get("observedGeneration") == generation:
        return None
    message = summarize(problems)
    reason = problems[0].reason if problems else "InvalidSpec"
    conditions = cond.merge(status.get("conditions") or [],
                            cond.kstatus(ready=False, progressing=False, stalled=True, reason=reason,
                                         message=message), generation, now)
    return Outcome(status={"phase": INVALID, "observedGeneration": generation, "conditions": conditions},
                   events=[Event("Warning", reason, message)])


def unavailable_outcome(status: Mapping[str, Any], message: str, now: dt.datetime,
                        reason: str = KAFKA_UNAVAILABLE) -> Outcome[Any]:
    """Kafka could not be reached (or refused the login): the phase stays, the conditions say why, a later tick
    tries again. One Event per outage: while the conditions already carry this reason, none. A resource that never
    had a phase gets ``Pending``, what its absence means, so that ``kubectl get`` does not show an empty column."""
    previous = status.get("conditions") or []
    updates, news = access.unreachable_updates(previous, reason, message)
    conditions = cond.merge(previous, updates, int(status.get("observedGeneration") or 0), now)
    return Outcome(status={"conditions": conditions, **({} if status.get("phase") else {"phase": PENDING})},
                   events=[Event("Warning", reason, f"will retry: {message}")] if news else [],
                   lost_kafka=reason == KAFKA_UNAVAILABLE)


def not_authorized_outcome(status: Mapping[str, Any], generation: int, refusal: KafkaRefusal,
                           now: dt.datetime) -> Outcome[Any] | None:
    """A request Kafka refused for want of an ACL: Failed for this generation, the request and the ACL named, and
    one Event (``None`` when the status already says exactly this). Nothing was sent to Kafka after the refusal."""
    message = (f"{refusal.code}: {refusal.message}; nothing further was sent to Kafka. Grant the ACL, then change "
               "the spec (or re-create the resource) to try again")
    conditions = cond.merge(status.get("conditions") or [],
                            cond.kstatus(ready=False, progressing=False, stalled=True, reason=access.NOT_AUTHORIZED,
                                         message=message), generation, now)
    new = {"phase": "Failed", "observedGeneration": generation, "conditions": conditions}
    if all(status.get(k) == v for k, v in new.items()):
        return None
    return Outcome(status=new, events=[Event("Warning", access.NOT_AUTHORIZED, message)])


def topic_missing_since(previous: Mapping[str, Any], since: dt.datetime | None) -> dict[str, Any]:
    """The status field of a wait for a missing topic (:mod:`kpo.domain.topic_wait`): set while it lasts, removed
    (null, a merge patch) by the tick that ends it, untouched otherwise."""
    return {"topic_missing_since": since} if since is not None or previous.get("topicMissingSince") else {}


def unchanged(previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether writing ``new`` would change nothing in ``previous`` (so the tick writes nothing)."""
    return all(previous.get(key) == value for key, value in new.items())


def condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The condition of type ``kind`` in a status, or an empty mapping."""
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})
