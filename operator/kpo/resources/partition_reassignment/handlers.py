"""PartitionReassignment as the tick shell sees it (:class:`~kpo.resources.shell.Kind`): what each tick reads and
writes besides Kafka, and nothing else.

Three handlers come of it: an index of every PartitionReassignment's claims (so each one sees the others: conflicts,
shared throttles, the cluster-wide scheduler), a timer that reconciles every ``pollIntervalSeconds`` (Kafka moves
data on its own clock and announces nothing, so kpo polls) while the resource is not at rest, and a deletion handler
whose finalizer cancels the moves in flight and takes back the throttles unless ``deletionPolicy: Orphan``.
A resource with ``spec.plan`` goes where :func:`plan_lifecycle.route` sends it: planning, or executing its approved
proposal exactly like explicit targets.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException

from kpo import metrics
from kpo.api import PARTITION_REASSIGNMENT, DeletionPolicy, PartitionReassignmentSpec
from kpo.domain.claims import Claim, claimed_by_others, move_holders
from kpo.domain.clock import parse_rfc3339, utcnow
from kpo.domain.conditions import Event
from kpo.domain.cordon import CordonJournal, left_behind
from kpo.domain.estimate import Estimate, combined_estimate, dir_estimate, estimate, planned_moves, split_moves
from kpo.domain.model import ClusterView, Replicas, TopicPartition
from kpo.domain.proposal import Proposal
from kpo.domain.reassignment import Target
from kpo.domain.refill import RefillPolicy
from kpo.domain.scheduling import Owner
from kpo.domain.throttle import ThrottleJournal
from kpo.k8s.outage import is_outage
from kpo.k8s.rollback import RollbackStore, rollback_name
from kpo.resources import shell
from kpo.resources.outcomes import Inputs, Outcome
from kpo.resources.partition_reassignment import cordoning, plan_reconciler, reconciler, refill
from kpo.resources.partition_reassignment.lifecycle import TERMINAL, Intent
from kpo.resources.partition_reassignment.plan_lifecycle import Step, route
from kpo.resources.partition_reassignment.spec import (
    execution_of,
    intent_of,
    parse_spec,
    plan_intent_of,
    plan_request,
    targets_of,
)
from kpo.resources.partition_reassignment.status import (
    claim_of,
    cordon_fields,
    cordon_of,
    held_of,
    memory_of,
    throttle_fields,
    wanted_partitions,
)
from kpo.runtime import OperatorContext

log = logging.getLogger(__name__)
Tick = shell.Tick[PartitionReassignmentSpec]


def _owner(key: str, created: str) -> Owner:
    namespace, _, name = key.partition("/")
    moment = parse_rfc3339(created)
    # A resource without a readable creation time goes last.
    return Owner(created=moment if moment is not None else dt.datetime.max.replace(tzinfo=dt.UTC),
                 namespace=namespace, name=name)


def _proposal_partitions(context: OperatorContext, meta: Mapping[str, Any]
                         ) -> Callable[[str], frozenset[TopicPartition]]:
    def load(proposal_id: str) -> frozenset[TopicPartition]:
        try:
            return context.proposal_partitions(meta["namespace"], meta["name"], proposal_id)
        except ApiException as exc:
            log.warning("%s/%s: cannot read its proposal (%s); it claims its moves in flight only",
                        meta["namespace"], meta["name"], exc.reason)
            return frozenset()
    return load


def partitionreassignment_claims(*, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, memo: Any,
                                 **_: Any) -> dict[str, Claim]:
    context: OperatorContext = memo["context"]
    claim = claim_of(f"{meta['namespace']}/{meta['name']}", str(meta.get("creationTimestamp", "")),
                     wanted_partitions(spec, status, _proposal_partitions(context, meta)), status)
    return {context.cluster_name(spec.get("clusterRef")): claim}


def partitionreassignment_at_rest(generation: int, status: Mapping[str, Any]) -> bool:
    """Terminal for its current spec, with no move of its own in flight and no throttle to take back: no timer, and
    nothing is read, not even a ConfigMap. A spec change (a new generation) starts the timer again."""
    return reconciler.at_rest(generation, memory_of(status, {}), status)


def _claims(tick: Tick) -> list[Claim]:
    return list(tick.index.get(tick.context.cluster_name(tick.spec.cluster_ref), []))


def _ports(tick: Tick, intent: Intent, *, create_records: bool = True, store: RollbackStore | None = None
           ) -> reconciler.Ports:
    """The execution tick's reads and writes: the cluster's executor (its shared look, admission, the only sender of
    moves and throttles), ConfigMaps, the other resources' claims. ``create_records=False`` (deletion): a ConfigMap
    that is gone is not made again. ``store``: the tick's records, read once for all its passes."""
    context, body = tick.context, tick.body
    records = store if store is not None else context.rollbacks
    began = time.monotonic()
    me = claim_of(tick.key, str(body["metadata"].get("creationTimestamp", "")), intent.targets, tick.status)
    others = [c for c in _claims(tick) if c.key != me.key]
    owner = _owner(me.key, me.created)
    execution = execution_of(tick.spec)
    held = move_holders(me, others)
    owners = {c.key: _owner(c.key, c.created) for c in {c.key: c for c in held.values()}.values()}
    holders = {tp: owners[c.key] for tp, c in held.items()}
    executor = context.executor(context.cluster_name(tick.spec.cluster_ref))
    # The other resources' throttle journals as their statuses say; the ledger's own records, fresher, come first.
    index = {c.key: c.throttle for c in others if c.live}

    def save_throttle(journal: ThrottleJournal) -> object:
        return records.save_throttle(body, journal, create=create_records)

    return reconciler.Ports(
        kafka=tick.kafka,
        look=lambda topics: executor.looks.after(began, topics),
        send=lambda targets, allow: executor.send(owner, targets, allow_replication_factor_change=allow),
        elect=executor.elect,
        move_dirs=executor.move_dirs,
        ensure_throttle=lambda wanted, previous, live: executor.throttles.ensure(
            me.key, executor.kafka(), wanted, previous=previous, index=index, save=save_throttle,
            live_brokers=live),
        remove_throttle=lambda journal, live: executor.throttles.remove(
            me.key, executor.kafka(), journal, index=index, save=save_throttle, live_brokers=live),
        save_originals=lambda found: records.add(body, found),
        load_throttle=lambda: records.load_throttle(tick.namespace, tick.name),
        claimed_by_others=lambda: claimed_by_others(me, others),
        schedule=lambda candidates, _view: executor.admit(owner, execution, candidates, holders),
        write_rates=executor.write_rates.of,
        settle=lambda: executor.settle(owner),
        waiting=lambda: executor.waiting(owner),
        arm=lambda partitions: executor.arm(owner, partitions),
        refused=lambda: executor.take_refused(owner),
        records=rollback_name(tick.name),
        load_cordon=lambda: records.load_cordon_record(tick.namespace, tick.name) or CordonJournal(),
        save_cordon=lambda journal: records.save_cordon(body, journal, create=create_records),
        others_cordons=lambda: [c.cordons for c in others if not c.cordons.empty],
        selection=lambda: plan_reconciler.selected_partitions(tick.kafka, plan_request(tick.spec),
                                                              allow_internal=tick.spec.allow_internal_topics)
        if tick.spec.plan is not None else {},
    )


