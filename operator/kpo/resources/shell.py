"""The one tick shell: how every kind is wired to Kopf, written once.

Each kind describes itself as a :class:`Kind` — its plural, how to parse its spec, when it is at rest, how to
reconcile one :class:`Tick`, and (for a kind that owns something in Kafka) how to let go of it on deletion — and
:func:`register` turns that into Kopf handlers with explicit ids (``<kind>_tick``, ``<kind>_delete``,
``<kind>_claims``, and ``<kind>_event``, which counts every live resource in the metrics). Everything around the
kind's own reconcile is the same for all of them, in this order:

1. a resource being deleted is left to the deletion handler; a per-resource lock keeps timer and deletion apart;
2. the tick is timed and its outcome recorded in the metrics;
3. the spec goes through the API models and ``clusterRef`` through the operator's configuration: a spec they refuse
   is Invalid, once per generation (:func:`~kpo.resources.outcomes.invalid_outcome`);
4. the kind reconciles; a request Kafka refused for want of an ACL ends in Failed/NotAuthorized, any other refusal
   is retried on Kopf's backoff, a lost connection drops the cached client;
5. the status is checked against the CRD schema and etcd's size limit (:func:`status_refusal`), the tick writes it
   itself (a merge patch of the status subresource, :mod:`kpo.k8s.status`; not Kopf after the handler), and the
   Events are posted once it is written.

Every tick runs through the operator's ApiOutage, so while the Kubernetes API is down ticks probe it with backoff
instead of failing one by one, and a namespace being deleted ends a tick quietly. The status write is inside that too:
left to Kopf, a write that met an outage sat in Kopf's retries for minutes, no tick ran meanwhile, and the outage was
neither said nor probed (a tick that watches its moves between polls, :mod:`kpo.domain.refill`, spends most of the
poll interval between its last read and its write, so an outage mostly began there).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, cast

import kopf
from pydantic import ValidationError

from kpo import metrics
from kpo.api import GROUP, VERSION, ResourceKind
from kpo.domain import access
from kpo.domain.clock import rfc3339, utcnow
from kpo.domain.conditions import STALLED, Event
from kpo.domain.model import KafkaRefusal
from kpo.domain.problems import Problem
from kpo.k8s.outage import ApiUnavailableError, namespace_terminating
from kpo.k8s.status import StaleStatus
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable
from kpo.resources.outcomes import Outcome, RetryLater, invalid_outcome, not_authorized_outcome
from kpo.runtime import OperatorContext

Logger = logging.Logger | logging.LoggerAdapter[Any]
log = logging.getLogger(__name__)


class _ClusterSpec(Protocol):
    @property
    def cluster_ref(self) -> str | None: ...


Spec = TypeVar("Spec", bound=_ClusterSpec)


@dataclass(frozen=True)
class Tick(Generic[Spec]):
    """What a kind's reconcile gets: the resource, its parsed spec, the Kafka cluster it names, the clock."""

    body: Mapping[str, Any]
    spec: Spec
    kafka: KafkaAdmin
    context: OperatorContext
    now: datetime
    #: The kind's own Kopf index (:attr:`Kind.index`), if it declares one.
    index: Mapping[str, Any] = field(default_factory=dict)
    #: The object as Kopf keeps it, updated as watch events arrive (``body`` may be the operator's newer copy).
    live: Mapping[str, Any] | None = None

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def generation(self) -> int:
        return int(self.body["metadata"].get("generation") or 1)

    @property
    def status(self) -> Mapping[str, Any]:
        return self.body.get("status") or {}


