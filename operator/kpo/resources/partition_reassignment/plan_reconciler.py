"""One tick of a PartitionReassignment's planning phases: snapshot, job, proposal, approval.

The I/O shell around :func:`plan_lifecycle.decide_planning`, as :mod:`reconciler` is for execution: it reads the cluster
through the KafkaAdmin Protocol, hands the snapshot to the planning backend, keeps the proposal in its ConfigMap and
returns the status to write. Once a proposal is approved the resource is Executing and :mod:`reconciler` carries
the proposal's targets out like explicit ones.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kpo.domain import conditions as cond
from kpo.domain.clock import rfc3339
from kpo.domain.estimate import Estimate
from kpo.domain.model import ClusterView, PartitionState, TopicPartition
from kpo.domain.plan_contract import (
    DIR_GOALS,
    BrokerInfo,
    DirSpace,
    Goal,
    PartitionRecord,
    PlanMetrics,
    PlanRequest,
)
from kpo.domain.plan_job import Job, JobStatus
from kpo.domain.proposal import Proposal
from kpo.kafka.admin import KafkaAdmin, KafkaUnavailable, topic_names_with
from kpo.resources.outcomes import Outcome, unavailable_outcome
from kpo.resources.partition_reassignment.lifecycle import Phase
from kpo.resources.partition_reassignment.plan_lifecycle import (
    PlanIntent,
    PlanningDecision,
    decide_planning,
    needs_cluster,
    selected_topics,
)
from kpo.resources.partition_reassignment.status import (
    condition_of,
    parse,
    planning_status,
    proposal_status,
    summary_status,
)


class JobBackend(Protocol):
    def start(self, body: Mapping[str, Any], request: PlanRequest, brokers: list[BrokerInfo],
              partitions: list[PartitionRecord]) -> None: ...

    def poll(self, body: Mapping[str, Any]) -> Job: ...


class ProposalKeeper(Protocol):
    def save(self, body: Mapping[str, Any], proposal: Proposal, request: PlanRequest, metrics: PlanMetrics,
             created_at: str) -> str: ...

    def load(self, namespace: str, cr_name: str) -> tuple[Proposal, PlanRequest] | None: ...


@dataclass(frozen=True)
class Snapshot:
    view: ClusterView
    brokers: list[BrokerInfo]
    partitions: list[PartitionRecord]


#: What a tick that does not read the cluster (:func:`plan_lifecycle.needs_cluster`) hands the decision.
_UNREAD = Snapshot(ClusterView(brokers={}, partitions={}), [], [])


def snapshot(kafka: KafkaAdmin, request: PlanRequest, *, allow_internal: bool = False) -> Snapshot:
    """Brokers (with racks and liveness) and every partition (replicas, leader, ISR, size) the planner needs."""
    live = kafka.brokers()
    names = topic_names_with(kafka, request.topics)
    chosen = selected_topics(request, frozenset(names), allow_internal=allow_internal)
    # Every topic's load counts for the brokers' balance; internal topics only when the request names them.
    topics = {t for t in names if not t.startswith("__")} | chosen
    states = kafka.describe_topics(topics)
    dirs = kafka.log_dirs(topics, live)
    ongoing = kafka.list_reassignments()
    # RelieveCapacity reads each dir's file system (KIP-827), which the DescribeLogDirs answer above carries; only a
    # cluster without topics, never asked, is asked for the dirs alone. The other goals carry none.
    capacity = {}
    if request.goal is Goal.RELIEVE_CAPACITY:
        capacity = dirs.capacity if topics else kafka.dir_capacity(live)
    view = ClusterView(brokers=live, partitions=states, ongoing=ongoing, replica_sizes=dirs.sizes,
                       log_dirs=dirs.broker_dirs, offline_dirs=dirs.offline_dirs, dir_capacity=capacity,
                       topics=frozenset(names))
    known = set(live) | {b for s in states.values() for b in s.replicas}
    # Log dirs only for the goals that place replicas in dirs: the others do not read them, and a big cluster's
    # snapshot stays as small.
    with_dirs = request.goal in DIR_GOALS
    brokers = [BrokerInfo(id=b, rack=live[b].rack if b in live else None, alive=b in live,
                          log_dirs=tuple(sorted(dirs.broker_dirs.get(b, ()))) if with_dirs else (),
                          capacity=tuple(DirSpace(log_dir=d, total_bytes=capacity[(b, d)].total,
                                                  usable_bytes=capacity[(b, d)].usable)
                                         for d in sorted(dirs.broker_dirs.get(b, ())) if (b, d) in capacity))
               for b in sorted(known)]
    partitions = [PartitionRecord(topic=tp.topic, partition=tp.partition, replicas=s.replicas,
                                  leader=s.leader if s.leader >= 0 else None, isr=s.isr,
                                  size_bytes=view.partition_size(tp),
                                  log_dirs=tuple(dirs.replica_dirs.get((tp, b)) for b in s.replicas) if with_dirs
                                  else ())
                  for tp, s in sorted(states.items())]
    return Snapshot(view=view, brokers=brokers, partitions=partitions)


def selected_partitions(kafka: KafkaAdmin, request: PlanRequest, *, allow_internal: bool = False
                        ) -> dict[TopicPartition, PartitionState]:
    """Every partition the request selects, as DescribeTopics shows it now (leaders, ISR)."""
    names = topic_names_with(kafka, request.topics)
    return kafka.describe_topics(selected_topics(request, frozenset(names), allow_internal=allow_internal))


log = logging.getLogger(__name__)

#: How long a proposal should take on this cluster as it is now (:func:`kpo.domain.estimate.estimate`).
Estimating = Callable[[Proposal, ClusterView], Estimate]


def plan_tick(*, body: Mapping[str, Any], phase: Phase, intent: PlanIntent, kafka: KafkaAdmin, jobs: JobBackend,
              proposals: ProposalKeeper, now: dt.datetime, estimating: Estimating | None = None
              ) -> Outcome[PlanningDecision]:
    status: Mapping[str, Any] = body.get("status") or {}
    meta = body["metadata"]
    stored = proposals.load(meta["namespace"], meta["name"])
    current = stored[0] if stored is not None and stored[1] == intent.request else None
    try:
        # Polled before the snapshot, so a running job costs no snapshot. Should Kafka fail after a poll that ended
        # the job, the next tick polls again: an answer the job wrote is read again, a job that left none starts again.
        job = jobs.poll(body) if phase is Phase.PLANNING else Job(JobStatus.NONE)
        snap = snapshot(kafka, intent.request, allow_internal=intent.allow_internal_topics) \
            if needs_cluster(phase, intent, job, current) else _UNREAD
        shown = condition_of(status, cond.PROGRESSING)
        before = parse(status)
        decision = decide_planning(phase, intent, job, current, snap.view,
                                   previous_reason=shown.reason if shown is not None else "", now=now,
                                   missing_since=before.topic_missing_since
                                   if before.observed_generation == intent.generation else None)
        if decision.start_job:
            assert snap is not _UNREAD, "a job starts only from a snapshot"
            jobs.start(body, intent.request, snap.brokers, snap.partitions)
    except KafkaUnavailable as exc:
        return unavailable_outcome(status, str(exc), now, reason=exc.reason)
    events = list(decision.events)
    proposed, summary = None, None
    if decision.phase is Phase.PROPOSED and job.proposal is not None and job.metrics is not None \
            and decision.proposal is job.proposal:
        name = proposals.save(body, job.proposal, intent.request, job.metrics, rfc3339(now))
        estimate = estimating(job.proposal, snap.view) if estimating is not None else None
        log.info("%s/%s: proposal %s: %d partition(s), %d bytes; estimate %s", meta["namespace"], meta["name"],
                 job.proposal.id, len(job.proposal.targets), job.metrics.bytes_to_move, estimate)
        proposed, summary = proposal_status(job.proposal, job.metrics, name, now, estimate), summary_status(job.metrics)
    new_status = planning_status(status, phase=decision.phase, generation=intent.generation,
                                 conditions=_conditions(decision), now=now,
                                 proposal=proposed, summary=summary, missing_since=decision.topic_missing_since)
    return Outcome(status=new_status, events=events, decision=decision)


def _conditions(decision: PlanningDecision) -> list[cond.ConditionUpdate]:
    return cond.kstatus(ready=decision.phase is Phase.SUCCEEDED,
                        progressing=decision.phase in (Phase.PENDING, Phase.PLANNING, Phase.EXECUTING),
                        stalled=decision.phase in (Phase.FAILED, Phase.INVALID) or decision.awaiting_approval,
                        # A reason more telling than Proposed (ThresholdUnreachable) stays, its message says to approve.
                        reason="AwaitingApproval" if decision.awaiting_approval and decision.reason == "Proposed"
                        else decision.reason,
                        message=decision.message)