def partitionreassignment_reconcile(tick: Tick) -> Outcome[Any] | None:
    context = tick.context
    intent = intent_of(tick.spec, tick.generation)
    if tick.spec.plan is not None:
        stored = context.proposals.load(tick.namespace, tick.name)
        current = stored[0] if stored is not None and stored[1] == plan_request(tick.spec) else None
        memory = memory_of(tick.status, {})
        step = route(memory.phase, tick.generation, memory.observed_generation, proposal_current=current is not None,
                     stop=tick.spec.stop)
        if step.step is Step.IDLE:
            return None
        if step.step is Step.PLAN:
            outcome = plan_reconciler.plan_tick(body=tick.body, phase=step.phase,
                                                intent=plan_intent_of(tick.spec, tick.generation), kafka=tick.kafka,
                                                jobs=context.planning_jobs, proposals=context.proposals,
                                                now=tick.now, estimating=_estimating(tick))
            return _uncordoned(tick, outcome)
        assert current is not None
        intent = replace(intent, targets={tp: Target(r, current.log_dirs.get(tp)) for tp, r in current.targets.items()})
    store = context.rollbacks
    originals = store.load(tick.namespace, tick.name)

    def one_pass(body: Mapping[str, Any], originals: Mapping[TopicPartition, Replicas]
                 ) -> tuple[Outcome[Any] | None, reconciler.PassReport | None]:
        current = tick if body is tick.body else replace(tick, body=body, now=utcnow())
        reports: list[reconciler.PassReport] = []
        ports = replace(_ports(current, intent, store=store), report=reports.append)
        outcome = reconciler.tick(Inputs(body, intent, memory_of(current.status, originals), current.now), ports)
        return outcome, reports[-1] if reports else None

    return refill.run(tick.body, originals, one_pass, probes=_probes(tick), watching=_watching(context), key=tick.key)