@dataclass(frozen=True)
class Kind(Generic[Spec]):
    """One custom resource kind, as the shell needs to know it."""

    #: The kind's descriptor (kpo.api): names, plural and status model, the one place they are written.
    resource: ResourceKind
    parse: Callable[[Mapping[str, Any]], Spec]
    #: Whether the timer may stop: terminal for its current generation and nothing left to follow (generation, status).
    at_rest: Callable[[int, Mapping[str, Any]], bool]
    reconcile: Callable[[Tick[Spec]], Outcome[Any] | None]
    #: After a request refused for want of an ACL: what else the Failed status must say (e.g. throttles left).
    refused: Callable[[Tick[Spec], Outcome[Any]], Outcome[Any]] | None = None
    #: On deletion, let go of what the resource owns in Kafka (a finalizer holds it until this returns) and say what
    #: was done; ``None``: it owns nothing, so deletion only drops it from the metrics and adds no finalizer.
    release: Callable[[Tick[Spec]], Sequence[Event]] | None = None
    #: A Kopf index over every resource of this kind: (handler, what the tick and deletion see as ``Tick.index``).
    index: Callable[..., dict[str, Any]] | None = None

    @property
    def name(self) -> str:
        """``PartitionReassignment``: the metrics label."""
        return self.resource.kind

    @property
    def plural(self) -> str:
        return self.resource.plural

    @property
    def handler_prefix(self) -> str:
        return self.resource.singular


# ----------------------------------------------------------------------------------------------- the status write

#: What one object may take in etcd (its default --max-request-bytes is 1.5 MiB), less room for the request's framing.
OBJECT_BUDGET_BYTES = 1_500_000
#: The Event reason, and condition reason, for a status the API server would refuse.
STATUS_REFUSED = "StatusRefused"
#: Characters of each condition message kept in the fallback status.
FALLBACK_MESSAGE_CHARS = 1024


def status_refusal(kind: ResourceKind, body: Mapping[str, Any], status: Mapping[str, Any]) -> str | None:
    """Why the API server would refuse ``status`` as a merge patch of ``body``'s status, or None if it would not.

    A refused write fails the tick again on every poll and nobody would be told why. Two refusals are checked
    beforehand: what the CRD schema refuses (the status models are the schema's source, so validating the merged
    status with them gives the server's answer: a message over 32 KiB, a value out of range) and an object that
    would not fit one etcd write.
    """
    merged = {k: v for k, v in {**(body.get("status") or {}), **status}.items() if v is not None}
    try:
        kind.status.model_validate_json(json.dumps(merged))
    except ValidationError as exc:
        errors = exc.errors()
        first = "; ".join(f"status.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[:3])
        return f"the status fails the CRD schema ({len(errors)} error(s)): {first}"
    size = len(json.dumps({**body, "status": merged}, separators=(",", ":")))
    if size > OBJECT_BUDGET_BYTES:
        return (f"the object with this status would take {size} bytes, over the {OBJECT_BUDGET_BYTES} an etcd write "
                "takes; make the spec smaller (fewer partitions) or split it into several resources")
    return None


def fallback_status(status: Mapping[str, Any], refusal: str) -> dict[str, Any]:
    """The part of a refused status that is always small and valid: the phase, the generation, the conditions
    (messages clipped) and when a missing topic was first seen (the wait for it must end, :mod:`kpo.domain.topic_wait`),
    plus a Stalled condition saying what was refused."""
    conditions = [{**c, "message": str(c.get("message", ""))[:FALLBACK_MESSAGE_CHARS]}
                  for c in status.get("conditions") or [] if c.get("type") != STALLED]
    stalled = {"type": STALLED, "status": "True", "reason": STATUS_REFUSED,
               "message": f"kpo could not write its full status: {refusal}"[:FALLBACK_MESSAGE_CHARS],
               "lastTransitionTime": rfc3339(utcnow())}
    if "observedGeneration" in status:
        stalled["observedGeneration"] = status["observedGeneration"]
    kept = {k: status[k] for k in ("phase", "observedGeneration", "topicMissingSince") if k in status}
    return {**kept, "conditions": [*conditions, stalled]}


def _refusal_shown(body: Mapping[str, Any]) -> bool:
    """The status already says that its full version was refused (Stalled, ``StatusRefused``)."""
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c.get("type") == STALLED and c.get("reason") == STATUS_REFUSED for c in conditions)


