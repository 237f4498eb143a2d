"""One folder per custom resource: ``spec.py`` (parse and validate), ``lifecycle.py`` (phases and decisions, pure),
``handlers.py`` (the only Kopf wiring for that kind). What every kind's wiring shares lives here."""

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import kopf
from pydantic import ValidationError

from kpo.api import kind_named
from kpo.domain import access
from kpo.domain import conditions as cond
from kpo.domain.conditions import STALLED, Event, now_rfc3339
from kpo.domain.model import KafkaRefusal
from kpo.domain.problems import Problem
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused

Logger = logging.Logger | logging.LoggerAdapter[Any]
log = logging.getLogger(__name__)
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


#: What one object may take in etcd (its default --max-request-bytes is 1.5 MiB), less room for the request's framing.
OBJECT_BUDGET_BYTES = 1_500_000
#: The Event reason, and condition reason, for a status the API server would refuse.
STATUS_REFUSED = "StatusRefused"
#: Characters of each condition message kept in the fallback status.
FALLBACK_MESSAGE_CHARS = 1024


def status_refusal(body: Mapping[str, Any], status: Mapping[str, Any]) -> str | None:
    """Why the API server would refuse ``status`` as a merge patch of ``body``'s status, or None if it would not.

    Kopf applies the patch after the handler returns; a refused patch raises inside Kopf's timer loop, which ends
    the timer, so the resource would never be reconciled again and nobody would be told. Two refusals are checked
    beforehand: what the CRD schema refuses (the status models are the schema's source, so validating the merged
    status with them gives the server's answer: a message over 32 KiB, a value out of range) and an object that
    would not fit one etcd write.
    """
    merged = {k: v for k, v in {**(body.get("status") or {}), **status}.items() if v is not None}
    try:
        kind_named(str(body.get("kind"))).status.model_validate_json(json.dumps(merged))
    except ValidationError as exc:
        errors = exc.errors()
        first = "; ".join(f"status.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[:3])
        return f"the status fails the CRD schema ({len(errors)} error(s)): {first}"
    except KeyError:
        pass  # not a kpo kind (tests' bodies): nothing to check against
    size = len(json.dumps({**body, "status": merged}, separators=(",", ":")))
    if size > OBJECT_BUDGET_BYTES:
        return (f"the object with this status would take {size} bytes, over the {OBJECT_BUDGET_BYTES} an etcd write "
                "takes; make the spec smaller (fewer partitions) or split it into several resources")
    return None


def _fallback(status: Mapping[str, Any], refusal: str) -> dict[str, Any]:
    """The part of a refused status that is always small and valid: the phase, the generation and the conditions
    (messages clipped), plus a Stalled condition saying what was refused."""
    conditions = [{**c, "message": str(c.get("message", ""))[:FALLBACK_MESSAGE_CHARS]}
                  for c in status.get("conditions") or [] if c.get("type") != STALLED]
    stalled = {"type": STALLED, "status": "True", "reason": STATUS_REFUSED,
               "message": f"kpo could not write its full status: {refusal}"[:FALLBACK_MESSAGE_CHARS],
               "lastTransitionTime": now_rfc3339()}
    if "observedGeneration" in status:
        stalled["observedGeneration"] = status["observedGeneration"]
    kept = {k: status[k] for k in ("phase", "observedGeneration") if k in status}
    return {**kept, "conditions": [*conditions, stalled]}


def post_outcome(body: kopf.Body, patch: kopf.Patch, outcome: TickResult | None) -> None:
    """Write a tick's status (Kopf patches it through the status subresource) and post its Events; None: nothing.

    A status the API server would refuse is replaced by its small, valid part and a ``StatusRefused`` Stalled
    condition and Warning Event (see :func:`status_refusal`), so the tick always ends in a visible status.
    """
    if outcome is None:
        return
    status: Mapping[str, Any] = outcome.status
    events = list(outcome.events)
    refusal = status_refusal(body, status)
    if refusal is not None:
        log.warning("%s/%s: %s", body.get("metadata", {}).get("namespace"), body.get("metadata", {}).get("name"),
                    refusal)
        status = _fallback(status, refusal)
        events.append(Event("Warning", STATUS_REFUSED, f"kpo could not write its full status: {refusal}"))
    patch.status.update(status)
    for event in events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message[:1024])


def lost_kafka(outcome: TickResult | None) -> bool:
    """Whether the tick lost its connection to Kafka, so the cached client should be dropped and rebuilt."""
    return outcome is not None and any(e.reason == KAFKA_UNAVAILABLE for e in outcome.events)


@dataclass
class Outcome:
    """A tick's result that is the same for every kind: the status fields to write and the Events to post."""

    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)


def not_authorized_outcome(status: Mapping[str, Any], generation: int, refusal: KafkaRefusal,
                           now: str) -> Outcome | None:
    """A read Kafka refused for want of an ACL: Failed for this generation, the request and the ACL named, and one
    Event (``None`` when the status already says exactly this). Nothing was sent to Kafka after the refusal."""
    message = (f"{refusal.code}: {refusal.message}; nothing further was sent to Kafka. Grant the ACL, then change "
               "the spec (or re-create the resource) to try again")
    conditions = cond.merge(status.get("conditions") or [],
                            cond.kstatus(ready=False, progressing=False, stalled=True, reason=access.NOT_AUTHORIZED,
                                         message=message), generation, now)
    new = {"phase": "Failed", "observedGeneration": generation, "conditions": conditions}
    if all(status.get(k) == v for k, v in new.items()):
        return None
    return Outcome(status=new, events=[Event("Warning", access.NOT_AUTHORIZED, message)])


@dataclass
class Refused:
    """What :func:`kafka_refusals_retried` caught for want of an ACL, if anything."""

    refusal: KafkaRefusal | None = None


@contextmanager
def kafka_refusals_retried(logger: Logger) -> Iterator[Refused]:
    """A read Kafka refused (a broker that is not ready) ends the tick and is retried on Kopf's backoff. One refused
    for want of an ACL is kept in the yielded :class:`Refused` instead, for :func:`not_authorized_outcome`: retrying
    cannot help until someone grants the ACL."""
    refused = Refused()
    try:
        yield refused
    except KafkaRequestRefused as exc:
        if access.is_authorization(exc.refusal.code):
            logger.warning("Kafka did not authorize a read: %s", exc)
            refused.refusal = exc.refusal
            return
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
