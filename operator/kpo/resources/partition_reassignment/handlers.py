"""Kopf wiring for PartitionReassignment — the only module of this kind that knows Kopf.

Three handlers: an index of every PartitionReassignment's claims (so each one sees the others: conflicts, and the
cluster-wide scheduler), a timer that reconciles every ``pollIntervalSeconds`` (Kafka moves data on its own clock,
so kpo polls it: there is no Kafka event to react to) while the resource is not at rest, and a deletion handler
whose finalizer cancels the moves in flight unless ``deletionPolicy: Orphan``. A per-resource lock keeps the timer
and the deletion handler apart. Every tick goes through the operator's ApiOutage: while the Kubernetes API is down,
ticks probe it with backoff instead of failing one by one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from kpo import metrics
from kpo.api import GROUP, VERSION, PartitionReassignmentSpec
from kpo.domain.claims import Claim, claimed_by_others
from kpo.domain.conditions import now_rfc3339
from kpo.domain.model import TopicPartition
from kpo.domain.proposal import Proposal
from kpo.domain.reassignment import Target
from kpo.domain.scheduling import Execution, Limits, Order, Owner
from kpo.domain.throttle import ThrottleJournal, describe_pending
from kpo.k8s.outage import namespace_terminating
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable
from kpo.resources import (
    Logger,
    Outcome,
    kafka_refusals_retried,
    lost_kafka,
    not_authorized_outcome,
    parse_and_connect,
    post_outcome,
)
from kpo.resources.partition_reassignment import plan_reconciler, reconciler, throttling
from kpo.resources.partition_reassignment.lifecycle import CLAIMING, TERMINAL, Phase
from kpo.resources.partition_reassignment.planning import PlanIntent
from kpo.resources.partition_reassignment.spec import (
    intent_of,
    memory_of,
    parse_spec,
    partition_list,
    phase_of,
    plan_request,
    targets_of,
)
from kpo.runtime import OperatorContext

PLURAL = "partitionreassignments"
log = logging.getLogger(__name__)


def _context(memo: Any) -> OperatorContext:
    context = memo["context"]
    assert isinstance(context, OperatorContext)
    return context


def _claim(meta: Mapping[str, Any], spec: Mapping[str, Any], status: Mapping[str, Any]) -> Claim:
    phase = status.get("phase") or Phase.PENDING.value
    targets = {TopicPartition(str(p["topic"]), int(p["partition"])) for p in spec.get("partitions") or []}
    # A resource that still holds throttles keeps them "live" for the others, whatever its phase.
    throttle = ThrottleJournal.from_json(status.get("throttle"))
    return Claim(key=f"{meta['namespace']}/{meta['name']}", created=str(meta.get("creationTimestamp", "")),
                 partitions=frozenset(targets), in_flight=frozenset(partition_list(status.get("inFlight"))),
                 live=phase in {p.value for p in CLAIMING} or not throttle.empty, throttle=throttle)


def _created(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return datetime.max.replace(tzinfo=UTC)


def _owner(meta: Mapping[str, Any]) -> Owner:
    return Owner(created=_created(str(meta.get("creationTimestamp", ""))), namespace=meta["namespace"],
                 name=meta["name"])


def _owner_of(claim: Claim) -> Owner:
    namespace, _, name = claim.key.partition("/")
    return Owner(created=_created(claim.created), namespace=namespace, name=name)


def partitionreassignment_claims(*, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, memo: Any,
                                 **_: Any) -> dict[str, Claim]:
    cluster = _context(memo).cluster_name(spec.get("clusterRef"))
    return {cluster: _claim(meta, spec, status)}


def partitionreassignment_polls(*, meta: kopf.Meta, status: kopf.Status, **_: Any) -> bool:
    """Whether the timer runs at all. Not for a resource at rest: terminal for its current spec, with no move of
    its own in flight and no throttle to take back. Kopf evaluates this on every change of the resource, so a
    spec change (a new generation) starts the timer again; at rest, nothing is read, not even a ConfigMap."""
    return not reconciler.at_rest(int(meta.get("generation") or 1), memory_of(status, {}), status)


def partitionreassignment_tick(*, memo: Any, **kwargs: Any) -> None:
    try:
        _context(memo).api_outage.run(lambda: _tick(memo=memo, **kwargs))
    except Exception as exc:
        if not namespace_terminating(exc):
            raise
        log.info("%s: its namespace is being deleted; the tick writes nothing more", kwargs.get("meta", {}).get("name"))


def _tick(*, body: kopf.Body, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, uid: str, patch: kopf.Patch,
          memo: Any, logger: Logger, partitionreassignment_claims: kopf.Index[str, Claim] | None = None,
          **_: Any) -> None:
    if meta.get("deletionTimestamp"):
        return
    context = _context(memo)
    generation = int(meta.get("generation") or 1)
    cluster_label = context.cluster_name(spec.get("clusterRef"))
    with context.resource_lock(uid), metrics.reconcile("PartitionReassignment", uid, status=status, patch=patch,
                                                       cluster=cluster_label) as tick_metrics:
        now = now_rfc3339()
        inputs = parse_and_connect(
            spec, parse_spec, context.kafka,
            lambda problems: post_outcome(body, patch, reconciler.invalid_outcome(status, generation, problems, now)),
            refuse_unknown_cluster=status.get("observedGeneration") != generation)
        if inputs is None:
            return
        parsed, kafka = inputs
        intent = intent_of(parsed, generation)
        if parsed.plan is not None:
            planned: reconciler.TickOutcome | Proposal | None = None
            with kafka_refusals_retried(logger) as refused:
                planned = _plan_step(body, parsed, context=context, kafka=kafka, now=now)
            if refused.refusal is not None:
                post_outcome(body, patch, not_authorized_outcome(status, generation, refused.refusal, now))
                return
            if planned is None:
                return
            if isinstance(planned, reconciler.TickOutcome):
                post_outcome(body, patch, planned)
                return
            intent = replace(intent, targets={tp: Target(r) for tp, r in planned.targets.items()})
        originals = context.rollbacks.load(meta["namespace"], meta["name"])
        assert partitionreassignment_claims is not None, "Kopf passes every index to every handler"
        ports = _ports(body, parsed, context, kafka, partitionreassignment_claims)
        outcome: reconciler.TickOutcome | Outcome | None = None
        with kafka_refusals_retried(logger) as refused:
            outcome = reconciler.tick(body=body, intent=intent, memory=memory_of(status, originals), ports=ports,
                                      now=now)
        if refused.refusal is not None:
            outcome = not_authorized_outcome(status, generation, refused.refusal, now)
            left = ports.load_throttle()  # a refused throttle change leaves in the journal only what was applied
            if outcome is not None and not left.empty:
                outcome.status["throttle"] = throttling.to_status(left)  # taken back by the ticks to come
        recorded_now = outcome.decision.save_originals if isinstance(outcome, reconciler.TickOutcome) \
            and outcome.decision is not None else {}
        tick_metrics.settle(originals, events=outcome.events if outcome else (), recorded_now=recorded_now)
        if lost_kafka(outcome):
            context.forget_kafka(parsed.cluster_ref)
        post_outcome(body, patch, outcome)


def _plan_step(body: kopf.Body, parsed: PartitionReassignmentSpec, *, context: OperatorContext, kafka: KafkaAdmin,
               now: str) -> reconciler.TickOutcome | Proposal | None:
    """For ``spec.plan``: a planning tick while planning or awaiting approval; else the approved proposal (or
    ``None`` when a finished resource has nothing to do)."""
    meta, status = body["metadata"], body.get("status") or {}
    generation = int(meta.get("generation") or 1)
    request = plan_request(parsed)
    stored = context.proposals.load(meta["namespace"], meta["name"])
    phase = phase_of(status)
    fresh = phase in TERMINAL and generation != int(status.get("observedGeneration") or 0)
    current = stored[0] if stored is not None and stored[1] == request else None
    if phase in TERMINAL and not fresh:
        return current  # an executed plan may still have throttles to take back; a failed one has nothing
    if phase in (Phase.EXECUTING, Phase.STOPPING, Phase.REVERTING) and current is not None:
        return current
    if phase not in (Phase.PENDING, Phase.PLANNING, Phase.PROPOSED):
        # spec.plan changed while its proposal ran: plan again (moves in flight are followed, not cancelled).
        fresh = True
    approval = parsed.approval
    intent = PlanIntent(generation=generation, request=request,
                        automatic=approval is not None and approval.mode.value == "Automatic",
                        approved_id=approval.proposal_id if approval is not None else None, stop=parsed.stop,
                        allow_internal_topics=parsed.allow_internal_topics,
                        allow_replication_factor_decrease=parsed.allow_replication_factor_decrease)
    return plan_reconciler.plan_tick(body=body, phase=Phase.PENDING if fresh else phase, intent=intent, kafka=kafka,
                                     jobs=context.planning_jobs, proposals=context.proposals, now=now)


def _ports(body: kopf.Body, parsed: PartitionReassignmentSpec, context: OperatorContext, kafka: KafkaAdmin,
           claims: kopf.Index[str, Claim]) -> reconciler.Ports:
    """The execution tick's reads and writes: ConfigMaps, the other resources' claims, the cluster's scheduler."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    me = _claim(meta, body.get("spec") or {}, body.get("status") or {})
    cluster = context.cluster_name(parsed.cluster_ref)
    others = list(claims.get(cluster, []))
    owner = _owner(meta)
    execution = Execution(order=Order(parsed.execution.order.value),
                          limits=Limits(max_moves=parsed.execution.max_moves,
                                        max_moves_per_broker=parsed.execution.max_moves_per_broker,
                                        max_moves_per_broker_direction=parsed.execution.max_moves_per_broker_direction),
                          throttle=float(parsed.execution.throttle) if parsed.execution.throttle else None)
    holders = {tp: _owner_of(c) for c in [*others, me] if c.live for tp in c.in_flight}
    scheduler = context.scheduler(cluster)
    return reconciler.Ports(
        kafka=kafka,
        save_originals=lambda found: context.rollbacks.add(body, found),
        load_throttle=lambda: context.rollbacks.load_throttle(namespace, name),
        save_throttle=lambda journal: context.rollbacks.save_throttle(body, journal),
        claimed_by_others=lambda: claimed_by_others(me, others),
        others_throttles=lambda: [c.throttle for c in others if c.live and c.key != me.key],
        schedule=lambda candidates, view: scheduler.admit(
            owner, execution, candidates, view.ongoing, holders,
            sizes={tp: view.partition_size(tp) for tp in view.partitions}, write_rates=view.write_rates),
        write_rates=context.write_rates(cluster).observe,
    )