#: Writes a resource's status as a merge patch of its status subresource; False: the resource is gone.
StatusWriter = Callable[[Mapping[str, Any]], bool]


def post_outcome(kind: ResourceKind, body: Mapping[str, Any], write: StatusWriter, outcome: Outcome[Any] | None
                 ) -> None:
    """Write a tick's status and post its Events (only once the status is written); None: nothing.

    A status the API server would refuse is replaced by its small, valid part and a ``StatusRefused`` Stalled
    condition and Warning Event (see :func:`status_refusal`), so the tick always ends in a visible status; the Event
    and the log line once, not again on each tick of a phase that goes on ticking (Pending waiting for a topic) while
    the status already says so.
    """
    if outcome is None:
        return
    status: Mapping[str, Any] = outcome.status
    events = list(outcome.events)
    refusal = status_refusal(kind, body, status)
    if refusal is not None:
        if not _refusal_shown(body):
            meta = body.get("metadata") or {}
            log.warning("%s/%s: %s", meta.get("namespace"), meta.get("name"), refusal)
            events.append(Event("Warning", STATUS_REFUSED, f"kpo could not write its full status: {refusal}"))
        status = fallback_status(status, refusal)
    if not write(status):
        return  # the resource is gone: nothing to say
    for event in events:
        kopf.event(cast(kopf.Body, body), type=event.type, reason=event.reason, message=event.message[:1024])


# ---------------------------------------------------------------------------------------------- spec and cluster


def spec_problems(error: ValidationError) -> list[Problem]:
    """What the API models refused in a spec (the CRD schema should have refused it first), one Problem a field."""
    return [Problem("spec." + ".".join(str(p) for p in e["loc"]), "InvalidSpec", e["msg"]) for e in error.errors()]