def _uncordoned(tick: Tick, outcome: Outcome[Any] | None) -> Outcome[Any] | None:
    """A planned resource planning again (a new spec) lets go of the cordons its previous drain held."""
    held = cordon_of(tick.status)
    if held.journal.empty or outcome is None:
        return outcome
    ports = _ports(tick, intent_of(tick.spec, tick.generation))
    state, events = cordoning.follow(tick.kafka, frozenset(), replace(held, journal=ports.load_cordon()),
                                     others=ports.others_cordons(), save=ports.save_cordon,
                                     live_brokers=tick.kafka.brokers())
    outcome.status |= cordon_fields(state)
    outcome.events.extend(events)
    return outcome


def _estimating(tick: Tick) -> plan_reconciler.Estimating:
    """How long a proposal of this resource should take: its execution settings, the cluster's scheduler limits,
    the operator's poll interval and refill between polls."""
    context = tick.context
    owner = _owner(tick.key, str(tick.body["metadata"].get("creationTimestamp", "")))
    config = context.executor(context.cluster_name(tick.spec.cluster_ref)).config
    incremental = tick.spec.execution.strategy.value == "Incremental"
    policy = _watching(context).policy

    def replicas_estimate(targets: Mapping[TopicPartition, Replicas], proposal: Proposal,
                          view: ClusterView) -> Estimate:
        moves = planned_moves(targets, proposal.basis, view, owner)
        return estimate(moves, execution_of(tick.spec), poll_interval=context.config.poll_interval_seconds,
                        incremental=incremental, config=config, refill=policy)

    def estimating(proposal: Proposal, view: ClusterView) -> Estimate:
        if not proposal.log_dirs:
            return replicas_estimate(proposal.targets, proposal, view)
        # Copies between the dirs of a broker (the disk goals), with reassignments beside them (RelieveCapacity).
        split = split_moves(proposal.targets, proposal.basis, proposal.log_dirs)
        rate = tick.spec.execution.log_dir_throttle
        dirs = dir_estimate(split.dir_copies, view.replica_sizes, float(rate) if rate else None)
        if not split.reassigned:
            return dirs
        return combined_estimate(replicas_estimate(split.reassigned, proposal, view), dirs,
                                 landing=len(split.landing))

    return estimating


def _watching(context: OperatorContext) -> refill.Watching:
    settings = context.config.refill
    policy = RefillPolicy(context.config.poll_interval_seconds, first_probe=settings.first_probe_seconds,
                          growth=settings.probe_growth)
    return refill.Watching(policy=policy, slots=context.refill_slots())


def _probes(tick: Tick) -> refill.Probes:
    """Looks between polls: the resource's own moves in Kafka, and whether the resource is still the one ticked (the
    timer's body is live: Kopf updates it as watch events arrive)."""
    live = tick.live if tick.live is not None else tick.body

    def unchanged() -> bool:
        meta = live.get("metadata") or {}
        return int(meta.get("generation") or 1) == tick.generation and not meta.get("deletionTimestamp")

    cluster = tick.context.cluster_name(tick.spec.cluster_ref)
    executor = tick.context.executor(cluster)
    return refill.Probes(moving=executor.moving,
                         unchanged=unchanged,
                         refilled=lambda started: metrics.refilled(PARTITION_REASSIGNMENT, cluster, started),
                         fatal=is_outage)