def partitionreassignment_delete(*, body: kopf.Body, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status,
                                 uid: str, memo: Any, logger: Logger,
                                 partitionreassignment_claims: kopf.Index[str, Claim] | None = None,
                                 **_: Any) -> None:
    metrics.forget(uid)
    # The planning storage (snapshot, job output) goes with the resource, whatever the deletion policy.
    _context(memo).planning_jobs.cleanup(body)
    if spec.get("deletionPolicy") == "Orphan":
        logger.info("deletionPolicy Orphan: moves in flight are left running in Kafka")
        if status.get("throttle"):
            brokers = (status.get("throttle") or {}).get("brokers") or []
            kopf.warn(body, reason="ThrottleLeft",
                      message=f"deletionPolicy Orphan: the moves keep running, so their replication throttles stay "
                              f"(brokers {brokers}); remove them with kafka-configs.sh once the moves are done")
        return
    context = _context(memo)
    with context.resource_lock(uid):
        try:
            parsed = parse_spec(spec)
            kafka = context.kafka(parsed.cluster_ref)
        except (ValidationError, KeyError):
            return  # nothing can have been started for a spec that never parsed or a cluster that is not configured
        owned = {tp: tuple(int(r) for r in e["replicas"]) for tp, e in partition_list(status.get("inFlight")).items()}
        targets = {tp: t.replicas for tp, t in targets_of(parsed).items()}
        if parsed.plan is not None and (stored := context.proposals.load(meta["namespace"], meta["name"])):
            targets = dict(stored[0].targets)
        journal = context.rollbacks.load_throttle(meta["namespace"], meta["name"])
        if phase_of(status) in TERMINAL and not owned and journal.empty:
            return  # finished, nothing of its own in flight, no throttle: nothing to ask Kafka
        if not owned and journal.empty and not context.rollbacks.load(meta["namespace"], meta["name"]):
            # No move was ever sent: a partition's original replicas are on record before its first move is. So
            # there is nothing to cancel, whether or not Kafka can be reached (or lets kpo log in) right now.
            return
        try:
            ongoing = kafka.list_reassignments(set(owned) | set(targets))
            # Also cancel moves towards this CR's own targets that a status write may not have recorded yet.
            mine = [tp for tp, o in ongoing.items() if o.target in (owned.get(tp), targets.get(tp))]
            if mine:
                answers = kafka.alter_reassignments(dict.fromkeys(mine))
                refused = {tp: a for tp, a in answers.items() if a is not None
                           and a.code != "NO_REASSIGNMENT_IN_PROGRESS"}
                if refused:
                    # Kafka keeps refusing such a cancellation (e.g. it would leave no in-sync replica) until the
                    # move completes: wait for that at a walk, not every few seconds.
                    raise kopf.TemporaryError(f"Kafka refused to cancel {len(refused)} move(s), waiting for them to "
                                              f"finish: {next(iter(refused.values()))}", delay=30)
                kopf.info(body, reason="Cancelled", message=f"deleted while running: cancelled {len(mine)} move(s)")
            # The moves have ended: take back this resource's throttles (the journal lives in its ConfigMap,
            # which garbage collection removes only after this finalizer).
            if not journal.empty:
                claims: list[Claim] = list(partitionreassignment_claims.get(
                    context.cluster_name(parsed.cluster_ref), [])) if partitionreassignment_claims is not None else []
                others = [c.throttle for c in claims if c.live and c.key != f"{meta['namespace']}/{meta['name']}"]
                left = throttling.remove(kafka, journal, others, lambda j: context.rollbacks.save_throttle(body, j),
                                         live_brokers=kafka.brokers())
                if not left.empty:
                    # The journal goes with the ConfigMap once the finalizer lets go: hold on until nothing leaks.
                    raise kopf.TemporaryError(f"cannot remove every throttle yet: {describe_pending(left)}", delay=10)
        except (KafkaUnavailable, KafkaRequestRefused) as exc:
            context.forget_kafka(parsed.cluster_ref)
            raise kopf.TemporaryError(f"cannot cancel the moves in flight yet: {exc}", delay=5) from exc


def register(registry: kopf.OperatorRegistry, poll_interval_seconds: float) -> None:
    kopf.index(GROUP, VERSION, PLURAL, id="partitionreassignment_claims",
               registry=registry)(partitionreassignment_claims)
    kopf.timer(GROUP, VERSION, PLURAL, id="partitionreassignment_tick", interval=poll_interval_seconds,
               backoff=max(5.0, 3 * poll_interval_seconds), when=partitionreassignment_polls,
               registry=registry)(partitionreassignment_tick)
    kopf.on.delete(GROUP, VERSION, PLURAL, id="partitionreassignment_delete",
                   registry=registry)(partitionreassignment_delete)