def parse_and_connect(spec: Mapping[str, Any], parse: Callable[[Mapping[str, Any]], Spec],
                      kafka_of: Callable[[str | None], KafkaAdmin], refuse: Callable[[list[Problem]], None], *,
                      refuse_unknown_cluster: bool = True) -> tuple[Spec, KafkaAdmin] | None:
    """A tick's first two steps: the spec as the API models read it, and the Kafka cluster it names.

    A spec the models reject, or a ``clusterRef`` the operator's configuration does not know, goes to ``refuse`` with
    every problem named and the tick ends there (``None``). ``refuse_unknown_cluster=False`` ends it silently: a spec
    already accepted for its generation is not made Invalid after the fact by an operator restarted without that
    cluster.
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
        else:
            _left_alone(str(spec.get("clusterRef")), str(exc.args[0]))
        return None
    return parsed, kafka


@functools.lru_cache(maxsize=256)
def _left_alone(cluster_ref: str, reason: str) -> None:
    """Said once per cluster and reason, not on every tick of every resource that names it."""
    log.warning("clusterRef %s: %s; resources already accepted for it are left as they are", cluster_ref, reason)


@dataclass
class Refused:
    """What :func:`kafka_refusals_retried` caught for want of an ACL, if anything."""

    refusal: KafkaRefusal | None = None


@contextmanager
def kafka_refusals_retried(logger: Logger) -> Iterator[Refused]:
    """A request Kafka refused (a broker that is not ready) ends the tick and is retried on Kopf's backoff. One
    refused for want of an ACL is kept in the yielded :class:`Refused` instead: retrying cannot help until someone
    grants the ACL."""
    refused = Refused()
    try:
        yield refused
    except KafkaRequestRefused as exc:
        if access.is_authorization(exc.refusal.code):
            logger.warning("Kafka did not authorize a request: %s", exc)
            refused.refusal = exc.refusal
            return
        logger.warning("Kafka refused a request: %s", exc)
        raise kopf.TemporaryError(f"Kafka refused: {exc}", delay=10) from exc


# --------------------------------------------------------------------------------------------------- the handlers


def _context(memo: Any) -> OperatorContext:
    context = memo["context"]
    assert isinstance(context, OperatorContext)
    return context


def _index(kind: Kind[Any], kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    found = kwargs.get(f"{kind.handler_prefix}_claims") if kind.index is not None else None
    return found if found is not None else {}


def tick(kind: Kind[Spec], *, body: kopf.Body, uid: str, memo: Any, logger: Logger,
         **kwargs: Any) -> None:
    """One timer tick of ``kind`` (see the module docstring for the order of its steps)."""
    if body["metadata"].get("deletionTimestamp"):
        return
    context = _context(memo)
    live = body
    # The status this operator wrote last, when Kopf's copy is older (its watch lags behind the operator's writes).
    current = context.current(uid, live)
    meta, spec, status = current["metadata"], current.get("spec") or {}, current.get("status") or {}
    generation = int(meta.get("generation") or 1)
    now = utcnow()

    # What the tick wrote, as the metrics read it (Kopf's own patch stays empty: the tick writes the status itself).
    written: dict[str, Any] = {}

    def write(new: Mapping[str, Any]) -> bool:
        if not context.write_status(kind.plural, current, new):
            return False
        written["status"] = {**(written.get("status") or {}), **new}
        return True

    def run() -> None:
        try:
            decide_and_write()
        except StaleStatus as exc:
            # Decided on an older copy of the object (a spec change, or a write by someone else, came in between):
            # nothing is written and no Event posted; the next tick decides again on the newer copy.
            logger.debug("not written: %s", exc)

    def decide_and_write() -> None:
        if kind.at_rest(generation, status):
            return  # the one rule for "nothing to do": the same the timer's filter asks (Kopf may race it)
        with context.resource_lock(uid), metrics.reconcile(kind.resource, uid, status=status, patch=written,
                                                           cluster=context.cluster_name(spec.get("clusterRef"))
                                                           ) as tick_metrics:
            inputs = parse_and_connect(
                spec, kind.parse, context.kafka,
                lambda problems: post_outcome(kind.resource, current, write,
                                              invalid_outcome(status, generation, problems, now)),
                refuse_unknown_cluster=status.get("observedGeneration") != generation)
            if inputs is None:
                return
            parsed, kafka = inputs
            ticked = Tick(body=current, spec=parsed, kafka=kafka, context=context, now=now,
                          index=_index(kind, kwargs), live=live)
            outcome: Outcome[Any] | None = None
            with kafka_refusals_retried(logger) as refused:
                try:
                    outcome = kind.reconcile(ticked)
                except RetryLater as exc:
                    raise kopf.TemporaryError(str(exc), delay=exc.delay) from exc
            if refused.refusal is not None:
                outcome = not_authorized_outcome(status, generation, refused.refusal, now)
                if outcome is not None and kind.refused is not None:
                    outcome = kind.refused(ticked, outcome)
            tick_metrics.settle(outcome.originals if outcome else {}, events=outcome.events if outcome else ())
            if outcome is not None and outcome.lost_kafka:
                context.forget_kafka(parsed.cluster_ref)
            post_outcome(kind.resource, current, write, outcome)

    try:
        context.api_outage.run(run)
    except Exception as exc:
        if not namespace_terminating(exc):
            raise
        logger.info("its namespace is being deleted; the tick writes nothing more")


def delete(kind: Kind[Spec], *, body: kopf.Body, uid: str, memo: Any, **kwargs: Any) -> None:
    """Deletion: drop the resource from the metrics and, for a kind that owns something in Kafka, let go of it."""
    metrics.forget(uid)
    _context(memo).forget_written(uid)
    if kind.release is None:
        return
    context = _context(memo)
    with context.resource_lock(uid):
        try:
            parsed = kind.parse(body.get("spec") or {})
            kafka = context.kafka(parsed.cluster_ref)
        except (ValidationError, KeyError):
            return  # nothing can have been started for a spec that never parsed or a cluster that is not configured
        except Exception as exc:  # e.g. its credentials' Secret is gone
            # Letting go may not need Kafka at all (deletionPolicy Orphan, nothing ever sent): only a call fails.
            kafka = cast(KafkaAdmin, _Unreachable(f"cannot connect to Kafka: {exc}"))
        release = kind.release
        try:
            events = context.api_outage.call(lambda: release(Tick(body=body, spec=parsed, kafka=kafka,
                                                                  context=context, now=utcnow(),
                                                                  index=_index(kind, kwargs))))
        except RetryLater as exc:
            if exc.lost_kafka:
                context.forget_kafka(parsed.cluster_ref)
            raise kopf.TemporaryError(str(exc), delay=exc.delay) from exc
        except ApiUnavailableError as exc:  # said once by the outage; Kopf keeps the finalizer and retries the release
            # Kopf logs this message with each retry of each deletion: it says what waits, not the outage again.
            raise kopf.TemporaryError(f"the release waits for the API server to answer; next try in {exc.delay:.0f} s",
                                      delay=exc.delay) from None
    for event in events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message[:1024])


def seen(kind: Kind[Any], *, body: kopf.Body, uid: str, **kwargs: Any) -> None:
    """Every watch event of ``kind``, the listing at start-up included: the resource counts in ``kpo_resources`` by
    its phase until the DELETED event. Its ticks cannot tell: a resource at rest has no timer, so it never ticks."""
    if kwargs.get("type") == "DELETED":
        metrics.forget(uid)
    else:
        metrics.watched(kind.resource, uid, body.get("status") or {})


class _Unreachable:
    """A Kafka client that could not be made: every call says so, as a lost connection would."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __getattr__(self, name: str) -> Any:
        def unavailable(*_args: Any, **_kwargs: Any) -> Any:
            raise KafkaUnavailable(self.why)
        return unavailable


