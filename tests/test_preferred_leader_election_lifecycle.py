"""One test per transition of the PreferredLeaderElection life cycle (see lifecycle.py's diagram), and the counting
of a run's outcome."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kpo.domain.access import NOT_AUTHORIZED
from kpo.domain.model import ClusterView, KafkaRefusal, PartitionState, TopicPartition
from kpo.domain.topic_wait import TOPIC_GRACE, WAITING_FOR_TOPIC
from kpo.resources.preferred_leader_election.lifecycle import (
    ELECTED,
    KAFKA_UNAVAILABLE,
    NOTHING_SELECTED,
    PARTITIONS_REFUSED,
    REASSIGNMENT_NOT_SUCCEEDED,
    TRANSITIONS,
    UNKNOWN_REASSIGNMENT,
    WAITING_FOR_REASSIGNMENT,
    Decision,
    Election,
    Intent,
    Memory,
    Need,
    Observation,
    Phase,
    Reassignment,
    Run,
    Selection,
    SelectionKind,
    decide,
    finish,
    refused_run,
    resolve,
    tally,
    unavailable_run,
)

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
A0, A1, A2 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("orders", 2)
B0 = TopicPartition("billing-eu", 0)
NOT_NEEDED = KafkaRefusal("ELECTION_NOT_NEEDED", "Leader election not needed for topic partition.")
NOT_AVAILABLE = KafkaRefusal("PREFERRED_LEADER_NOT_AVAILABLE", "The preferred leader was not available.")
DENIED = KafkaRefusal("CLUSTER_AUTHORIZATION_FAILED", "Cluster authorization failed.")


def cluster(*partitions: TopicPartition, topics: tuple[str, ...] = ()) -> ClusterView:
    states = {tp: PartitionState((1, 2, 3), 2, (1, 2, 3)) for tp in partitions}
    return ClusterView(brokers={}, partitions=states, topics=frozenset({tp.topic for tp in partitions} | set(topics)))


ORDERS = cluster(A0, A1, A2, B0)
TOPICS = Selection(SelectionKind.TOPICS, topics=("orders",))
EVERY_MINUTE = timedelta(minutes=1)


def intent(selection: Selection = TOPICS, generation: int = 1, **kwargs: object) -> Intent:
    return Intent(generation=generation, selection=selection, **kwargs)  # type: ignore[arg-type]


def observe(view: ClusterView | None = ORDERS, after: Reassignment | None = None, now: datetime = NOW) -> Observation:
    return Observation(now=now, after=after, cluster=view)


def memory(phase: Phase, reason: str = "", runs: int = 0, next_run_at: datetime | None = None,
           generation: int = 1) -> Memory:
    return Memory(phase=phase, observed_generation=generation, reason=reason, runs=runs, next_run_at=next_run_at)


def conditions(decision: Decision) -> dict[str, bool]:
    return {c.type: c.status for c in decision.conditions}


def answered(*elected: TopicPartition, **refused: KafkaRefusal) -> dict[TopicPartition, KafkaRefusal | None]:
    answers: dict[TopicPartition, KafkaRefusal | None] = dict.fromkeys(elected)
    for name, refusal in refused.items():
        topic, partition = name.rsplit("_", 1)
        answers[TopicPartition(topic, int(partition))] = refusal
    return answers


def run_of(electing: Decision, answers: dict[TopicPartition, KafkaRefusal | None]) -> Run:
    assert electing.election is not None
    return tally(electing.selected, electing.election, answers, NOW, NOW + timedelta(seconds=1))


def test_every_phase_has_a_transition_map() -> None:
    assert set(TRANSITIONS) == set(Phase)


# ------------------------------------------------------------------------------------------------------- Pending


def test_pending_asks_for_the_cluster_before_deciding_a_run() -> None:
    d = decide(intent(), Memory(), observe(view=None))
    assert d.needs == {Need.CLUSTER} and not d.idle and d.election is None and not d.events


def test_pending_to_electing_names_exactly_the_selected_partitions() -> None:
    d = decide(intent(), Memory(), observe())
    assert d.phase is Phase.ELECTING
    assert d.election == Election((A0, A1, A2), unclean=False)
    assert d.selected == (A0, A1, A2)
    assert conditions(d) == {"Ready": False, "Progressing": True, "Stalled": False}


def _led_by(preferred: dict[TopicPartition, int]) -> ClusterView:
    states = {tp: PartitionState((first, *(b for b in (1, 2, 3) if b != first)), 2, (1, 2, 3))
              for tp, first in preferred.items()}
    return ClusterView(brokers={}, partitions=states, topics=frozenset(tp.topic for tp in preferred))


def test_pending_to_electing_leaves_out_partitions_whose_preferred_replica_is_excluded() -> None:
    view = _led_by({A0: 1, A1: 2, A2: 3, B0: 2})
    d = decide(intent(Selection(), exclude_leaders=frozenset({2})), Memory(), observe(view))
    assert d.phase is Phase.ELECTING and d.excluded == 2
    assert d.election == Election((A0, A2), unclean=False), "every partition, but as an explicit list"
    assert "2 left out" in d.message
    run = finish(intent(Selection(), exclude_leaders=frozenset({2})), Memory(), d, run_of(d, answered(A0, A2)))
    assert run.run is not None and run.run.excluded == 2 and "2 left out" in run.message


def test_pending_to_invalid_when_every_selected_partition_is_excluded() -> None:
    view = _led_by({A0: 2, A1: 2})
    d = decide(intent(exclude_leaders=frozenset({2})), Memory(), observe(view))
    assert d.phase is Phase.INVALID and d.reason == NOTHING_SELECTED and d.election is None
    assert "excludeLeaders [2]" in d.message


def test_pending_to_electing_for_every_partition_sends_no_list() -> None:
    d = decide(intent(Selection()), Memory(), observe())
    assert d.phase is Phase.ELECTING
    assert d.election == Election(None), "kafka-leader-election --all-topic-partitions: no partition list"
    assert d.selected == (B0, A0, A1, A2)


def test_pending_to_electing_with_a_pattern_matching_whole_names_only() -> None:
    view = cluster(A0, B0, TopicPartition("old-billing-eu", 0))
    d = decide(intent(Selection(SelectionKind.PATTERN, pattern="billing-.*")), Memory(), observe(view))
    assert d.election == Election((B0,))


def test_pending_to_electing_unclean_for_explicit_partitions() -> None:
    d = decide(intent(Selection(SelectionKind.PARTITIONS, partitions=(A1,)), unclean=True), Memory(), observe())
    assert d.election == Election((A1,), unclean=True)


def test_pending_waits_for_a_topic_not_there_yet_and_says_so_once() -> None:
    named = intent(Selection(SelectionKind.TOPICS, topics=("orders", "nope")))
    d = decide(named, Memory(), observe())
    assert (d.phase, d.reason, d.topic_missing_since) == (Phase.PENDING, WAITING_FOR_TOPIC, NOW)
    assert d.election is None and "'nope' does not exist" in d.message and "30 s" in d.message
    assert conditions(d) == {"Ready": False, "Progressing": True, "Stalled": False}
    assert [(e.type, e.reason) for e in d.events] == [("Normal", WAITING_FOR_TOPIC)]
    waited = Memory(observed_generation=1, reason=WAITING_FOR_TOPIC, topic_missing_since=NOW)
    later = decide(named, waited, observe(now=NOW + TOPIC_GRACE / 2))
    assert (later.phase, later.topic_missing_since, later.events) == (Phase.PENDING, NOW, ())


def test_pending_goes_on_when_the_topic_it_waited_for_appears() -> None:
    waited = Memory(observed_generation=1, reason=WAITING_FOR_TOPIC, topic_missing_since=NOW)
    d = decide(intent(Selection(SelectionKind.TOPICS, topics=("billing-eu",))), waited,
               observe(now=NOW + TOPIC_GRACE / 2))
    assert d.phase is Phase.ELECTING and d.topic_missing_since is None
    assert d.election is not None and d.election.partitions == (B0,)


def test_pending_to_invalid_for_an_unknown_topic_sends_nothing() -> None:
    waited = Memory(observed_generation=1, reason=WAITING_FOR_TOPIC, topic_missing_since=NOW - TOPIC_GRACE)
    d = decide(intent(Selection(SelectionKind.TOPICS, topics=("orders", "nope"))), waited, observe())
    assert d.phase is Phase.INVALID and d.election is None and d.topic_missing_since is None
    assert d.reason == "UnknownTopic" and "spec.topics[1]" in d.message and "nothing was sent" in d.message
    assert conditions(d) == {"Ready": False, "Progressing": False, "Stalled": True}
    assert d.events[-1].type == "Warning" and d.events[-1].message.startswith("Pending -> Invalid")


def test_an_unknown_topic_beside_an_unknown_partition_is_invalid_at_once() -> None:
    selection = Selection(SelectionKind.PARTITIONS, partitions=(TopicPartition("nope", 0), TopicPartition("orders", 7)))
    d = decide(intent(selection), Memory(), observe())
    assert d.phase is Phase.INVALID and {p.reason for p in d.problems} == {"UnknownTopic", "UnknownPartition"}


def test_pending_to_invalid_for_an_unknown_partition() -> None:
    selection = Selection(SelectionKind.PARTITIONS, partitions=(A0, TopicPartition("orders", 7)))
    d = decide(intent(selection), Memory(), observe())
    assert d.phase is Phase.INVALID and d.reason == "UnknownPartition"
    assert "spec.partitions[1].partition" in d.message and "3 partition(s)" in d.message


def test_pending_to_invalid_when_a_one_off_selection_matches_nothing() -> None:
    d = decide(intent(Selection(SelectionKind.PATTERN, pattern="payments-.*")), Memory(), observe())
    assert d.phase is Phase.INVALID and d.reason == NOTHING_SELECTED
    assert "matches no partition" in d.message and d.election is None


def test_pending_to_scheduled_when_a_scheduled_selection_matches_nothing_yet() -> None:
    selection = Selection(SelectionKind.PATTERN, pattern="payments-.*")
    d = decide(intent(selection, interval=EVERY_MINUTE), Memory(), observe())
    assert d.phase is Phase.SCHEDULED and d.reason == NOTHING_SELECTED
    assert d.next_run_at == NOW + EVERY_MINUTE
    assert conditions(d) == {"Ready": False, "Progressing": False, "Stalled": True}
    assert d.events and d.events[0].type == "Warning"


def test_pending_to_invalid_when_after_names_no_reassignment() -> None:
    d = decide(intent(after="move"), Memory(), observe(after=Reassignment("move", found=False)))
    assert d.phase is Phase.INVALID and d.reason == UNKNOWN_REASSIGNMENT and "'move'" in d.message


def test_pending_to_waiting_while_the_reassignment_runs() -> None:
    d = decide(intent(after="move"), Memory(), observe(after=Reassignment("move", True, "Executing")))
    assert d.phase is Phase.WAITING and d.reason == WAITING_FOR_REASSIGNMENT and "Executing" in d.message
    assert d.election is None
    assert conditions(d) == {"Ready": False, "Progressing": True, "Stalled": False}


def test_pending_to_waiting_for_a_success_that_belongs_to_an_older_spec() -> None:
    d = decide(intent(after="move"), Memory(), observe(after=Reassignment("move", True, "Succeeded", current=False)))
    assert d.phase is Phase.WAITING and "older spec" in d.message


def test_pending_to_waiting_stalled_when_the_reassignment_ended_without_success() -> None:
    d = decide(intent(after="move"), Memory(), observe(after=Reassignment("move", True, "Failed")))
    assert d.phase is Phase.WAITING and d.reason == REASSIGNMENT_NOT_SUCCEEDED
    assert conditions(d)["Stalled"] is True
    assert d.events[0].type == "Warning"


def test_pending_to_electing_once_the_reassignment_succeeded() -> None:
    d = decide(intent(after="move"), Memory(), observe(after=Reassignment("move", True, "Succeeded")))
    assert d.phase is Phase.ELECTING


# ------------------------------------------------------------------------------------------------------ Electing


def electing(i: Intent | None = None, m: Memory | None = None) -> Decision:
    d = decide(i or intent(), m or Memory(), observe())
    assert d.phase is Phase.ELECTING
    return d


def test_electing_to_succeeded_counts_elected_and_already_preferred() -> None:
    d = electing()
    done = finish(intent(), Memory(), d, run_of(d, answered(A0, orders_1=NOT_NEEDED, orders_2=NOT_NEEDED)))
    assert done.phase is Phase.SUCCEEDED and done.reason == ELECTED
    assert done.run is not None and done.run.elected == (A0,) and done.run.already_preferred == 2
    assert done.runs == 1 and done.next_run_at is None
    assert conditions(done) == {"Ready": True, "Progressing": False, "Stalled": False}
    assert done.events[0].type == "Normal" and done.events[0].message.startswith("Pending -> Succeeded: run 1")


def test_electing_to_succeeded_with_partitions_refused_lists_them() -> None:
    d = electing()
    done = finish(intent(), Memory(), d, run_of(d, answered(A0, orders_1=NOT_NEEDED, orders_2=NOT_AVAILABLE)))
    assert done.phase is Phase.SUCCEEDED and done.reason == PARTITIONS_REFUSED
    assert done.run is not None and dict(done.run.failures) == {A2: NOT_AVAILABLE}
    assert conditions(done)["Ready"] is True, "a finished one-off run is Ready; the refusals are in lastRun"
    assert done.events[0].type == "Warning" and "orders-2: PREFERRED_LEADER_NOT_AVAILABLE" in done.events[0].message


def test_electing_to_failed_when_kafka_refuses_the_whole_request() -> None:
    d = electing()
    done = finish(intent(), Memory(), d, refused_run(d.selected, DENIED, NOW, NOW))
    assert done.phase is Phase.FAILED and done.reason == NOT_AUTHORIZED, "a missing ACL is named as such"
    assert "CLUSTER_AUTHORIZATION_FAILED" in done.message
    assert done.run is not None and len(done.run.failures) == 3 and not done.run.elected
    assert conditions(done) == {"Ready": False, "Progressing": False, "Stalled": True}
    assert done.events[0].type == "Warning"


def test_electing_to_scheduled_after_a_scheduled_run() -> None:
    i = intent(interval=EVERY_MINUTE)
    d = electing(i)
    done = finish(i, Memory(), d, run_of(d, answered(A0, A1, A2)))
    assert done.phase is Phase.SCHEDULED and done.reason == ELECTED
    assert done.next_run_at == NOW + EVERY_MINUTE, "the interval counts from the start of the run"
    assert conditions(done) == {"Ready": True, "Progressing": False, "Stalled": False}


def test_electing_to_scheduled_not_ready_when_a_scheduled_request_is_refused() -> None:
    i = intent(interval=EVERY_MINUTE)
    d = electing(i)
    done = finish(i, Memory(), d, refused_run(d.selected, DENIED, NOW, NOW))
    assert done.phase is Phase.SCHEDULED and done.reason == NOT_AUTHORIZED
    assert done.next_run_at == NOW + EVERY_MINUTE, "a schedule keeps running: the next run tries again"
    assert conditions(done) == {"Ready": False, "Progressing": False, "Stalled": True}


def test_electing_stays_electing_when_kafka_cannot_be_reached() -> None:
    d = electing()
    retry = finish(intent(), Memory(), d, unavailable_run("all brokers down", NOW))
    assert retry.phase is Phase.ELECTING and retry.reason == KAFKA_UNAVAILABLE
    assert retry.run is None and retry.runs == 0
    assert conditions(retry)["Progressing"] is True


def test_electing_retried_on_the_next_tick_elects_again() -> None:
    d = decide(intent(), memory(Phase.ELECTING, KAFKA_UNAVAILABLE), observe())
    assert d.phase is Phase.ELECTING and d.election is not None


def test_electing_to_invalid_when_a_topic_vanished_before_the_retry() -> None:
    d = decide(intent(), memory(Phase.ELECTING, KAFKA_UNAVAILABLE), observe(cluster(B0)))
    assert d.phase is Phase.INVALID and d.reason == "UnknownTopic"


def test_electing_to_waiting_when_the_reassignment_restarted_before_the_retry() -> None:
    d = decide(intent(after="move"), memory(Phase.ELECTING, KAFKA_UNAVAILABLE),
               observe(after=Reassignment("move", True, "Executing")))
    assert d.phase is Phase.WAITING


# ------------------------------------------------------------------------------------------------------- Waiting


def test_waiting_stays_waiting_without_a_new_event() -> None:
    d = decide(intent(after="move"), memory(Phase.WAITING, WAITING_FOR_REASSIGNMENT),
               observe(after=Reassignment("move", True, "Executing")))
    assert d.phase is Phase.WAITING and not d.events


def test_waiting_to_electing_once_the_reassignment_succeeded() -> None:
    d = decide(intent(after="move"), memory(Phase.WAITING, WAITING_FOR_REASSIGNMENT),
               observe(after=Reassignment("move", True, "Succeeded")))
    assert d.phase is Phase.ELECTING and d.election is not None


def test_waiting_to_invalid_when_the_reassignment_is_deleted() -> None:
    d = decide(intent(after="move"), memory(Phase.WAITING, WAITING_FOR_REASSIGNMENT),
               observe(after=Reassignment("move", False)))
    assert d.phase is Phase.INVALID and d.reason == UNKNOWN_REASSIGNMENT


def test_waiting_to_scheduled_when_a_scheduled_selection_matches_nothing() -> None:
    i = intent(Selection(SelectionKind.PATTERN, pattern="x-.*"), after="move", interval=EVERY_MINUTE)
    d = decide(i, memory(Phase.WAITING, WAITING_FOR_REASSIGNMENT),
               observe(after=Reassignment("move", True, "Succeeded")))
    assert d.phase is Phase.SCHEDULED and d.reason == NOTHING_SELECTED


# ----------------------------------------------------------------------------------------------------- Scheduled


def test_scheduled_stays_idle_until_next_run_at() -> None:
    m = memory(Phase.SCHEDULED, ELECTED, runs=1, next_run_at=NOW + timedelta(seconds=5))
    d = decide(intent(interval=EVERY_MINUTE), m, Observation(now=NOW))
    assert d.idle and d.phase is Phase.SCHEDULED and d.next_run_at == m.next_run_at and d.runs == 1


def test_scheduled_to_electing_when_next_run_at_has_passed() -> None:
    i = intent(interval=EVERY_MINUTE)
    m = memory(Phase.SCHEDULED, ELECTED, runs=1, next_run_at=NOW - timedelta(seconds=1))
    d = decide(i, m, observe())
    assert d.phase is Phase.ELECTING
    done = finish(i, m, d, run_of(d, answered(orders_0=NOT_NEEDED, orders_1=NOT_NEEDED, orders_2=NOT_NEEDED)))
    assert done.phase is Phase.SCHEDULED and done.runs == 2
    assert done.run is not None and done.run.already_preferred == 3
    assert not done.events[0].message.startswith("Scheduled ->"), "no phase change to announce, only the run"


def test_scheduled_to_waiting_when_due_but_the_reassignment_runs() -> None:
    m = memory(Phase.SCHEDULED, ELECTED, runs=1, next_run_at=NOW)
    d = decide(intent(interval=EVERY_MINUTE, after="move"), m, observe(after=Reassignment("move", True, "Executing")))
    assert d.phase is Phase.WAITING and d.next_run_at == NOW, "the schedule is remembered while waiting"


def test_scheduled_to_invalid_when_a_named_topic_was_deleted() -> None:
    m = memory(Phase.SCHEDULED, ELECTED, runs=3, next_run_at=NOW)
    d = decide(intent(interval=EVERY_MINUTE), m, observe(cluster(B0)))
    assert d.phase is Phase.INVALID and d.runs == 3


def test_scheduled_stays_scheduled_when_its_pattern_matches_nothing_now() -> None:
    m = memory(Phase.SCHEDULED, ELECTED, runs=1, next_run_at=NOW)
    d = decide(intent(Selection(SelectionKind.PATTERN, pattern="gone-.*"), interval=EVERY_MINUTE), m, observe())
    assert d.phase is Phase.SCHEDULED and d.reason == NOTHING_SELECTED and d.runs == 1
    assert d.events and "matches no partition" in d.events[0].message


# ------------------------------------------------------------------------------------------- terminal phases


@pytest.mark.parametrize("phase", [Phase.SUCCEEDED, Phase.FAILED, Phase.INVALID])
def test_terminal_phase_is_idle_for_its_generation(phase: Phase) -> None:
    d = decide(intent(), memory(phase, phase.value), Observation(now=NOW))
    assert d.idle and d.phase is phase


@pytest.mark.parametrize("phase", [Phase.SUCCEEDED, Phase.FAILED, Phase.INVALID])
def test_terminal_phase_to_pending_on_a_spec_change_runs_again(phase: Phase) -> None:
    d = decide(intent(generation=2), memory(phase, phase.value, runs=1), observe())
    assert d.phase is Phase.ELECTING and d.runs == 1
    done = finish(intent(generation=2), memory(phase, phase.value, runs=1), d, run_of(d, answered(A0, A1, A2)))
    assert done.phase is Phase.SUCCEEDED and done.runs == 2


def test_invalid_for_a_missing_reassignment_moves_on_once_it_exists() -> None:
    m = memory(Phase.INVALID, UNKNOWN_REASSIGNMENT)
    still = decide(intent(after="move"), m, observe(after=Reassignment("move", False)))
    assert still.phase is Phase.INVALID and not still.events, "re-checked quietly"
    d = decide(intent(after="move"), m, observe(after=Reassignment("move", True, "Executing")))
    assert d.phase is Phase.WAITING and d.events[0].message.startswith("Invalid -> Waiting")
    d = decide(intent(after="move"), m, observe(after=Reassignment("move", True, "Succeeded")))
    assert d.phase is Phase.ELECTING


def test_invalid_because_nothing_matched_moves_on_once_partitions_appear() -> None:
    # A topic created a moment ago may list no partition yet: the election must not stay Invalid for good.
    m = memory(Phase.INVALID, NOTHING_SELECTED)
    still = decide(intent(), m, observe(cluster(topics=("orders",))))
    assert still.phase is Phase.INVALID and still.reason == NOTHING_SELECTED and not still.events, "quietly"
    d = decide(intent(), m, observe())
    assert d.phase is Phase.ELECTING and d.election is not None


def test_invalid_for_a_reason_that_cannot_change_by_itself_stays_idle() -> None:
    d = decide(intent(), memory(Phase.INVALID, "UnknownTopic"), observe())
    assert d.idle and d.phase is Phase.INVALID


def test_a_spec_change_forgets_the_old_schedule() -> None:
    m = memory(Phase.SCHEDULED, ELECTED, runs=4, next_run_at=NOW + timedelta(hours=1))
    d = decide(intent(generation=2), m, observe())
    assert d.phase is Phase.ELECTING and d.next_run_at is None, "the new spec has no schedule: run now, once"


# --------------------------------------------------------------------------------------------------- counting


def test_tally_for_every_partition_counts_what_kafka_left_out_as_already_preferred() -> None:
    selected = [A0, A1, A2, B0]
    run = tally(selected, Election(None), {A0: None, A2: NOT_AVAILABLE}, NOW, NOW)
    assert run.elected == (A0,) and dict(run.failures) == {A2: NOT_AVAILABLE}
    assert run.already_preferred == 2 and run.selected == 4


def test_tally_counts_a_partition_created_after_describe() -> None:
    late = TopicPartition("new", 0)
    run = tally([A0], Election(None), {late: None}, NOW, NOW)
    assert run.elected == (late,) and run.already_preferred == 1 and run.selected == 2


def test_tally_for_explicit_partitions_reports_a_partition_kafka_did_not_answer() -> None:
    run = tally([A0, A1], Election((A0, A1)), {A0: NOT_NEEDED}, NOW, NOW)
    assert run.already_preferred == 1 and run.failures[A1].code == "NO_ANSWER"


def test_resolve_reports_every_unknown_topic() -> None:
    selected, problems = resolve(Selection(SelectionKind.TOPICS, topics=("a", "orders", "b")), ORDERS)
    assert selected == [A0, A1, A2]
    assert [(p.field, p.reason) for p in problems] == [("spec.topics[0]", "UnknownTopic"),
                                                       ("spec.topics[2]", "UnknownTopic")]
