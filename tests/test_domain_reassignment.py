"""Classification, progress, claims and conditions: the pure pieces under the PartitionReassignment life cycle."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from kpo.api.partition_reassignment import MAX_EXPLICIT_PARTITIONS
from kpo.domain import conditions as cond
from kpo.domain.claims import Claim, claimed_by_others, move_holders
from kpo.domain.model import Broker, ClusterView, OngoingReassignment, PartitionState, TopicPartition
from kpo.domain.problems import PROBLEM_CHARS, PROBLEMS_SHOWN, Problem, summarize
from kpo.domain.reassignment import (
    ROLLBACK_BUDGET_BYTES,
    PartitionStatus,
    Target,
    changes_replication_factor,
    classify,
    new_replica_dirs,
    parse_reassignment_document,
    progress,
    rollback_document,
    rollback_json,
    settled,
    validate,
)
from kpo.execution.rates import WriteRates

P0, P1, P2, P3 = (TopicPartition("t", i) for i in range(4))


def test_ongoing_target_is_the_replica_set_minus_the_replicas_being_removed() -> None:
    assert OngoingReassignment(replicas=(3, 4, 1, 2), adding=(3, 4), removing=(1, 2)).target == (3, 4)


def test_classify_each_state() -> None:
    v = ClusterView(
        brokers={1: Broker(1), 2: Broker(2), 3: Broker(3)},
        partitions={tp: PartitionState((1, 2), 1, (1, 2)) for tp in (P0, P1, P2, P3)},
        ongoing={P1: OngoingReassignment((2, 3, 1), (3,), (1,)), P2: OngoingReassignment((1, 3, 2), (3,), (2,)),
                 P3: OngoingReassignment((3, 1, 2), (3,), (2,))},
    )
    targets = {P0: Target((1, 2)), P1: Target((2, 3)), P2: Target((2, 3)), P3: Target((3, 2))}
    c = classify(targets, owned={P2: (1, 3)}, view=v)
    assert c.status == {P0: PartitionStatus.COMPLETED, P1: PartitionStatus.IN_FLIGHT,
                        P2: PartitionStatus.RETARGET, P3: PartitionStatus.EXTERNAL}
    assert c.owned == {P1: (2, 3), P2: (1, 3)}


def test_classify_takes_an_own_move_shown_mid_move_with_nothing_listed_for_settling() -> None:
    v = ClusterView(brokers={}, partitions={P0: PartitionState((2, 3, 1), 2, (2, 3, 1)),
                                            P1: PartitionState((2, 3, 1), 2, (2, 3, 1)),
                                            P2: PartitionState((1, 2), 1, (1, 2))})
    targets = {P0: Target((2, 3)), P1: Target((2, 3)), P2: Target((2, 3))}
    c = classify(targets, owned={P0: (2, 3), P2: (2, 3)}, view=v)
    assert c.status == {P0: PartitionStatus.SETTLING, P1: PartitionStatus.PENDING, P2: PartitionStatus.PENDING}, \
        "P1 is not kpo's move; P2 went back to its original replicas (cancelled by someone else): sent again"
    assert c.owned == {}


def test_classify_reports_own_moves_of_dropped_partitions_only() -> None:
    v = ClusterView(brokers={}, partitions={P0: PartitionState((1,), 1, (1,))},
                    ongoing={P0: OngoingReassignment((2, 1), (2,), (1,)), P1: OngoingReassignment((3, 1), (3,), (1,))})
    c = classify({}, owned={P0: (2,), P1: (2,)}, view=v)
    assert c.dropped == (P0,), "P1 moves towards another target now: not ours to cancel"


def test_progress_counts_bytes_from_the_original_replicas() -> None:
    v = ClusterView(
        brokers={},
        partitions={P0: PartitionState((2, 3), 2, (2, 3)), P1: PartitionState((1, 2), 1, (1, 2)),
                    P2: PartitionState((1, 2), 1, (1, 2))},
        ongoing={P1: OngoingReassignment((3, 1, 2), (3,), (2,))},
        replica_sizes={(P0, 2): 100, (P0, 3): 100, (P1, 1): 50, (P1, 2): 50, (P1, 3): 20, (P2, 1): 10, (P2, 2): 10},
    )
    targets = {P0: Target((2, 3)), P1: Target((3, 1)), P2: Target((3, 2))}
    c = classify(targets, owned={P1: (3, 1)}, view=v)
    got = progress(targets, {P0: (1, 2)}, c, [], v)
    assert (got.total, got.completed, got.in_flight, got.pending) == (3, 1, 1, 1)
    assert got.bytes_to_move == 100 + 50 + 10
    assert got.bytes_moved == 100 + 20
    assert got.percent == 75
    assert got.summary == "1/3"
    assert got.eta_seconds(elapsed_seconds=12) == 4


def test_validate_log_dirs_against_the_brokers_dirs() -> None:
    v = ClusterView(brokers={1: Broker(1), 2: Broker(2)}, partitions={P0: PartitionState((1,), 1, (1,))},
                    topics=frozenset({"t"}), log_dirs={1: frozenset({"/a", "/b"}), 2: frozenset({"/c"})})
    assert validate({P0: Target((1, 2), ("/a", "any"))}, v, internal_topics=(), allow_rf_decrease=False) == []
    problems = validate({P0: Target((1, 2), ("/c", "/c"))}, v, internal_topics=(), allow_rf_decrease=False)
    assert [p.reason for p in problems] == ["UnknownLogDir"]
    assert problems[0].field == "spec.partitions[0].logDirs"


OFFSETS = TopicPartition("__consumer_offsets", 0)
THREE = ClusterView(brokers={b: Broker(b) for b in (1, 2, 3, 4)},
                    partitions={tp: PartitionState((1, 2, 3), 1, (1, 2, 3)) for tp in (P0, OFFSETS)},
                    topics=frozenset({"t", "__consumer_offsets"}))


def test_validate_refuses_the_topics_named_internal_and_nothing_else() -> None:
    targets = {OFFSETS: Target((2, 3, 4)), P0: Target((2, 3, 4))}
    problems = validate(targets, THREE, internal_topics={"__consumer_offsets"}, allow_rf_decrease=False)
    assert [(p.field, p.reason) for p in problems] == [("spec.partitions[0].topic", "InternalTopic")]
    assert "allowInternalTopics" in problems[0].message
    assert validate(targets, THREE, internal_topics=(), allow_rf_decrease=False) == []


def test_validate_refuses_a_shorter_replica_list_unless_acknowledged() -> None:
    shrink = {P0: Target((1, 2))}
    problems = validate(shrink, THREE, internal_topics=(), allow_rf_decrease=False)
    assert [(p.field, p.reason) for p in problems] == [("spec.partitions[0].replicas", "ReplicationFactorDecrease")]
    assert "[1, 2]" in problems[0].message and "[1, 2, 3]" in problems[0].message
    assert "allowReplicationFactorDecrease" in problems[0].message
    assert validate(shrink, THREE, internal_topics=(), allow_rf_decrease=True) == []
    # Growing or keeping the factor needs no acknowledgement.
    assert validate({P0: Target((1, 2, 3, 4))}, THREE, internal_topics=(), allow_rf_decrease=False) == []
    assert validate({P0: Target((4, 3, 2))}, THREE, internal_topics=(), allow_rf_decrease=False) == []


def test_validate_counts_a_moving_partition_by_the_replicas_it_had_before_the_move() -> None:
    # (1, 2) -> (3, 4, 1) in flight: Kafka lists 3, 4, 1, 2, but the partition's own factor is still 2.
    v = ClusterView(brokers=THREE.brokers, partitions={P0: PartitionState((3, 4, 1, 2), 1, (1, 2))},
                    ongoing={P0: OngoingReassignment((3, 4, 1, 2), (3, 4), (2,))}, topics=frozenset({"t"}))
    assert validate({P0: Target((3, 4))}, v, internal_topics=(), allow_rf_decrease=False) == []
    assert [p.reason for p in validate({P0: Target((3,))}, v, internal_topics=(), allow_rf_decrease=False)] == [
        "ReplicationFactorDecrease"]


def test_a_replication_factor_change_is_counted_as_kafkas_controller_counts_it() -> None:
    # KIP-860 compares with the replicas a partition is headed for: the target of a move in progress.
    assert not changes_replication_factor(P0, (4, 3, 2), THREE)
    assert changes_replication_factor(P0, (1, 2), THREE)
    assert changes_replication_factor(P0, (1, 2, 3, 4), THREE)
    moving = ClusterView(brokers=THREE.brokers, partitions={P0: PartitionState((1, 2, 3, 4), 1, (1, 2, 3))},
                         ongoing={P0: OngoingReassignment((1, 2, 3, 4), (4,), ())})
    assert not changes_replication_factor(P0, (4, 3, 2, 1), moving)
    assert changes_replication_factor(P0, (1, 2, 3), moving), "back to three is a change from the four in progress"


def test_settled_drops_a_move_that_ended_before_describe_topics_read_the_partition() -> None:
    move = OngoingReassignment((3, 4, 1, 2), (3, 4), (1, 2))
    mid_move = {P0: PartitionState((3, 4, 1, 2), 1, (1, 2))}
    assert settled({P0: move}, mid_move) == {P0: move}
    assert settled({P0: move}, {P0: PartitionState((3, 4), 3, (3, 4))}) == {}, "finished in between"
    # The original replicas: a move cancelled in between, or a broker's metadata that lags the controller's list.
    # Kept: dropped, the move's brokers looked free to the scheduler while it ran on.
    assert settled({P0: move}, {P0: PartitionState((1, 2), 1, (1, 2))}) == {P0: move}, "lagging metadata"
    assert settled({P0: move}, {}) == {}, "deleted in between"
    # A leader-order move (the same set before, during and after) is never taken for finished by the set alone.
    swap = OngoingReassignment((2, 1), (), ())
    assert settled({P0: swap}, {P0: PartitionState((1, 2), 1, (1, 2))}) == {P0: swap}


def test_rollback_document_is_kafka_reassign_partitions_json_and_round_trips() -> None:
    doc = rollback_document({P1: (2, 3), P0: (1, 2)})
    assert json.loads(json.dumps(doc)) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2]},
        {"topic": "t", "partition": 1, "replicas": [2, 3]}]}
    assert parse_reassignment_document(doc) == {P0: (1, 2), P1: (2, 3)}
    assert json.loads(rollback_json({P1: (2, 3), P0: (1, 2)})) == doc


def big_view(topic: str, count: int) -> ClusterView:
    return ClusterView(brokers={b: Broker(b) for b in (1, 2, 3)},
                       partitions={TopicPartition(topic, p): PartitionState((1, 2, 3), 1, (1, 2, 3))
                                   for p in range(count)}, topics=frozenset({topic}))


def test_the_rollback_record_of_the_most_entries_fits_with_29_character_topic_names() -> None:
    topic = "t" * 29
    view = big_view(topic, MAX_EXPLICIT_PARTITIONS)
    targets = {tp: Target((2, 3, 1)) for tp in view.partitions}
    assert validate(targets, view, internal_topics=(), allow_rf_decrease=False) == []
    assert len(rollback_json({tp: (1, 2, 3) for tp in targets})) <= ROLLBACK_BUDGET_BYTES


def test_a_rollback_record_too_large_for_its_config_map_is_refused_with_how_to_split() -> None:
    view = big_view("t" * 200, 5000)
    problems = validate({tp: Target((2, 3, 1)) for tp in view.partitions}, view, internal_topics=(),
                        allow_rf_decrease=False)
    assert [p.reason for p in problems] == ["RollbackTooLarge"]
    assert "split the spec into PartitionReassignments of at most about" in problems[0].message


def test_a_summary_of_many_problems_names_the_first_and_counts_the_rest() -> None:
    problems = [Problem(f"spec.partitions[{i}].topic", "UnknownTopic", f"topic 'x{i}' does not exist")
                for i in range(9_000)] + [Problem("spec.partitions[9000].replicas", "UnknownBroker", "b" * 5000)]
    text = summarize(problems)
    assert text.startswith("spec.partitions[0].topic: topic 'x0' does not exist; ")
    assert "spec.partitions[19].topic" in text and "spec.partitions[20].topic" not in text
    assert text.endswith("and 8981 more problem(s) (8980 UnknownTopic, 1 UnknownBroker; 9001 in all)")
    assert len(text) < PROBLEMS_SHOWN * PROBLEM_CHARS + 200
    assert len(summarize([problems[-1]])) == PROBLEM_CHARS
    assert summarize(problems[:2]) == "; ".join(str(p) for p in problems[:2])


def claim(key: str, created: str, partitions: set[TopicPartition], in_flight: set[TopicPartition] | None = None,
          live: bool = True) -> Claim:
    return Claim(key, created, frozenset(partitions), frozenset(in_flight or set()), live)


def test_the_older_live_claim_goes_first() -> None:
    me = claim("ns/b", "2026-01-02T00:00:00Z", {P0, P1})
    older = claim("ns/a", "2026-01-01T00:00:00Z", {P0})
    done = claim("ns/c", "2026-01-01T00:00:00Z", {P1}, live=False)
    assert claimed_by_others(me, [older, done, me]) == {P0: "ns/a"}


def test_a_move_in_flight_holds_its_partition_even_against_an_older_claim() -> None:
    me = claim("ns/a", "2026-01-01T00:00:00Z", {P0})
    younger_holding = claim("ns/b", "2026-01-02T00:00:00Z", {P0}, in_flight={P0})
    assert claimed_by_others(me, [younger_holding]) == {P0: "ns/b"}
    mine = claim("ns/a", "2026-01-01T00:00:00Z", {P0}, in_flight={P0})
    assert claimed_by_others(mine, [younger_holding]) == {}


def test_a_move_of_my_partition_that_no_status_lists_counts_against_my_limits() -> None:
    # P0 in flight without a status saying so (a handed-over leader's lost status write); P1 held by another's move.
    me = claim("ns/a", "2026-01-01T00:00:00Z", {P0, P1, P2}, in_flight={P2})
    other = claim("ns/b", "2026-01-02T00:00:00Z", {P1, P3}, in_flight={P1, P3})
    done = claim("ns/c", "2026-01-01T00:00:00Z", {P0}, in_flight={P0}, live=False)
    held = {tp: c.key for tp, c in move_holders(me, [other, done]).items()}
    assert held == {P0: "ns/a", P1: "ns/b", P2: "ns/a", P3: "ns/b"}


T1 = datetime(2026, 1, 1, tzinfo=UTC)


def test_conditions_keep_transition_time_while_status_is_unchanged() -> None:
    first = cond.merge([], cond.kstatus(ready=False, progressing=True, stalled=False, reason="Executing",
                                        message="1/3"), 1, T1)
    second = cond.merge(first, cond.kstatus(ready=False, progressing=True, stalled=False, reason="Executing",
                                            message="2/3"), 1, T1 + timedelta(seconds=1))
    third = cond.merge(second, cond.kstatus(ready=True, progressing=False, stalled=False, reason="Succeeded",
                                            message="done"), 2, T1 + timedelta(seconds=2))
    times = {c["type"]: c["lastTransitionTime"] for c in second}
    t1, t3 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:02Z"
    assert times == {"Ready": t1, "Progressing": t1, "Stalled": t1}
    assert [c["message"] for c in second] == ["2/3"] * 3
    final = {c["type"]: (c["status"], c["lastTransitionTime"], c["observedGeneration"]) for c in third}
    assert final == {"Ready": ("True", t3, 2), "Progressing": ("False", t3, 2), "Stalled": ("False", t1, 2)}


def test_write_rates_come_from_size_growth_and_never_go_negative() -> None:
    rates = WriteRates()
    assert rates.observe({P0: 1000, P1: 5000}, now=100.0) == {}
    assert rates.observe({P0: 3000, P1: 4000}, now=102.0) == {P0: 1000.0, P1: 0.0}
    # Observations closer than a second apart do not reset the baseline.
    assert rates.observe({P0: 3100, P1: 4000}, now=102.5) == {P0: 1000.0, P1: 0.0}


def test_the_dirs_of_new_replicas_are_those_the_target_names_for_brokers_the_step_adds() -> None:
    target = Target((4, 2, 5), ("/b", "/a", "any"))
    assert new_replica_dirs(target, (4, 2, 5), (1, 2, 3)) == ((4, "/b"),)
    assert new_replica_dirs(target, (1, 2, 5), (1, 2, 3)) == (), "a step that adds only broker 5, named 'any'"
    assert new_replica_dirs(Target((4, 2)), (4, 2), (1, 2)) == (), "no dirs named"
