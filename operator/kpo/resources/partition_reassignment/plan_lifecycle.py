"""The planning phases of a PartitionReassignment with ``spec.plan``: Planning and Proposed, decided purely.

A generated plan is never executed blindly. kpo snapshots the cluster, runs the planning job (PySpark, locally or as
a SparkApplication) and stops at **Proposed** with a summary in the status and the full plan in a ConfigMap. The
user approves exactly the proposal that was shown by copying its id into ``spec.approval.proposalId`` (or sets
``approval.mode: Automatic``). At approval kpo checks that the cluster still looks like the snapshot the plan was
computed from; if a planned partition moved or a target broker is gone, it plans again and says why, instead of
carrying out a stale plan. After that the plan's targets run exactly like explicit ones (:mod:`lifecycle`).

::

    Pending ──valid──► Planning ──job ok──► Proposed ──approved, cluster unchanged──► Executing
       │                 │   ▲                 │  │
       │ invalid         │   └──cluster changed┘  └── spec.stop ──► Stopped
       ▼                 ▼ job failed
    Invalid            Failed                 (an empty plan: Succeeded at once, nothing to move)

- **Pending** transitions to *Invalid* (the request cannot be met on this cluster: unknown or offline brokers, a
  replication factor above the brokers that remain, no topic selected, an internal topic named without
  ``allowInternalTopics``, a replication factor below the current one without ``allowReplicationFactorDecrease``,
  every live broker demoted or in ``excludeLeaders``, RelieveCapacity on brokers that report no dir capacity,
  RebalanceDisks naming a broker with one dir),
  *Stopped* (``spec.stop``), or *Planning* (the job is started); stays *Pending* while the only problem is a topic of
  ``spec.plan.topics`` that does not exist yet (reason *WaitingForTopic*, :mod:`kpo.domain.topic_wait`: up to its
  grace from the first miss, one Event; then *Invalid*).
- **Planning** stays while the job runs (and starts it again if the operator restarted and lost it, or if the last
  start did not take: ``PlanningJobNotStarted``, with what the API server said); transitions to
  *Failed* (the job failed: its own message; or RelieveCapacity's threshold is unreachable and nothing would move:
  ``ThresholdUnreachable``), *Succeeded* (nothing to move, and no selected partition led by a broker
  that must lead nothing), *Invalid* (the proposal would do what the spec does not allow, see
  :func:`proposal_problems`) or *Proposed* (also a proposal that changes no list when demoted brokers, or
  ``excludeLeaders`` with ``electLeadersAfter``, still lead selected partitions: its execution is the election; and
  RelieveCapacity's best reachable state when no plan brings every dir under the threshold: ``ThresholdUnreachable``,
  kept on every tick of Proposed, its one Event a Warning).
- **Proposed** stays until approved; transitions to *Executing* (approved and the cluster unchanged), *Planning*
  (approved, but the cluster changed since the snapshot), *Invalid* (the spec changed since, and no longer allows
  what the proposal does), or *Stopped*.

Kafka's internal topics never enter a plan by accident: without ``allowInternalTopics`` they are left out of the
snapshot the job sees, whatever ``topicPattern`` matches, and a proposal that names one anyway is refused.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from kpo.api import INTERNAL_TOPICS
from kpo.api.topic_pattern import matching
from kpo.domain.conditions import Event, transition_event
from kpo.domain.leaders_away import LeadersAway, leaders_away, nobody_to_lead
from kpo.domain.model import ClusterView
from kpo.domain.plan_contract import Goal, PlanRequest
from kpo.domain.plan_job import Job, JobStatus
from kpo.domain.problems import Problem
from kpo.domain.proposal import Proposal, threshold_unreached
from kpo.domain.reassignment import current_replicas
from kpo.domain.topic_wait import WAITING_FOR_TOPIC, wait_for_topics
from kpo.resources.partition_reassignment.lifecycle import TERMINAL, Phase

PLANNING_TRANSITIONS: Mapping[Phase, frozenset[Phase]] = {
    Phase.PENDING: frozenset({Phase.PENDING, Phase.INVALID, Phase.STOPPED, Phase.PLANNING}),
    Phase.PLANNING: frozenset({Phase.PLANNING, Phase.FAILED, Phase.SUCCEEDED, Phase.PROPOSED, Phase.STOPPED,
                               Phase.INVALID}),
    Phase.PROPOSED: frozenset({Phase.PROPOSED, Phase.EXECUTING, Phase.PLANNING, Phase.STOPPED, Phase.INVALID}),
}
#: RelieveCapacity cannot bring every dir under its threshold: Proposed with the best reachable state, or Failed
#: when that state moves nothing.
THRESHOLD_UNREACHABLE = "ThresholdUnreachable"
#: The planning job could not be started (the Spark Operator's admission webhook did not answer): Planning says why
#: and starts it again on the next tick.
PLANNING_JOB_NOT_STARTED = "PlanningJobNotStarted"


@dataclass(frozen=True)
class PlanIntent:
    generation: int
    request: PlanRequest
    automatic: bool
    approved_id: str | None
    stop: bool = False
    allow_internal_topics: bool = False
    allow_replication_factor_decrease: bool = False
    # Brokers that must lead no selected partition once the plan ran (see Intent.leaders_away).
    leaders_away: frozenset[int] = frozenset()


@dataclass(frozen=True)
class PlanningDecision:
    phase: Phase
    reason: str
    message: str
    start_job: bool = False
    proposal: Proposal | None = None  # to store and show (Proposed), or to execute (Executing)
    problems: tuple[Problem, ...] = ()
    events: tuple[Event, ...] = field(default=())
    # Proposed, and only an approval (spec.approval.proposalId) moves it on: the Stalled condition says so.
    awaiting_approval: bool = False
    # Set while Pending waits for a topic of spec.plan.topics (:mod:`kpo.domain.topic_wait`): when it was first missed.
    topic_missing_since: dt.datetime | None = None


class Step(StrEnum):
    """What a tick of a resource with ``spec.plan`` does."""

    PLAN = "Plan"  # a planning tick: snapshot, job, proposal, approval (:mod:`plan_reconciler`)
    EXECUTE = "Execute"  # the approved proposal's targets, carried out like explicit ones (:mod:`reconciler`)
    IDLE = "Idle"  # finished with nothing left to follow


@dataclass(frozen=True)
class Route:
    step: Step
    #: For PLAN: the phase the planning tick starts from (Pending for a new spec or a changed plan).
    phase: Phase = Phase.PENDING


_RUNNING = frozenset({Phase.EXECUTING, Phase.PAUSED, Phase.STOPPING, Phase.REVERTING})
_PLANNING = frozenset({Phase.PENDING, Phase.PLANNING, Phase.PROPOSED})


def route(phase: Phase, generation: int, observed_generation: int, *, proposal_current: bool,
          stop: bool = False) -> Route:
    """Where a tick of a planned resource goes, from its phase and whether its stored proposal answers the current
    ``spec.plan`` (``proposal_current``).

    A terminal phase of the current generation follows its executed proposal (throttles may remain to be taken back)
    or rests; a running one goes on with its proposal; a new generation, or a plan changed while its proposal ran,
    plans again from Pending (moves in flight are followed, not cancelled). One exception: ``stop`` set on a resource
    whose proposal ran (a terminal phase, the same plan) goes to the execution's Pending, which stops — and with
    ``onStop: Revert`` takes every partition back to the rollback ConfigMap's record — instead of planning anew.
    """
    if phase in TERMINAL and generation == observed_generation:
        return Route(Step.EXECUTE if proposal_current else Step.IDLE)
    if stop and proposal_current and phase in TERMINAL:
        return Route(Step.EXECUTE)
    if phase in _RUNNING and proposal_current:
        return Route(Step.EXECUTE)
    return Route(Step.PLAN, phase if phase in _PLANNING else Phase.PENDING)


def selected_topics(request: PlanRequest, topics: frozenset[str], *, allow_internal: bool = False) -> set[str]:
    """The topics a request selects: named ones, or a pattern (whole-name match), or every non-internal topic.

    Kafka's internal topics are selected only with ``allow_internal`` (spec.allowInternalTopics), and then only by
    name or pattern: "every topic" never means __consumer_offsets.
    """
    if request.topics:
        chosen = set(request.topics) & topics
    elif request.topic_pattern:
        chosen = matching(request.topic_pattern, topics)
    else:
        chosen = {t for t in topics if not t.startswith("__")}
    if not allow_internal:
        chosen -= set(INTERNAL_TOPICS)
    if request.exclude_topic_pattern:
        chosen -= matching(request.exclude_topic_pattern, chosen)
    return chosen - set(request.exclude_topics)


def validate_request(request: PlanRequest, view: ClusterView, *, allow_internal: bool = False,
                     allow_rf_decrease: bool = False) -> list[Problem]:
    problems: list[Problem] = []
    live = sorted(view.brokers)
    selected = selected_topics(request, view.topics, allow_internal=allow_internal)
    if request.topics:
        missing = sorted(set(request.topics) - view.topics)
        if missing:
            problems.append(Problem("spec.plan.topics", "UnknownTopic", f"topic(s) {missing} do not exist"))
        internal = sorted(set(request.topics) & set(INTERNAL_TOPICS)) if not allow_internal else []
        if internal:
            problems.append(Problem("spec.plan.topics", "InternalTopic",
                                    f"{internal} are internal Kafka topics: planning them needs "
                                    f"spec.allowInternalTopics: true"))
    if request.replication_factor is not None and not allow_rf_decrease:
        above = sorted(tp for tp, s in view.partitions.items()
                       if tp.topic in selected and len(s.replicas) > request.replication_factor)
        if above:
            problems.append(Problem("spec.plan.replicationFactor", "ReplicationFactorDecrease",
                                    f"replication factor {request.replication_factor} is below what {len(above)} "
                                    f"selected partition(s) have now (e.g. {above[0]}: "
                                    f"{len(view.partitions[above[0]].replicas)}); decreasing it needs "
                                    f"spec.allowReplicationFactorDecrease: true"))
    if not selected:
        problems.append(Problem("spec.plan", "NothingSelected", "the plan selects no topic: nothing to plan"))
    if request.goal is Goal.ADD_BROKERS:
        offline = [b for b in request.brokers if b not in view.brokers]
        if offline:
            problems.append(Problem("spec.plan.brokers", "UnknownBroker",
                                    f"broker(s) {offline} to add are not live brokers (live: {live})"))
    both = sorted(set(request.brokers) & set(request.exclude_brokers)) if request.goal is Goal.ADD_BROKERS else []
    if both:
        problems.append(Problem("spec.plan.excludeBrokers", "ExcludedBrokerToAdd",
                                f"broker(s) {both} are to be added and in excludeBrokers at once: a broker to add "
                                "must take replicas"))
    if request.goal is Goal.DEMOTE_BROKERS:
        listed = {b for tp, s in view.partitions.items() if tp.topic in selected for b in s.replicas}
        unknown = [b for b in request.brokers if b not in view.brokers and b not in listed]
        if unknown:
            problems.append(Problem("spec.plan.brokers", "UnknownBroker",
                                    f"broker(s) {unknown} to demote are neither live (live: {live}) nor in a replica "
                                    "list of the selected topics"))
    if leaderless := nobody_to_lead(request, live):
        problems.append(leaderless)
    remaining = [b for b in live if not (request.goal is Goal.REMOVE_BROKERS and b in request.brokers)]
    needed = request.replication_factor or max(
        (len(s.replicas) for tp, s in view.partitions.items() if tp.topic in selected), default=1)
    if needed > len(remaining):
        problems.append(Problem("spec.plan", "NotEnoughBrokers",
                                f"replication factor {needed} needs {needed} brokers, but only {len(remaining)} "
                                f"would remain ({remaining})"))
    holders = [b for b in remaining if b not in request.exclude_brokers]
    if remaining and not holders:
        problems.append(Problem("spec.plan.excludeBrokers", "NoBrokerLeftToHold",
                                f"excludeBrokers names every live broker the plan could place replicas on "
                                f"({remaining}): no broker would be left to take a replica; exclude fewer brokers"))
    return problems + disk_problems(request, view) + capacity_problems(request, view)


def disk_problems(request: PlanRequest, view: ClusterView) -> list[Problem]:
    """What the disk goals name that the cluster does not have: a broker that is not live, a log dir it does not
    have, one that is offline (its replicas cannot be read, so not copied), or every online dir of a broker."""
    problems: list[Problem] = []
    live = sorted(view.brokers)
    if request.goal is Goal.REBALANCE_DISKS and (unknown := [b for b in request.brokers if b not in view.brokers]):
        problems.append(Problem("spec.plan.brokers", "UnknownBroker",
                                f"broker(s) {unknown} are not live brokers (live: {live})"))
    if request.goal is Goal.REBALANCE_DISKS and (single := {b: sorted(view.log_dirs[b]) for b in request.brokers
                                                            if len(view.log_dirs.get(b, ())) == 1}):
        # Named, it would end "NothingToMove" as if balanced: say that there is nothing to balance between.
        problems.append(Problem("spec.plan.brokers", "OneLogDir", "broker(s) " + ", ".join(
            f"{b} ({dirs[0]})" for b, dirs in sorted(single.items())) + " have one online log dir: nothing to "
            "balance between; name brokers with two or more"))
    named: dict[int, set[str]] = {}
    for i, disk in enumerate(request.disks):
        where = f"spec.plan.disks[{i}]"
        online, offline = view.log_dirs.get(disk.broker, frozenset()), view.offline_dirs.get(disk.broker, frozenset())
        if disk.broker not in view.brokers:
            problems.append(Problem(where, "UnknownBroker",
                                    f"broker {disk.broker} is not a live broker (live: {live})"))
        elif disk.log_dir in offline:
            problems.append(Problem(where, "LogDirOffline", f"log dir {disk.log_dir} of broker {disk.broker} is "
                                    "offline: Kafka cannot read its replicas, so they cannot be copied to another dir"))
        elif disk.log_dir not in online:
            problems.append(Problem(where, "UnknownLogDir", f"broker {disk.broker} has no log dir {disk.log_dir} "
                                    f"(its online log dirs: {', '.join(sorted(online)) or 'none known'})"))
        else:
            named.setdefault(disk.broker, set()).add(disk.log_dir)
    for broker, dirs in sorted(named.items()):
        if view.log_dirs.get(broker, frozenset()) <= dirs:
            problems.append(Problem("spec.plan.disks", "NoLogDirLeft",
                                    f"disks names every online log dir of broker {broker} "
                                    f"({', '.join(sorted(dirs))}): its replicas would have nowhere to go; to empty "
                                    "the broker, use goal RemoveBrokers"))
    return problems


def capacity_problems(request: PlanRequest, view: ClusterView) -> list[Problem]:
    """RelieveCapacity judges every dir by its file system's size (DescribeLogDirs v4+, KIP-827): a cluster where no
    live broker reported a log dir gives it nothing to relieve (``NoLogDirs``), and an online dir of a live broker
    that reports no capacity (a broker older than Kafka 3.3 answers -1), or a live broker whose dirs are unknown (it
    did not answer DescribeLogDirs), leaves it unable to tell whether that dir is full (``CapacityUnknown``). Both are
    refused before any job starts, so nothing is half-planned."""
    if request.goal is not Goal.RELIEVE_CAPACITY:
        return []
    live = sorted(view.brokers)
    if not any(view.log_dirs.get(b) for b in live):
        return [Problem("spec.plan.goal", "NoLogDirs",
                        f"no live broker reported a log dir in DescribeLogDirs (live: {live}): goal RelieveCapacity "
                        "has no dir to measure")]
    silent = [b for b in live if not view.log_dirs.get(b)]
    unmeasured = [(b, d) for b in live for d in sorted(view.log_dirs.get(b, ())) if (b, d) not in view.dir_capacity]
    if not silent and not unmeasured:
        return []
    said = []
    if unmeasured:
        brokers = sorted({b for b, _ in unmeasured})
        shown = ", ".join(f"{d} of broker {b}" for b, d in unmeasured[:10]) \
            + (f" and {len(unmeasured) - 10} more" if len(unmeasured) > 10 else "")
        said.append(f"log dir(s) {shown} report no capacity (DescribeLogDirs total and usable bytes, KIP-827: "
                    f"Kafka 3.3 or later; broker(s) {brokers})")
    if silent:
        said.append(f"broker(s) {silent} reported no log dirs (DescribeLogDirs unanswered)")
    return [Problem("spec.plan.goal", "CapacityUnknown",
                    "; ".join(said) + ": goal RelieveCapacity cannot tell how full their dirs are; upgrade the "
                    "brokers, or use RebalanceDisks / Rebalance")]


def proposal_problems(proposal: Proposal, view: ClusterView, intent: PlanIntent) -> list[Problem]:
    """What a proposal would do that the spec does not allow: touch an internal topic, or shrink a partition's
    replica list. Checked when the job answers and again at approval, since the spec may have changed in between."""
    problems: list[Problem] = []
    if not intent.allow_internal_topics:
        internal = sorted({tp.topic for tp in proposal.targets} & set(INTERNAL_TOPICS))
        if internal:
            problems.append(Problem("spec.allowInternalTopics", "InternalTopic",
                                    f"proposal {proposal.id} moves internal Kafka topic(s) {internal}: that needs "
                                    f"spec.allowInternalTopics: true"))
    if not intent.allow_replication_factor_decrease:
        shrunk = sorted(tp for tp, replicas in proposal.targets.items()
                        if len(replicas) < len(proposal.basis.get(tp) or current_replicas(tp, view)))
        if shrunk:
            problems.append(Problem("spec.allowReplicationFactorDecrease", "ReplicationFactorDecrease",
                                    f"proposal {proposal.id} gives {len(shrunk)} partition(s) fewer replicas than "
                                    f"they have (e.g. {shrunk[0]}): that needs "
                                    f"spec.allowReplicationFactorDecrease: true"))
    return problems


def changed_since(proposal: Proposal, view: ClusterView) -> list[str]:
    """Why a proposal no longer fits the cluster: a planned partition moved, or a target broker is gone."""
    reasons: list[str] = []
    for tp, before in sorted(proposal.basis.items()):
        state = view.partitions.get(tp)
        if state is None:
            reasons.append(f"{tp} no longer exists")
        elif state.replicas != before or tp in view.ongoing:
            reasons.append(f"{tp} is now on {list(state.replicas)}, not {list(before)}")
    gone = sorted({b for r in proposal.targets.values() for b in r} - set(view.brokers))
    if gone:
        reasons.append(f"target broker(s) {gone} are no longer live")
    return reasons


def needs_cluster(phase: Phase, intent: PlanIntent, job: Job, proposal: Proposal | None) -> bool:
    """Whether this tick's decision reads the cluster. A planning snapshot is every selected partition with each
    replica's size from DescribeLogDirs (a million and more on a big cluster); while the job runs, while a proposal
    waits for its approval (hours, maybe), or for a stop, the decision does not look at it, so the tick does not ask
    Kafka for it on every poll."""
    if intent.stop:
        return False
    if phase is Phase.PLANNING:
        return job.status is not JobStatus.RUNNING
    if phase is Phase.PROPOSED:
        return proposal is None or _approved(intent, proposal)
    return True


def _approved(intent: PlanIntent, proposal: Proposal) -> bool:
    return intent.automatic or intent.approved_id == proposal.id


def decide_planning(phase: Phase, intent: PlanIntent, job: Job, proposal: Proposal | None,
                    view: ClusterView, *, previous_reason: str = "", now: dt.datetime | None = None,
                    missing_since: dt.datetime | None = None) -> PlanningDecision:
    """``previous_reason`` is the reason the status shows now: a start that keeps failing is said by one Event when it
    first fails, not by one per tick. ``missing_since``: when this generation's Pending first missed a topic of
    ``spec.plan.topics``; ``now`` ``None`` judges a missing topic at once."""
    decision = _decide(phase, intent, job, proposal, view, now=now, missing_since=missing_since)
    assert decision.phase in PLANNING_TRANSITIONS[phase], f"illegal {phase.value} -> {decision.phase.value}"
    if decision.phase is not phase or (decision.reason == PLANNING_JOB_NOT_STARTED
                                       and previous_reason != PLANNING_JOB_NOT_STARTED):
        event = transition_event(phase, decision.phase, decision.reason, decision.message,
                                 warning=decision.phase in (Phase.FAILED, Phase.INVALID)
                                 or decision.reason in (PLANNING_JOB_NOT_STARTED, THRESHOLD_UNREACHABLE))
        decision = PlanningDecision(**{**decision.__dict__, "events": (*decision.events, event)})
    return decision


def _decide(phase: Phase, intent: PlanIntent, job: Job, proposal: Proposal | None,
            view: ClusterView, *, now: dt.datetime | None, missing_since: dt.datetime | None
            ) -> PlanningDecision:
    if intent.stop:
        return PlanningDecision(Phase.STOPPED, "Stopped", "spec.stop is set; nothing was moved")
    if phase is Phase.PENDING:
        problems = validate_request(intent.request, view, allow_internal=intent.allow_internal_topics,
                                    allow_rf_decrease=intent.allow_replication_factor_decrease)
        if (wait := wait_for_topics(problems, missing_since, now)) is not None:
            return PlanningDecision(Phase.PENDING, WAITING_FOR_TOPIC, wait.message, problems=tuple(problems),
                                    events=(wait.event,) if wait.starts else (), topic_missing_since=wait.since)
        if problems:
            return _invalid(problems)
        return PlanningDecision(Phase.PLANNING, "Planning", f"planning {intent.request.goal.value}",
                                start_job=True)
    if phase is Phase.PLANNING:
        if job.status is JobStatus.NONE and job.message:
            # The last start did not take (an admission webhook that did not answer): said, and tried again.
            return PlanningDecision(Phase.PLANNING, PLANNING_JOB_NOT_STARTED,
                                    f"starting the planning job again; the last attempt: {job.message}",
                                    start_job=True)
        if job.status is JobStatus.NONE:
            return PlanningDecision(Phase.PLANNING, "Planning", "starting the planning job", start_job=True)
        if job.status is JobStatus.RUNNING:
            return PlanningDecision(Phase.PLANNING, "Planning", "the planning job is running")
        if job.status is JobStatus.FAILED or job.proposal is None:
            return PlanningDecision(Phase.FAILED, "PlanningFailed", f"the planning job failed: {job.message}")
        unreached = threshold_unreached(intent.request.goal, job.metrics)
        if not job.proposal.targets and unreached:
            # Nothing to approve, yet some dir stays above the threshold: neither a success nor a proposal.
            return PlanningDecision(Phase.FAILED, THRESHOLD_UNREACHABLE,
                                    f"{unreached}; no replica move brings any dir closer: nothing to propose")
        if not job.proposal.targets:
            away = leaders_to_move(intent, view)
            if away.elect:
                # No list changes, but brokers that must lead nothing still do: the election is the whole plan.
                return PlanningDecision(Phase.PROPOSED, "Proposed", f"no replica list changes, but {away.describe()}; "
                                        + _awaiting(job.proposal, intent), proposal=job.proposal,
                                        awaiting_approval=not intent.automatic)
            return PlanningDecision(Phase.SUCCEEDED, "NothingToMove",
                                    "the cluster already meets the goal: the plan moves nothing"
                                    + (f"; {away.describe()}" if away.stuck else ""))
        if problems := proposal_problems(job.proposal, view, intent):
            return _invalid(problems)
        return _proposed(job.proposal, intent, unreached, awaiting_approval=not intent.automatic)
    # Proposed
    if proposal is None:
        return PlanningDecision(Phase.PLANNING, "ProposalLost",
                                "the proposal ConfigMap is gone or answers another request: planning again",
                                start_job=True)
    if not _approved(intent, proposal):
        return _proposed(proposal, intent, proposal.unreached, awaiting_approval=True)
    if problems := proposal_problems(proposal, view, intent):
        return _invalid(problems)
    reasons = changed_since(proposal, view)
    if reasons:
        detail = "; ".join(reasons[:3]) + ("…" if len(reasons) > 3 else "")
        return PlanningDecision(Phase.PLANNING, "ClusterChanged",
                                f"the cluster changed since proposal {proposal.id} was computed ({detail}): "
                                f"planning again; the new proposal needs approval", start_job=True)
    doing = f"moving {len(proposal.targets)} partition(s)" if proposal.targets else \
        f"electing the leaders away from broker(s) {sorted(intent.leaders_away)}"
    return PlanningDecision(Phase.EXECUTING, "Approved", f"proposal {proposal.id} approved: {doing}",
                            proposal=proposal)


def leaders_to_move(intent: PlanIntent, view: ClusterView) -> LeadersAway:
    """The selected partitions led by a broker that must lead nothing (:mod:`kpo.domain.leaders_away`)."""
    if not intent.leaders_away:
        return LeadersAway()
    selected = selected_topics(intent.request, view.topics, allow_internal=intent.allow_internal_topics)
    return leaders_away({tp: s for tp, s in view.partitions.items() if tp.topic in selected}, intent.leaders_away)


def _proposed(proposal: Proposal, intent: PlanIntent, unreached: str, *, awaiting_approval: bool) -> PlanningDecision:
    """Proposed: a plan that meets the goal ("Proposed"), or RelieveCapacity's best reachable state with the dirs it
    leaves above the threshold (``ThresholdUnreachable``, on every tick: the stored proposal keeps it)."""
    if unreached:
        return PlanningDecision(Phase.PROPOSED, THRESHOLD_UNREACHABLE,
                                f"{unreached}; {_awaiting(proposal, intent)}", proposal=proposal,
                                awaiting_approval=awaiting_approval)
    return PlanningDecision(Phase.PROPOSED, "Proposed", _awaiting(proposal, intent), proposal=proposal,
                            awaiting_approval=awaiting_approval)


def _invalid(problems: list[Problem]) -> PlanningDecision:
    return PlanningDecision(Phase.INVALID, problems[0].reason, "; ".join(map(str, problems)), problems=tuple(problems))


def _awaiting(proposal: Proposal, intent: PlanIntent) -> str:
    if intent.automatic:
        return f"proposal {proposal.id} computed; approved automatically"
    message = f"proposal {proposal.id} waits for approval: set spec.approval.proposalId to {proposal.id}"
    if intent.approved_id and intent.approved_id != proposal.id:
        message = f"spec.approval.proposalId {intent.approved_id} is not the current proposal {proposal.id}; " \
                  + message
    return message
