"""Each kind's status.py maps both ways through the API status model: what a decision writes is what the CRD schema
accepts, and reading it back gives the life cycle exactly the memory it needs for the next tick."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kpo.api import PartitionReassignmentStatus, PlanSummary, PreferredLeaderElectionStatus, TopicPartitionCountStatus
from kpo.api import Proposal as ProposalStatus
from kpo.domain.keyremap import remap_report
from kpo.domain.model import Broker, ClusterView, KafkaRefusal, PartitionState, TopicPartition
from kpo.domain.reassignment import Target
from kpo.domain.stall import STALLED_CODE, Stall, Watch
from kpo.resources.partition_reassignment import lifecycle as pr
from kpo.resources.partition_reassignment import status as pr_status
from kpo.resources.preferred_leader_election import lifecycle as ple
from kpo.resources.preferred_leader_election import status as ple_status
from kpo.resources.topic_partition_count import lifecycle as tpc
from kpo.resources.topic_partition_count import status as tpc_status

NOW = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
P0, P1, P2 = (TopicPartition("orders", p) for p in range(3))


def read_back(model: Any, status: dict[str, Any]) -> dict[str, Any]:
    """The status as the API server would store it and kpo read it on the next tick."""
    dumped: dict[str, Any] = model.model_validate(status).model_dump(mode="json", by_alias=True, exclude_unset=True)
    return dumped


# ------------------------------------------------------------------------------------------ PartitionReassignment


def executing() -> tuple[pr.Intent, pr.Decision, ClusterView]:
    view = ClusterView(brokers={b: Broker(b) for b in (1, 2, 3, 4)},
                       partitions={tp: PartitionState((1, 2, 3), 1, (1, 2, 3)) for tp in (P0, P1, P2)},
                       topics=frozenset({"orders"}), min_insync={"orders": 1})
    intent = pr.Intent(generation=4, targets={tp: Target((2, 3, 4)) for tp in (P0, P1, P2)})
    decision = pr.decide(intent, pr.Memory(), pr.Observation(view))
    assert decision.phase is pr.Phase.EXECUTING and decision.submit
    return intent, decision, view


def test_a_reassignment_remembers_its_moves_and_refusals_through_its_status() -> None:
    intent, decision, view = executing()
    owned = {P0: (2, 3, 4), P1: (2, 3, 4)}
    failures = {P2: KafkaRefusal("INVALID_REPLICA_ASSIGNMENT", "broker 4 has no log dir")}
    written = pr_status.status_of({}, intent, decision, view, recorded_originals={}, owned=owned, failures=failures,
                                  rollback_name="move-rollback", now=NOW)
    assert read_back(PartitionReassignmentStatus, written) == written
    originals = {tp: (1, 2, 3) for tp in (P0, P1, P2)}
    memory = pr_status.memory_of(written, originals)
    # A move seen for the first time starts its stall clock at this tick (kpo.domain.stall).
    assert memory == pr.Memory(phase=pr.Phase.EXECUTING, observed_generation=4, owned=owned, failures=failures,
                               originals=originals, watches={tp: Watch(0, NOW) for tp in owned})
    assert written["progress"]["startedAt"] == "2026-03-01T09:30:00Z" and written["progress"]["total"] == 3


def test_a_reassignment_waiting_for_its_topic_remembers_since_when_and_forgets_it_when_it_appears() -> None:
    intent, _, view = executing()
    waiting = pr.Intent(generation=4, targets={TopicPartition("new-topic", 0): Target((1, 2))})
    decision = pr.decide(waiting, pr.Memory(), pr.Observation(view, now=NOW))
    written = pr_status.status_of({}, waiting, decision, view, recorded_originals={}, owned={}, failures={},
                                  rollback_name=None, now=NOW)
    assert read_back(PartitionReassignmentStatus, written) == written
    assert written["topicMissingSince"] == "2026-03-01T09:30:00Z"
    memory = pr_status.memory_of(written, {})
    assert (memory.phase, memory.topic_missing_since) == (pr.Phase.PENDING, NOW)
    _, going_on, _ = executing()
    cleared = pr_status.status_of(written, intent, going_on, view, recorded_originals={}, owned={}, failures={},
                                  rollback_name=None, now=NOW)
    assert cleared["topicMissingSince"] is None, "a JSON merge patch's null removes the field"


def test_the_start_time_survives_the_ticks_that_follow() -> None:
    intent, decision, view = executing()
    first = pr_status.status_of({}, intent, decision, view, recorded_originals={}, owned={P0: (2, 3, 4)},
                                failures={}, rollback_name=None, now=NOW)
    later = pr_status.status_of(first, intent, decision, view, recorded_originals={}, owned={P0: (2, 3, 4)},
                                failures={}, rollback_name=None, now=NOW + timedelta(minutes=5))
    assert later["progress"]["startedAt"] == first["progress"]["startedAt"]
    ready = next(c for c in later["conditions"] if c["type"] == "Ready")
    assert ready["lastTransitionTime"] == "2026-03-01T09:30:00Z", "unchanged conditions keep their time"


def test_a_finished_plan_sets_how_long_it_took_against_its_estimate() -> None:
    # Issue 26, item 4: the estimate the proposal stated stays, and the tick that finds the moves ended writes
    # status.duration beside it, once.
    intent, decision, view = executing()
    proposal = {"id": "p-1", "estimatedSeconds": 121, "estimateAtThrottleSeconds": 120,
                "estimateNote": "...; Kafka will likely finish sooner than the throttle alone allows: broker 3 ..."}
    running = pr_status.status_of({"proposal": proposal}, intent, decision, view, recorded_originals={},
                                  owned={P0: (2, 3, 4)}, failures={}, rollback_name=None, now=NOW)
    assert "duration" not in running
    done = replace(decision, phase=pr.Phase.SUCCEEDED)
    finished = pr_status.status_of({**running, "proposal": proposal}, intent, done, view, recorded_originals={},
                                   owned={}, failures={}, rollback_name=None, now=NOW + timedelta(seconds=38))
    assert finished["duration"] == {
        "estimatedSeconds": 121, "tookSeconds": 38,
        "summary": "took 38 s, 0.31 x the estimate of 121 s (120 s of bytes over the throttle); the proposal "
                   "expected Kafka's replication quota to let the moves through sooner"}
    assert read_back(PartitionReassignmentStatus, finished)["duration"] == finished["duration"]
    again = pr_status.status_of({**finished, "proposal": proposal}, intent, done, view, recorded_originals={},
                                owned={}, failures={}, rollback_name=None, now=NOW + timedelta(seconds=90))
    assert "duration" not in again, "written once: a later tick does not stretch it"


def test_a_plan_without_an_estimate_has_no_duration() -> None:
    intent, decision, view = executing()
    proposal = {"id": "p-1", "estimateNote": "no estimate without execution.throttle"}
    running = pr_status.status_of({"proposal": proposal}, intent, decision, view, recorded_originals={},
                                  owned={P0: (2, 3, 4)}, failures={}, rollback_name=None, now=NOW)
    done = replace(decision, phase=pr.Phase.SUCCEEDED)
    finished = pr_status.status_of({**running, "proposal": proposal}, intent, done, view, recorded_originals={},
                                   owned={}, failures={}, rollback_name=None, now=NOW + timedelta(seconds=40))
    assert "duration" in finished and finished["duration"] is None, "nothing to compare: written as removed"


def test_a_new_proposal_removes_the_duration_of_the_run_before_it() -> None:
    proposal, summary = ProposalStatus(id="p-2", estimated_seconds=90), PlanSummary(partitions=4)
    ran = {"phase": "Succeeded", "duration": {"estimatedSeconds": 60, "tookSeconds": 75}}
    fields = pr_status.planning_status(ran, phase=pr.Phase.PROPOSED, generation=2, conditions=[], now=NOW,
                                       proposal=proposal, summary=summary)
    assert fields["proposal"] == {"id": "p-2", "estimatedSeconds": 90} and fields["summary"] == {"partitions": 4}
    assert "duration" in fields and fields["duration"] is None, "null removes it (merge patch)"
    assert read_back(PartitionReassignmentStatus, fields) == fields
    planning = pr_status.planning_status({"phase": "Planning"}, phase=pr.Phase.PROPOSED, generation=2, conditions=[],
                                         now=NOW, proposal=proposal, summary=summary)
    assert "duration" not in planning
    waiting = pr_status.planning_status(ran, phase=pr.Phase.PLANNING, generation=3, conditions=[], now=NOW)
    assert set(waiting) == {"phase", "observedGeneration", "conditions"}, "no proposal: nothing else is touched"


def test_a_reassignment_claims_what_it_wants_and_holds_and_its_throttle_keeps_it_live() -> None:
    intent, decision, view = executing()
    written = pr_status.status_of({}, intent, decision, view, recorded_originals={}, owned={P0: (2, 3, 4)},
                                  failures={}, rollback_name=None, now=NOW)
    claim = pr_status.claim_of("ns/move", "2026-03-01T09:00:00Z", [P0, P1, P2], written)
    assert claim.live and claim.partitions == {P0, P1, P2} and claim.in_flight == {P0}
    done = {**written, "phase": "Succeeded", "inFlight": []}
    assert not pr_status.claim_of("ns/move", "", [P0], done).live
    throttled = {**done, "throttle": {"rate": 1000, "brokers": [4], "topics": []}}
    assert pr_status.claim_of("ns/move", "", [P0], throttled).live


def test_an_empty_status_is_a_fresh_resource() -> None:
    assert pr_status.memory_of({}, {}) == pr.Memory()


# -------------------------------------------------------------------------------------------- TopicPartitionCount


@pytest.mark.parametrize(("decision", "requested"), [
    (tpc.Decision(tpc.Phase.GROWING, "Growing", "6 -> 12", current=6, report=remap_report(6, 12)), 12),
    (tpc.Decision(tpc.Phase.SUCCEEDED, "Succeeded", "12 partitions", current=12, report=remap_report(6, 12)), None),
    (tpc.Decision(tpc.Phase.INVALID, "Decrease", "12 -> 6 cannot be done"), None),
])
def test_a_partition_count_remembers_its_phase_and_the_count_it_asked_for(decision: tpc.Decision,
                                                                          requested: int | None) -> None:
    intent = tpc.Intent(generation=2, topic="orders", partitions=12)
    written = tpc_status.status_of({}, intent, decision, NOW)
    assert read_back(TopicPartitionCountStatus, written) == written
    assert tpc_status.memory_of(written) == tpc.Memory(phase=decision.phase, observed_generation=2,
                                                       reason=decision.reason, requested=requested)


def test_the_key_remap_report_reads_back_exactly() -> None:
    sample = tpc.KeySample({(False,): 30, (True,): 70})
    decision = tpc.Decision(tpc.Phase.GROWING, "Growing", "6 -> 12", current=6, report=remap_report(6, 12),
                            sample=sample)
    written = tpc_status.status_of({}, tpc.Intent(generation=1, topic="orders", partitions=12), decision, NOW)
    remap = written["keyRemap"]
    assert remap["movedKeySpace"] == "1/2" and remap["sampledMessages"] == 100
    assert remap["sampledMovedFraction"] == "0.7"
    assert TopicPartitionCountStatus.model_validate(written).key_remap is not None


# ---------------------------------------------------------------------------------------- PreferredLeaderElection


def test_an_election_remembers_its_runs_and_next_run_through_its_status() -> None:
    run = ple.Run(started_at=NOW, finished_at=NOW + timedelta(seconds=2), selected=3, elected=(P0,),
                  already_preferred=1, failures={P2: KafkaRefusal("PREFERRED_LEADER_NOT_AVAILABLE", "down")})
    decision = ple.Decision(ple.Phase.SCHEDULED, "Elected", "elected 1", run=run, runs=3,
                            next_run_at=NOW + timedelta(hours=1))
    intent = ple.Intent(generation=5, selection=ple.Selection(ple.SelectionKind.ALL), interval=timedelta(hours=1))
    written = ple_status.status_of({}, intent, decision, NOW)
    assert read_back(PreferredLeaderElectionStatus, written) == written
    assert written["nextRunAt"] == "2026-03-01T10:30:00Z"
    assert written["lastRun"]["failures"] == [{"topic": "orders", "partition": 2,
                                               "reason": "PREFERRED_LEADER_NOT_AVAILABLE", "message": "down"}]
    assert ple_status.memory_of(written) == ple.Memory(phase=ple.Phase.SCHEDULED, observed_generation=5,
                                                       reason="Elected", runs=3, next_run_at=NOW + timedelta(hours=1))


def test_a_one_off_election_removes_the_next_run() -> None:
    decision = ple.Decision(ple.Phase.SUCCEEDED, "Elected", "elected 0", runs=1)
    intent = ple.Intent(generation=1, selection=ple.Selection(ple.SelectionKind.ALL))
    written = ple_status.status_of({"nextRunAt": "2026-03-01T10:30:00Z"}, intent, decision, NOW)
    assert "nextRunAt" in written and written["nextRunAt"] is None, "None removes the field (JSON merge patch)"
    assert ple_status.memory_of({k: v for k, v in written.items() if v is not None}).next_run_at is None


def test_an_explicit_resource_claims_its_spec_and_an_approved_plan_its_proposal() -> None:
    def proposal(proposal_id: str) -> frozenset[TopicPartition]:
        assert proposal_id == "p-1"
        return frozenset({P0, P1, P2})

    explicit = {"partitions": [{"topic": "orders", "partition": 1, "replicas": [1, 2]}]}
    assert pr_status.wanted_partitions(explicit, {}, proposal) == {P1}
    planned = {"plan": {"goal": "RemoveBrokers", "brokers": [3]}}
    approved = {"phase": "Executing", "proposal": {"id": "p-1", "partitions": 3}}
    assert pr_status.wanted_partitions(planned, approved, proposal) == {P0, P1, P2}
    assert pr_status.wanted_partitions(planned, {**approved, "phase": "Reverting"}, proposal) == {P0, P1, P2}
    for waiting in ("Planning", "Proposed", "Succeeded"):
        assert pr_status.wanted_partitions(planned, {**approved, "phase": waiting}, proposal) == frozenset(), waiting


def test_a_stall_cancelled_under_on_stall_cancel_is_listed_as_cancelled_and_reads_back() -> None:
    intent, decision, view = executing()
    stall = Stall(brokers=(4,), down=(4,), copied=1000, since=NOW)
    flagged = pr.Decision(pr.Phase.EXECUTING, "Executing", "", targets=decision.targets,
                          classification=decision.classification, stalled={P0: stall})
    refusal = KafkaRefusal(STALLED_CODE, "no byte progress for 60s or more: cancelled")
    written = pr_status.status_of({}, intent, flagged, view, recorded_originals={}, owned={}, failures={P0: refusal},
                                  rollback_name=None, now=NOW)
    assert read_back(PartitionReassignmentStatus, written) == written
    assert written["stalledMoves"] == [{"topic": "orders", "partition": 0, "brokers": [4], "down": [4],
                                        "copiedBytes": 1000, "since": "2026-03-01T09:30:00Z", "cancelled": True}]
    assert pr_status.memory_of(written, {}).stalled == {P0: Stall((4,), (4,), 1000, NOW, cancelled=True)}
    # Not accepted (still in flight): listed, not cancelled. A new run cleared the failure: not listed any more.
    kept = pr_status.status_of({}, intent, flagged, view, recorded_originals={}, owned={P0: (2, 3, 4)}, failures={},
                               rollback_name=None, now=NOW)
    assert [m["cancelled"] for m in kept["stalledMoves"]] == [False]
    gone = replace(flagged, stalled={P0: Stall((4,), (4,), 1000, NOW, cancelled=True)})
    assert pr_status.status_of({}, intent, gone, view, recorded_originals={}, owned={}, failures={},
                               rollback_name=None, now=NOW)["stalledMoves"] == []


def test_a_move_clock_remembers_its_down_destinations() -> None:
    intent, decision, view = executing()
    watching = replace(decision, watches={P0: Watch(500, NOW, down=(4,))})
    written = pr_status.status_of({}, intent, watching, view, recorded_originals={}, owned={P0: (2, 3, 4)},
                                  failures={}, rollback_name=None, now=NOW)
    assert pr_status.memory_of(written, {}).watches == {P0: Watch(500, NOW, down=(4,))}


def test_a_moves_lag_clock_and_a_stall_behind_read_back_and_a_move_without_a_lag_writes_none() -> None:
    intent, decision, view = executing()
    later = NOW + timedelta(seconds=90)
    watching = replace(decision, watches={P0: Watch(500, later, behind=7000, closing_since=NOW)},
                       stalled={P0: Stall((4,), (), 500, NOW, behind=8000)})
    written = pr_status.status_of({}, intent, watching, view, recorded_originals={}, owned={P0: (2, 3, 4)},
                                  failures={}, rollback_name=None, now=later)
    assert read_back(PartitionReassignmentStatus, written) == written
    move = written["inFlight"][0]
    assert (move["behindBytes"], move["closingAt"]) == (7000, "2026-03-01T09:30:00Z")
    assert written["stalledMoves"][0]["behindBytes"] == 8000
    memory = pr_status.memory_of(written, {})
    assert memory.watches == {P0: Watch(500, later, behind=7000, closing_since=NOW)}
    assert memory.stalled == {P0: Stall((4,), (), 500, NOW, behind=8000)}
    plain = replace(decision, watches={P0: Watch(500, later)})
    unjudged = pr_status.status_of({}, intent, plain, view, recorded_originals={}, owned={P0: (2, 3, 4)},
                                   failures={}, rollback_name=None, now=later)
    assert "behindBytes" not in unjudged["inFlight"][0] and "closingAt" not in unjudged["inFlight"][0]


def test_paused_time_is_counted_apart_and_the_eta_does_not_grow_while_paused() -> None:
    intent, decision, view = executing()
    owned = {P0: (2, 3, 4)}
    first = pr_status.status_of({}, intent, decision, view, recorded_originals={}, owned=owned, failures={},
                                rollback_name=None, now=NOW)
    first["progress"]["etaSeconds"] = 100
    paused = pr.Decision(pr.Phase.PAUSED, "Paused", "", targets=decision.targets,
                         classification=decision.classification)
    ticks = [first]
    for minute in (1, 5):
        ticks.append(pr_status.status_of(ticks[-1], intent, paused, view, recorded_originals={}, owned=owned,
                                         failures={}, rollback_name=None, now=NOW + timedelta(minutes=minute)))
    assert read_back(PartitionReassignmentStatus, ticks[-1]) == ticks[-1]
    progress = ticks[-1]["progress"]
    assert progress["elapsedSeconds"] == 60 and progress["pausedSeconds"] == 240
    assert progress["pausedSince"] == "2026-03-01T09:31:00Z" and progress["etaSeconds"] <= 100
    resumed = pr_status.status_of(ticks[-1], intent, decision, view, recorded_originals={}, owned=owned, failures={},
                                  rollback_name=None, now=NOW + timedelta(minutes=6))["progress"]
    assert resumed["elapsedSeconds"] == 60 and resumed["pausedSeconds"] == 300
    assert resumed["pausedSince"] is None, "removed by the merge patch of the status"
