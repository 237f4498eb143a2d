"""One test per transition of the planning phases (planning.py's diagram)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from kpo.domain.model import Broker, ClusterView, DirCapacity, OngoingReassignment, PartitionState, TopicPartition
from kpo.domain.plan_contract import Goal, LogDirRef, PlanMetrics, PlanRequest
from kpo.domain.proposal import Proposal, threshold_unreached
from kpo.domain.topic_wait import TOPIC_GRACE, WAITING_FOR_TOPIC
from kpo.resources.partition_reassignment.lifecycle import Phase
from kpo.resources.partition_reassignment.plan_lifecycle import (
    Job,
    JobStatus,
    PlanIntent,
    decide_planning,
    needs_cluster,
    selected_topics,
)

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
REMOVE_3 = PlanRequest(goal=Goal.REMOVE_BROKERS, brokers=(3,), topics=("orders",))


def view(brokers: tuple[int, ...] = (1, 2, 3), moved: bool = False) -> ClusterView:
    parts = {T0: PartitionState((1, 3), 1, (1, 3)), T1: PartitionState((2, 3), 2, (2, 3))}
    if moved:
        parts[T0] = PartitionState((1, 2), 1, (1, 2))
    return ClusterView(brokers={b: Broker(b) for b in brokers}, partitions=parts,
                       topics=frozenset({"orders", "__consumer_offsets", "other"}))


PROPOSAL = Proposal(id="abc123", generation=1, targets={T0: (1, 2), T1: (2, 1)}, basis={T0: (1, 3), T1: (2, 3)})


def intent(*, automatic: bool = False, approved: str | None = None, stop: bool = False,
           request: PlanRequest = REMOVE_3) -> PlanIntent:
    return PlanIntent(generation=2, request=request, automatic=automatic, approved_id=approved, stop=stop)


def test_topic_selection_by_name_pattern_or_all_but_internal() -> None:
    topics = frozenset({"orders", "orders-eu", "__consumer_offsets", "other"})
    assert selected_topics(REMOVE_3, topics) == {"orders"}
    by_pattern = PlanRequest(goal=Goal.REBALANCE, topic_pattern="orders.*", exclude_topics=("orders-eu",))
    assert selected_topics(by_pattern, topics) == {"orders"}
    assert selected_topics(PlanRequest(goal=Goal.REBALANCE), topics) == {"orders", "orders-eu", "other"}


def test_pending_to_planning_starts_the_job() -> None:
    d = decide_planning(Phase.PENDING, intent(), Job(JobStatus.NONE), None, view())
    assert d.phase is Phase.PLANNING and d.start_job
    assert d.events[-1].message.startswith("Pending -> Planning")


def test_pending_to_invalid_when_too_few_brokers_would_remain() -> None:
    d = decide_planning(Phase.PENDING, intent(), Job(JobStatus.NONE), None, view(brokers=(1, 3)))
    assert d.phase is Phase.INVALID and d.reason == "NotEnoughBrokers" and not d.start_job


def test_pending_to_invalid_for_unknown_topics_and_offline_brokers_to_add() -> None:
    add = PlanRequest(goal=Goal.ADD_BROKERS, brokers=(4,), topics=("nope",))
    d = decide_planning(Phase.PENDING, intent(request=add), Job(JobStatus.NONE), None, view())
    assert d.phase is Phase.INVALID
    assert {p.reason for p in d.problems} >= {"UnknownTopic", "UnknownBroker", "NothingSelected"}


def test_pending_waits_for_a_planned_topic_not_there_yet_then_plans_or_is_invalid() -> None:
    now = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)
    fresh = PlanRequest(goal=Goal.REBALANCE, topics=("fresh",))
    d = decide_planning(Phase.PENDING, intent(request=fresh), Job(JobStatus.NONE), None, view(), now=now)
    assert (d.phase, d.reason, d.topic_missing_since) == (Phase.PENDING, WAITING_FOR_TOPIC, now)
    assert not d.start_job and [(e.type, e.reason) for e in d.events] == [("Normal", WAITING_FOR_TOPIC)]
    assert "'fresh'" in d.message and "30 s" in d.message
    within = decide_planning(Phase.PENDING, intent(request=fresh), Job(JobStatus.NONE), None, view(),
                             now=now + TOPIC_GRACE / 2, missing_since=now)
    assert (within.phase, within.topic_missing_since, within.events) == (Phase.PENDING, now, ())
    late = decide_planning(Phase.PENDING, intent(request=fresh), Job(JobStatus.NONE), None, view(),
                           now=now + TOPIC_GRACE, missing_since=now)
    assert (late.phase, late.reason, late.topic_missing_since) == (Phase.INVALID, "UnknownTopic", None)
    assert late.events[-1].type == "Warning"
    present = PlanRequest(goal=Goal.REBALANCE, topics=("orders",))
    found = decide_planning(Phase.PENDING, intent(request=present), Job(JobStatus.NONE), None, view(),
                            now=now + TOPIC_GRACE / 2, missing_since=now)
    assert found.phase is Phase.PLANNING and found.start_job and found.topic_missing_since is None


def test_a_planned_topic_missing_beside_a_lasting_problem_is_invalid_at_once() -> None:
    add = PlanRequest(goal=Goal.ADD_BROKERS, brokers=(4,), topics=("nope",))
    d = decide_planning(Phase.PENDING, intent(request=add), Job(JobStatus.NONE), None, view(),
                        now=datetime(2026, 11, 29, 4, 0, tzinfo=UTC))
    assert d.phase is Phase.INVALID and "UnknownBroker" in {p.reason for p in d.problems}


def test_pending_to_invalid_for_a_broker_to_demote_that_is_neither_live_nor_a_replica() -> None:
    demote = PlanRequest(goal=Goal.DEMOTE_BROKERS, brokers=(3, 7), topics=("orders",))
    d = decide_planning(Phase.PENDING, intent(request=demote), Job(JobStatus.NONE), None, view(brokers=(1, 2)))
    assert d.phase is Phase.INVALID and d.reason == "UnknownBroker"
    assert "[7]" in d.message and "[3, 7]" not in d.message, "broker 3 is down but still holds replicas of orders"
    fine = PlanRequest(goal=Goal.DEMOTE_BROKERS, brokers=(3,), topics=("orders",))
    assert decide_planning(Phase.PENDING, intent(request=fine), Job(JobStatus.NONE), None, view()).start_job


def test_pending_to_invalid_for_a_broker_to_add_that_is_also_excluded() -> None:
    add = PlanRequest(goal=Goal.ADD_BROKERS, brokers=(3,), exclude_brokers=(3,), topics=("orders",))
    d = decide_planning(Phase.PENDING, intent(request=add), Job(JobStatus.NONE), None, view())
    assert d.phase is Phase.INVALID and d.reason == "ExcludedBrokerToAdd"


def test_an_exclusion_pattern_takes_topics_out_of_the_selection() -> None:
    topics = frozenset({"orders", "logs-eu", "logs-us", "other"})
    scoped = PlanRequest(goal=Goal.REBALANCE, exclude_topic_pattern="logs-.*", exclude_topics=("other",))
    assert selected_topics(scoped, topics) == {"orders"}


def test_pending_to_stopped() -> None:
    assert decide_planning(Phase.PENDING, intent(stop=True), Job(JobStatus.NONE), None, view()).phase \
        is Phase.STOPPED


def test_planning_stays_while_the_job_runs_and_restarts_a_lost_job() -> None:
    running = decide_planning(Phase.PLANNING, intent(), Job(JobStatus.RUNNING), None, view())
    assert running.phase is Phase.PLANNING and not running.start_job
    lost = decide_planning(Phase.PLANNING, intent(), Job(JobStatus.NONE), None, view())
    assert lost.phase is Phase.PLANNING and lost.start_job


def test_a_tick_reads_the_cluster_unless_the_job_runs_a_proposal_waits_or_the_plan_is_stopped() -> None:
    waiting = Proposal(id="p1", generation=2, targets={T0: (1, 2)}, basis={T0: (2, 3)})
    assert not needs_cluster(Phase.PLANNING, intent(), Job(JobStatus.RUNNING), None)
    assert not needs_cluster(Phase.PROPOSED, intent(), Job(JobStatus.NONE), waiting)
    assert not needs_cluster(Phase.PLANNING, intent(stop=True), Job(JobStatus.SUCCEEDED), None)
    for phase, spec, job, proposal in (
            (Phase.PENDING, intent(), Job(JobStatus.NONE), None),
            (Phase.PLANNING, intent(), Job(JobStatus.NONE), None),
            (Phase.PLANNING, intent(), Job(JobStatus.SUCCEEDED), None),
            (Phase.PLANNING, intent(), Job(JobStatus.FAILED, "x"), None),
            (Phase.PROPOSED, intent(), Job(JobStatus.NONE), None),  # lost: planned again, from a snapshot
            (Phase.PROPOSED, intent(approved="p1"), Job(JobStatus.NONE), waiting),  # checked against the cluster
            (Phase.PROPOSED, intent(automatic=True), Job(JobStatus.NONE), waiting)):
        assert needs_cluster(phase, spec, job, proposal), (phase, spec, job)


def test_what_a_tick_decides_without_the_cluster_does_not_depend_on_it() -> None:
    unread = ClusterView(brokers={}, partitions={})
    waiting = Proposal(id="p1", generation=2, targets={T0: (1, 2)}, basis={T0: (2, 3)})
    for phase, spec, job, proposal in ((Phase.PLANNING, intent(), Job(JobStatus.RUNNING), None),
                                       (Phase.PROPOSED, intent(), Job(JobStatus.NONE), waiting),
                                       (Phase.PROPOSED, intent(approved="other"), Job(JobStatus.NONE), waiting),
                                       (Phase.PENDING, intent(stop=True), Job(JobStatus.NONE), None),
                                       (Phase.PROPOSED, intent(stop=True), Job(JobStatus.NONE), waiting)):
        assert not needs_cluster(phase, spec, job, proposal)
        assert decide_planning(phase, spec, job, proposal, unread) == \
            decide_planning(phase, spec, job, proposal, view()), (phase, spec)


def test_planning_stays_and_starts_again_saying_why_the_last_start_did_not_take() -> None:
    said = "SparkApplication kpo/drain-0a1b2c3d-plan-1-1 could not be created: failed calling webhook"
    d = decide_planning(Phase.PLANNING, intent(), Job(JobStatus.NONE, said), None, view())
    assert d.phase is Phase.PLANNING and d.start_job
    assert d.reason == "PlanningJobNotStarted" and said in d.message
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "PlanningJobNotStarted")]


def test_a_start_that_keeps_failing_is_said_by_one_event_not_one_per_tick() -> None:
    said = "SparkApplication kpo/drain-0a1b2c3d-plan-1-1 could not be created: failed calling webhook"
    again = decide_planning(Phase.PLANNING, intent(), Job(JobStatus.NONE, said), None, view(),
                            previous_reason="PlanningJobNotStarted")
    assert again.reason == "PlanningJobNotStarted" and again.start_job and not again.events
    after_an_outage = decide_planning(Phase.PLANNING, intent(), Job(JobStatus.NONE, said), None, view(),
                                      previous_reason="KafkaUnavailable")
    assert len(after_an_outage.events) == 1


def test_planning_to_failed_with_the_jobs_message() -> None:
    d = decide_planning(Phase.PLANNING, intent(), Job(JobStatus.FAILED, "OutOfMemoryError: Java heap space"), None,
                        view())
    assert d.phase is Phase.FAILED and "Java heap space" in d.message and d.events[-1].type == "Warning"


def test_planning_to_succeeded_when_there_is_nothing_to_move() -> None:
    empty = Proposal(id="e", generation=2, targets={}, basis={})
    d = decide_planning(Phase.PLANNING, intent(), Job(JobStatus.SUCCEEDED, proposal=empty), None, view())
    assert d.phase is Phase.SUCCEEDED and d.reason == "NothingToMove"


def test_planning_to_proposed_asks_for_the_id() -> None:
    d = decide_planning(Phase.PLANNING, intent(), Job(JobStatus.SUCCEEDED, proposal=PROPOSAL), None, view())
    assert d.phase is Phase.PROPOSED and d.proposal is PROPOSAL and d.awaiting_approval
    assert "spec.approval.proposalId to abc123" in d.message
    automatic = decide_planning(Phase.PLANNING, intent(automatic=True), Job(JobStatus.SUCCEEDED, proposal=PROPOSAL),
                                None, view())
    assert automatic.phase is Phase.PROPOSED and not automatic.awaiting_approval, "approved on the next tick"


def test_proposed_stays_until_the_shown_proposal_is_approved() -> None:
    waiting = decide_planning(Phase.PROPOSED, intent(), Job(JobStatus.NONE), PROPOSAL, view())
    assert waiting.phase is Phase.PROPOSED and waiting.awaiting_approval
    wrong = decide_planning(Phase.PROPOSED, intent(approved="other"), Job(JobStatus.NONE), PROPOSAL, view())
    assert wrong.phase is Phase.PROPOSED and "other is not the current proposal abc123" in wrong.message
    assert wrong.awaiting_approval


def test_proposed_to_executing_on_approval_by_id_or_automatically() -> None:
    for approval in (intent(approved="abc123"), intent(automatic=True)):
        d = decide_planning(Phase.PROPOSED, approval, Job(JobStatus.NONE), PROPOSAL, view())
        assert d.phase is Phase.EXECUTING and d.proposal is PROPOSAL


def test_proposed_to_planning_when_the_cluster_changed_since_the_snapshot() -> None:
    d = decide_planning(Phase.PROPOSED, intent(approved="abc123"), Job(JobStatus.NONE), PROPOSAL, view(moved=True))
    assert d.phase is Phase.PLANNING and d.start_job and d.reason == "ClusterChanged"
    assert "orders-0 is now on [1, 2], not [1, 3]" in d.message
    moving = ClusterView(brokers=view().brokers, partitions=view().partitions, topics=view().topics,
                         ongoing={T1: OngoingReassignment((2, 1, 3), (1,), (3,))})
    assert decide_planning(Phase.PROPOSED, intent(approved="abc123"), Job(JobStatus.NONE), PROPOSAL,
                           moving).phase is Phase.PLANNING


def test_proposed_to_planning_when_a_target_broker_is_gone() -> None:
    d = decide_planning(Phase.PROPOSED, intent(automatic=True), Job(JobStatus.NONE), PROPOSAL, view(brokers=(1, 3)))
    assert d.phase is Phase.PLANNING and "[2]" in d.message


def test_proposed_to_planning_when_the_proposal_is_lost() -> None:
    d = decide_planning(Phase.PROPOSED, intent(), Job(JobStatus.NONE), None, view())
    assert d.phase is Phase.PLANNING and d.start_job


def test_proposed_to_stopped() -> None:
    assert decide_planning(Phase.PROPOSED, intent(stop=True), Job(JobStatus.NONE), PROPOSAL, view()).phase \
        is Phase.STOPPED


def test_pending_to_invalid_when_every_live_broker_is_demoted_or_excluded_from_leadership() -> None:
    every = PlanRequest(goal=Goal.DEMOTE_BROKERS, brokers=(1, 2, 3), topics=("orders",))
    d = decide_planning(Phase.PENDING, intent(request=every), Job(JobStatus.NONE), None, view())
    assert d.phase is Phase.INVALID and d.reason == "NoBrokerLeftToLead" and not d.start_job
    assert d.events[-1].type == "Warning" and "every live broker ([1, 2, 3])" in d.events[-1].message
    excluded = PlanRequest(goal=Goal.REBALANCE, exclude_leaders=(1, 2, 3), topics=("orders",))
    d = decide_planning(Phase.PENDING, intent(request=excluded), Job(JobStatus.NONE), None, view())
    assert d.phase is Phase.INVALID and d.problems[0].field == "spec.plan.excludeLeaders"


def test_pending_to_invalid_when_every_broker_that_could_take_a_replica_is_excluded() -> None:
    every = PlanRequest(goal=Goal.REBALANCE, exclude_brokers=(1, 2, 3), topics=("orders",))
    d = decide_planning(Phase.PENDING, intent(request=every), Job(JobStatus.NONE), None, view())
    assert d.phase is Phase.INVALID and d.reason == "NoBrokerLeftToHold" and not d.start_job
    assert d.problems[0].field == "spec.plan.excludeBrokers" and "([1, 2, 3])" in d.problems[0].message
    # Draining broker 3 with 1 and 2 excluded leaves nowhere to put its replicas either.
    drain = PlanRequest(goal=Goal.REMOVE_BROKERS, brokers=(3,), exclude_brokers=(1, 2), topics=("orders",))
    d = decide_planning(Phase.PENDING, intent(request=drain), Job(JobStatus.NONE), None, view())
    assert d.phase is Phase.INVALID and "NoBrokerLeftToHold" in {p.reason for p in d.problems}
    some = PlanRequest(goal=Goal.REBALANCE, exclude_brokers=(1, 2), topics=("orders",))
    assert decide_planning(Phase.PENDING, intent(request=some), Job(JobStatus.NONE), None, view()).start_job


DEMOTE_1 = PlanRequest(goal=Goal.DEMOTE_BROKERS, brokers=(1,), topics=("orders",))
EMPTY = Proposal(id="e", generation=2, targets={}, basis={})


def test_planning_to_proposed_when_no_list_changes_but_a_demoted_broker_still_leads() -> None:
    # orders-0 [3, 1] led by 1 (reordered by hand, never elected); orders-1 [2, 3] led by 2.
    parts = {T0: PartitionState((3, 1), 1, (1, 3)), T1: PartitionState((2, 3), 2, (2, 3))}
    led = ClusterView(brokers=view().brokers, partitions=parts, topics=view().topics)
    demote = PlanIntent(generation=2, request=DEMOTE_1, automatic=False, approved_id=None,
                        leaders_away=frozenset({1}))
    d = decide_planning(Phase.PLANNING, demote, Job(JobStatus.SUCCEEDED, proposal=EMPTY), None, led)
    assert d.phase is Phase.PROPOSED and d.proposal is EMPTY and d.awaiting_approval
    assert "broker(s) [1] lead 1 selected partition(s)" in d.message
    approved = decide_planning(Phase.PROPOSED, PlanIntent(**{**demote.__dict__, "approved_id": "e"}),
                               Job(JobStatus.NONE), EMPTY, led)
    assert approved.phase is Phase.EXECUTING and "electing the leaders away from broker(s) [1]" in approved.message
    # Once elected (the leader is 3), the same empty plan has nothing left to do.
    elected = ClusterView(brokers=view().brokers, partitions={**parts, T0: PartitionState((3, 1), 3, (1, 3))},
                          topics=view().topics)
    done = decide_planning(Phase.PLANNING, demote, Job(JobStatus.SUCCEEDED, proposal=EMPTY), None, elected)
    assert done.phase is Phase.SUCCEEDED and done.reason == "NothingToMove"


def test_planning_to_succeeded_names_what_a_demoted_broker_must_keep_leading() -> None:
    alone = ClusterView(brokers=view().brokers, partitions={T0: PartitionState((3, 1), 1, (1,))},
                        topics=view().topics)
    demote = PlanIntent(generation=2, request=DEMOTE_1, automatic=True, approved_id=None,
                        leaders_away=frozenset({1}))
    d = decide_planning(Phase.PLANNING, demote, Job(JobStatus.SUCCEEDED, proposal=EMPTY), None, alone)
    assert d.phase is Phase.SUCCEEDED and "orders-0 (leader 1): no other in-sync replica" in d.message


def test_pending_to_invalid_names_each_disk_the_cluster_does_not_have_online() -> None:
    dirs = replace(view(), log_dirs={1: frozenset({"/a", "/b"}), 2: frozenset({"/a"})},
                   offline_dirs={1: frozenset({"/c"})})
    remove = PlanRequest(goal=Goal.REMOVE_DISKS, topics=("orders",), disks=(
        LogDirRef(broker=1, log_dir="/x"), LogDirRef(broker=1, log_dir="/c"), LogDirRef(broker=2, log_dir="/a"),
        LogDirRef(broker=7, log_dir="/a")))
    d = decide_planning(Phase.PENDING, intent(request=remove), Job(JobStatus.NONE), None, dirs)
    assert d.phase is Phase.INVALID and not d.start_job
    found = {(p.field, p.reason) for p in d.problems}
    assert found == {("spec.plan.disks[0]", "UnknownLogDir"), ("spec.plan.disks[1]", "LogDirOffline"),
                     ("spec.plan.disks", "NoLogDirLeft"), ("spec.plan.disks[3]", "UnknownBroker")}
    assert any("its online log dirs: /a, /b" in p.message for p in d.problems)
    fine = PlanRequest(goal=Goal.REMOVE_DISKS, topics=("orders",), disks=(LogDirRef(broker=1, log_dir="/b"),))
    assert decide_planning(Phase.PENDING, intent(request=fine), Job(JobStatus.NONE), None, dirs).phase is \
        Phase.PLANNING


def test_pending_to_invalid_for_a_disk_rebalance_of_a_broker_that_is_not_live() -> None:
    rebalance = PlanRequest(goal=Goal.REBALANCE_DISKS, brokers=(1, 9))
    d = decide_planning(Phase.PENDING, intent(request=rebalance), Job(JobStatus.NONE), None, view())
    assert d.phase is Phase.INVALID and [(p.field, p.reason) for p in d.problems] == [
        ("spec.plan.brokers", "UnknownBroker")]


def test_pending_to_invalid_for_a_disk_rebalance_of_a_broker_with_one_dir() -> None:
    dirs = replace(view(), log_dirs={1: frozenset({"/a", "/b"}), 2: frozenset({"/a"})})
    rebalance = PlanRequest(goal=Goal.REBALANCE_DISKS, brokers=(1, 2))
    d = decide_planning(Phase.PENDING, intent(request=rebalance), Job(JobStatus.NONE), None, dirs)
    assert d.phase is Phase.INVALID and [(p.field, p.reason) for p in d.problems] == [
        ("spec.plan.brokers", "OneLogDir")]
    assert "broker(s) 2 (/a) have one online log dir" in d.message
    fine = PlanRequest(goal=Goal.REBALANCE_DISKS, brokers=(1,))
    assert decide_planning(Phase.PENDING, intent(request=fine), Job(JobStatus.NONE), None, dirs).phase is \
        Phase.PLANNING


# ------------------------------------------------------------------------------------------------ RelieveCapacity

RELIEVE = PlanRequest(goal=Goal.RELIEVE_CAPACITY, threshold=0.8)
ABOVE = "log dir(s) /b of broker 1 stay above 0.8 of their file system (0.86): the best reachable state"


def relieve_metrics(*, reached: bool) -> PlanMetrics:
    return PlanMetrics(status="ok", goal=Goal.RELIEVE_CAPACITY, band_reached=reached,
                       message="" if reached else ABOVE)


def measured(capacity: dict[tuple[int, str], DirCapacity] | None = None) -> ClusterView:
    dirs = {1: frozenset({"/a", "/b"}), 2: frozenset({"/a"}), 3: frozenset({"/a"})}
    full = {(b, d): DirCapacity(1000, 100) for b, ds in dirs.items() for d in ds}
    return replace(view(), log_dirs=dirs, dir_capacity=full if capacity is None else capacity)


def test_pending_to_planning_for_relieve_capacity_when_every_dir_reports_its_capacity() -> None:
    d = decide_planning(Phase.PENDING, intent(request=RELIEVE), Job(JobStatus.NONE), None, measured())
    assert d.phase is Phase.PLANNING and d.start_job


def test_pending_to_invalid_for_relieve_capacity_when_a_dir_reports_no_capacity() -> None:
    older = {k: c for k, c in measured().dir_capacity.items() if k != (1, "/b") and k[0] != 3}
    d = decide_planning(Phase.PENDING, intent(request=RELIEVE), Job(JobStatus.NONE), None, measured(older))
    assert d.phase is Phase.INVALID and not d.start_job
    [problem] = d.problems
    assert (problem.field, problem.reason) == ("spec.plan.goal", "CapacityUnknown")
    assert "/b of broker 1, /a of broker 3" in problem.message and "broker(s) [1, 3]" in problem.message
    silent = replace(measured(), log_dirs={1: frozenset({"/a", "/b"}), 2: frozenset({"/a"})})
    d = decide_planning(Phase.PENDING, intent(request=RELIEVE), Job(JobStatus.NONE), None, silent)
    assert [p.reason for p in d.problems] == ["CapacityUnknown"] and "broker(s) [3] reported no log dirs" in d.message
    # The disk goals and the others do not need the capacity.
    rebalance = PlanRequest(goal=Goal.REBALANCE_DISKS)
    assert decide_planning(Phase.PENDING, intent(request=rebalance), Job(JobStatus.NONE), None,
                           measured({})).phase is Phase.PLANNING


def test_pending_to_invalid_for_relieve_capacity_when_no_broker_reports_a_log_dir() -> None:
    d = decide_planning(Phase.PENDING, intent(request=RELIEVE), Job(JobStatus.NONE), None, view())
    assert d.phase is Phase.INVALID and [(p.field, p.reason) for p in d.problems] == [("spec.plan.goal", "NoLogDirs")]


def test_planning_to_proposed_threshold_unreachable_with_the_best_reachable_state() -> None:
    job = Job(JobStatus.SUCCEEDED, proposal=PROPOSAL, metrics=relieve_metrics(reached=False))
    d = decide_planning(Phase.PLANNING, intent(request=RELIEVE), job, None, measured())
    assert d.phase is Phase.PROPOSED and d.reason == "ThresholdUnreachable" and d.awaiting_approval
    assert d.proposal is PROPOSAL
    assert d.message.startswith(ABOVE + "; proposal abc123 waits for approval")
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "ThresholdUnreachable")], \
        "a goal out of reach is a Warning, approval or not"
    reached = Job(JobStatus.SUCCEEDED, proposal=PROPOSAL, metrics=relieve_metrics(reached=True))
    assert decide_planning(Phase.PLANNING, intent(request=RELIEVE), reached, None, measured()).reason == "Proposed"


def test_proposed_stays_threshold_unreachable_on_every_tick_from_the_stored_proposal() -> None:
    stored = replace(PROPOSAL, unreached=ABOVE)
    d = decide_planning(Phase.PROPOSED, intent(request=RELIEVE), Job(JobStatus.NONE), stored, measured())
    assert d.phase is Phase.PROPOSED and d.reason == "ThresholdUnreachable" and ABOVE in d.message
    assert d.events == (), "no transition, so no new Event"
    approved = decide_planning(Phase.PROPOSED, intent(request=RELIEVE, approved="abc123"), Job(JobStatus.NONE),
                               stored, measured())
    assert approved.phase is Phase.EXECUTING


def test_planning_to_failed_threshold_unreachable_when_the_best_reachable_state_moves_nothing() -> None:
    empty = Proposal(id="e", generation=2, targets={}, basis={})
    job = Job(JobStatus.SUCCEEDED, proposal=empty, metrics=relieve_metrics(reached=False))
    d = decide_planning(Phase.PLANNING, intent(request=RELIEVE), job, None, measured())
    assert d.phase is Phase.FAILED and d.reason == "ThresholdUnreachable" and ABOVE in d.message
    assert d.events[-1].type == "Warning"


def test_planning_to_succeeded_when_every_dir_is_already_under_the_threshold() -> None:
    empty = Proposal(id="e", generation=2, targets={}, basis={})
    job = Job(JobStatus.SUCCEEDED, proposal=empty, metrics=relieve_metrics(reached=True))
    d = decide_planning(Phase.PLANNING, intent(request=RELIEVE), job, None, measured())
    assert d.phase is Phase.SUCCEEDED and d.reason == "NothingToMove"


def test_threshold_unreached_only_for_relieve_capacity_short_of_its_threshold() -> None:
    assert threshold_unreached(Goal.RELIEVE_CAPACITY, relieve_metrics(reached=False)) == ABOVE
    assert threshold_unreached(Goal.RELIEVE_CAPACITY, relieve_metrics(reached=True)) == ""
    assert threshold_unreached(Goal.RELIEVE_CAPACITY, None) == ""
    rebalance = PlanMetrics(status="ok", goal=Goal.REBALANCE, band_reached=False, message="band not reached")
    assert threshold_unreached(Goal.REBALANCE, rebalance) == ""
