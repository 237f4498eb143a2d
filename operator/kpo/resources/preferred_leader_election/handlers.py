"""Kopf wiring for PreferredLeaderElection — the only module of this kind that knows Kopf.

One timer reconciles every ``pollIntervalSeconds``: it notices a new or changed spec, a schedule whose time has come
and a PartitionReassignment (named in ``after``) that has finished, none of which Kafka or Kubernetes would announce
as an event on this resource. A finished election has no timer at all until its spec changes; a tick waiting for its
schedule reads nothing but the clock. Nothing in Kafka belongs to an election once it has run, so deleting one only
drops it from the metrics (an optional handler: it adds no finalizer of its own).
"""

from __future__ import annotations

from typing import Any

import kopf
from kubernetes import client
from kubernetes.client.exceptions import ApiException

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
from kpo.resources.preferred_leader_election import reconciler
from kpo.resources.preferred_leader_election.lifecycle import TERMINAL, UNKNOWN_REASSIGNMENT, Phase, Reassignment
from kpo.resources.preferred_leader_election.spec import intent_of, memory_of, parse_spec
from kpo.runtime import OperatorContext

PLURAL = "preferredleaderelections"
REASSIGNMENTS = "partitionreassignments"


def _context(memo: Any) -> OperatorContext:
    context = memo["context"]
    assert isinstance(context, OperatorContext)
    return context


def read_reassignment(api: client.ApiClient, namespace: str, name: str) -> Reassignment:
    """The PartitionReassignment an election waits for, as the Kubernetes API reports it now."""
    try:
        found: Any = client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, REASSIGNMENTS, name)
    except ApiException as exc:
        if exc.status == 404:
            return Reassignment(name=name, found=False)
        raise kopf.TemporaryError(f"cannot read PartitionReassignment {name!r}: {exc.reason}", delay=5) from exc
    status = found.get("status") or {}
    generation = (found.get("metadata") or {}).get("generation")
    return Reassignment(name=name, found=True, phase=status.get("phase"),
                        current=status.get("observedGeneration") == generation)


def preferredleaderelection_polls(*, meta: kopf.Meta, status: kopf.Status, **_: Any) -> bool:
    """Whether the timer runs at all: not once the election is terminal for its current spec (Kopf evaluates this
    on every change of the resource, so a spec change starts the timer again). An election Invalid only because the
    PartitionReassignment it names does not exist yet keeps polling: that resource's creation is not an event here."""
    memory = memory_of(status)
    waits_for_reassignment = memory.phase is Phase.INVALID and memory.reason == UNKNOWN_REASSIGNMENT
    return not (memory.phase in TERMINAL and not waits_for_reassignment
                and memory.observed_generation == int(meta.get("generation") or 1))


def preferredleaderelection_tick(*, memo: Any, **kwargs: Any) -> None:
    _context(memo).api_outage.run(lambda: _tick(memo=memo, **kwargs))


def _tick(*, body: kopf.Body, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, uid: str, patch: kopf.Patch,
          memo: Any, logger: Logger, **_: Any) -> None:
    if meta.get("deletionTimestamp"):
        return
    context = _context(memo)
    generation = int(meta.get("generation") or 1)
    cluster_label = context.cluster_name(spec.get("clusterRef"))
    with context.resource_lock(uid), metrics.reconcile("PreferredLeaderElection", uid, status=status, patch=patch,
                                                       cluster=cluster_label) as tick_metrics:
        inputs = parse_and_connect(
            spec, parse_spec, context.kafka,
            lambda problems: post_outcome(
                body, patch, reconciler.invalid_outcome(status, generation, problems, reconciler.utcnow())))
        if inputs is None:
            return
        parsed, kafka = inputs
        namespace = meta["namespace"]
        outcome: reconciler.TickOutcome | Outcome | None = None
        with kafka_refusals_retried(logger) as refused:
            outcome = reconciler.tick(
                status=status,
                intent=intent_of(parsed, generation),
                memory=memory_of(status),
                kafka=kafka,
                read_after=lambda name: read_reassignment(context.api, namespace, name),
                resource=f"{namespace}/{meta['name']}",
            )
        if refused.refusal is not None:
            outcome = not_authorized_outcome(status, generation, refused.refusal, now_rfc3339())
        tick_metrics.settle(events=outcome.events if outcome else ())
        if lost_kafka(outcome):
            context.forget_kafka(parsed.cluster_ref)
        post_outcome(body, patch, outcome)


def preferredleaderelection_delete(*, uid: str, **_: Any) -> None:
    metrics.forget(uid)


def register(registry: kopf.OperatorRegistry, poll_interval_seconds: float) -> None:
    kopf.timer(GROUP, VERSION, PLURAL, id="preferredleaderelection_tick", interval=poll_interval_seconds,
               when=preferredleaderelection_polls, registry=registry)(preferredleaderelection_tick)
    kopf.on.delete(GROUP, VERSION, PLURAL, id="preferredleaderelection_delete", optional=True,
                   registry=registry)(preferredleaderelection_delete)