def register(kind: Kind[Any], registry: kopf.OperatorRegistry, poll_interval_seconds: float, *,
             sharp: bool = False) -> None:
    """The Kopf handlers of ``kind``: its index (if any), its timer, its deletion handler, and its watch events (for
    the metrics)."""
    prefix = kind.handler_prefix

    def polls(*, meta: kopf.Meta, status: kopf.Status, **_: Any) -> bool:
        return not kind.at_rest(int(meta.get("generation") or 1), status)

    def on_tick(**kwargs: Any) -> None:
        tick(kind, **kwargs)

    def on_delete(**kwargs: Any) -> None:
        delete(kind, **kwargs)

    # Async, so the event loop runs it at once: a sync handler would wait for one of the few executor threads, which
    # the ticks hold for up to a poll interval each.
    async def on_event(**kwargs: Any) -> None:
        seen(kind, **kwargs)

    if kind.index is not None:
        kopf.index(GROUP, VERSION, kind.plural, id=f"{prefix}_claims", registry=registry)(kind.index)
    # Sharp (with refill between polls on): ticks start on a fixed grid of the poll interval, not a poll interval after
    # the previous one ended. A tick that watches its moves until about the next poll (kpo.domain.refill) then hands
    # over to the next one without a gap, and a short tick is followed exactly as before.
    kopf.timer(GROUP, VERSION, kind.plural, id=f"{prefix}_tick", interval=poll_interval_seconds, sharp=sharp,
               backoff=max(5.0, 3 * poll_interval_seconds), when=polls, registry=registry)(on_tick)
    kopf.on.delete(GROUP, VERSION, kind.plural, id=f"{prefix}_delete", optional=kind.release is None,
                   registry=registry)(on_delete)
    kopf.on.event(GROUP, VERSION, kind.plural, id=f"{prefix}_event", registry=registry)(on_event)