def partitionreassignment_refused(tick: Tick, outcome: Outcome[Any]) -> Outcome[Any]:
    """Failed for want of an ACL: a refused throttle change leaves in the journal only what was applied, and the
    ticks to come still take that back, so the status names it."""
    left = tick.context.rollbacks.load_throttle(tick.namespace, tick.name)
    if not left.empty:
        outcome.status |= throttle_fields(left)
    return outcome


def partitionreassignment_release(tick: Tick) -> list[Event]:
    context = tick.context
    # The planning storage (snapshot, job output) goes with the resource, whatever the deletion policy.
    context.planning_jobs.cleanup(tick.body)
    if tick.spec.deletion_policy is DeletionPolicy.ORPHAN:
        log.info("%s: deletionPolicy Orphan: moves in flight are left running in Kafka", tick.key)
        # Its throttles are the user's from now on: kpo neither keeps them for it nor counts it as their holder.
        context.executor(context.cluster_name(tick.spec.cluster_ref)).throttles.forget(tick.key)
        left: list[Event] = []
        if (held := held_of(tick.status).throttle) is not None and (brokers := sorted(held.brokers)):
            left.append(Event("Warning", "ThrottleLeft",
                              f"deletionPolicy Orphan: the moves keep running, so their replication throttles stay "
                              f"(brokers {brokers}); remove them with kafka-configs.sh once the moves are done"))
        if cordoned := cordon_of(tick.status).journal.brokers:
            left.append(Event("Warning", "CordonLeft", f"deletionPolicy Orphan: the drain keeps running, so its "
                                                       f"cordons stay; {left_behind(cordoned)}"))
        return left
    memory = memory_of(tick.status, {})
    full = dict(targets_of(tick.spec))
    if tick.spec.plan is not None and (stored := context.proposals.load(tick.namespace, tick.name)):
        full = {tp: Target(r, stored[0].log_dirs.get(tp)) for tp, r in stored[0].targets.items()}
    targets = {tp: t.replicas for tp, t in full.items()}
    # The ConfigMap's journal is the truth; when a namespace being deleted has removed the ConfigMap already, the
    # status still names what this resource throttled (it is written from the journal every tick).
    recorded_journal = context.rollbacks.load_throttle_record(tick.namespace, tick.name)
    journal = recorded_journal if recorded_journal is not None else \
        (held_of(tick.status).throttle or ThrottleJournal())
    # Read only when it decides anything (see reconciler.release): a move is never sent before its originals are.
    recorded = bool(memory.owned) or not journal.empty or (
        memory.phase not in TERMINAL and bool(context.rollbacks.load(tick.namespace, tick.name)))
    recorded_cordons = context.rollbacks.load_cordon_record(tick.namespace, tick.name)
    cordons = recorded_cordons if recorded_cordons is not None else cordon_of(tick.status).journal
    holdings = reconciler.Holdings(phase=memory.phase, owned=memory.owned, targets=targets, journal=journal,
                                   originals_recorded=recorded, cordons=cordons,
                                   dir_targets={tp: t for tp, t in full.items() if t.log_dirs is not None})
    # Nothing of it is sent by the executor from now on (a send under way ends first): then its moves are listed.
    context.executor(context.cluster_name(tick.spec.cluster_ref)).forget(
        _owner(tick.key, str(tick.body["metadata"].get("creationTimestamp", ""))))
    ports = _ports(tick, intent_of(tick.spec, tick.generation), create_records=False)
    return reconciler.release(holdings, ports)


KIND = shell.Kind(resource=PARTITION_REASSIGNMENT, parse=parse_spec,
                  at_rest=partitionreassignment_at_rest, reconcile=partitionreassignment_reconcile,
                  refused=partitionreassignment_refused, release=partitionreassignment_release,
                  index=partitionreassignment_claims)


def register(registry: kopf.OperatorRegistry, poll_interval_seconds: float, *, sharp: bool = False) -> None:
    shell.register(KIND, registry, poll_interval_seconds, sharp=sharp)
