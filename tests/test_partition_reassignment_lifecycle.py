"""One test per transition of the PartitionReassignment life cycle (see lifecycle.py's diagram)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from executor_support import ports as executor_ports
from kafka_fake import FakeCluster
from kpo.domain.model import Broker, ClusterView, KafkaRefusal, OngoingReassignment, PartitionState, TopicPartition
from kpo.domain.reassignment import Candidate, PartitionStatus, Target
from kpo.domain.topic_wait import TOPIC_GRACE, WAITING_FOR_TOPIC
from kpo.resources.outcomes import Inputs, condition
from kpo.resources.partition_reassignment import reconciler
from kpo.resources.partition_reassignment.lifecycle import (
    TRANSITIONS,
    Intent,
    Memory,
    Observation,
    Phase,
    decide,
)
from kpo.resources.partition_reassignment.reconciler import kept_outcome, tick

T = "orders"
P0, P1, P2, P3 = (TopicPartition(T, i) for i in range(4))


def view(replicas: dict[TopicPartition, tuple[int, ...]], ongoing: dict[TopicPartition, OngoingReassignment]
         | None = None, isr: dict[TopicPartition, tuple[int, ...]] | None = None, brokers: int = 4) -> ClusterView:
    return ClusterView(
        brokers={b: Broker(b) for b in range(1, brokers + 1)},
        partitions={tp: PartitionState(r, r[0], (isr or {}).get(tp, r)) for tp, r in replicas.items()},
        ongoing=ongoing or {},
        topics=frozenset({T}),
        min_insync={T: 1},
    )


def moving(original: tuple[int, ...], target: tuple[int, ...]) -> OngoingReassignment:
    adding = tuple(b for b in target if b not in original)
    removing = tuple(b for b in original if b not in target)
    return OngoingReassignment(replicas=target + removing, adding=adding, removing=removing)


def intent(targets: dict[TopicPartition, tuple[int, ...]], generation: int = 1, *, stop: bool = False,
           revert: bool = False) -> Intent:
    return Intent(generation=generation, targets={tp: Target(r) for tp, r in targets.items()}, stop=stop,
                  revert_on_stop=revert)


def test_every_phase_has_a_transition_map() -> None:
    assert set(TRANSITIONS) >= set(Phase) - {Phase.PLANNING, Phase.PROPOSED}


# ------------------------------------------------------------------------------------------------------- Pending


def test_pending_to_invalid_names_the_problem_and_sends_nothing() -> None:
    d = decide(intent({P0: (1, 9)}), Memory(), Observation(view({P0: (1, 2)})))
    assert d.phase is Phase.INVALID
    assert d.reason == "UnknownBroker"
    assert "spec.partitions[0].replicas" in d.message and "9" in d.message
    assert not d.submit and not d.save_originals and not d.cancel
    assert d.events[-1].type == "Warning"


def test_pending_stays_pending_while_a_partition_that_just_moved_may_read_as_its_mid_move_union() -> None:
    # Another resource moved [1] -> [2]; the controller lists nothing any more, a lagging broker still says [2, 1].
    settling = replace(view({P0: (2, 1)}), recently_moved=frozenset({P0}))
    d = decide(intent({P0: (3,)}), Memory(), Observation(settling))
    assert (d.phase, d.reason) == (Phase.PENDING, "Settling")
    assert not d.submit and not d.save_originals
    # Once it has settled, the spec is judged on what it reads.
    d = decide(intent({P0: (3,)}), Memory(), Observation(view({P0: (2, 1)})))
    assert (d.phase, d.reason) == (Phase.INVALID, "ReplicationFactorDecrease")


def test_executing_sends_nothing_for_a_partition_that_may_read_as_its_mid_move_union() -> None:
    settling = replace(view({P0: (2, 1), P1: (1, 2)}), recently_moved=frozenset({P0}))
    d = decide(intent({P0: (3,), P1: (1, 3)}, generation=2), Memory(phase=Phase.EXECUTING, observed_generation=1),
               Observation(settling))
    assert d.phase is Phase.EXECUTING
    assert set(d.submit) == {P1}


def test_pending_to_invalid_for_a_missing_topic_and_partition() -> None:
    missing = TopicPartition("nope", 0)
    d = decide(intent({missing: (1,), TopicPartition(T, 5): (1,)}), Memory(), Observation(view({P0: (1,)})))
    assert d.phase is Phase.INVALID
    assert {p.reason for p in d.problems} == {"UnknownTopic", "UnknownPartition"}


NOW = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)
NEW = TopicPartition("new-topic", 0)


def test_pending_waits_for_a_topic_not_there_yet_and_says_so_once() -> None:
    d = decide(intent({NEW: (1, 2)}), Memory(), Observation(view({P0: (1, 2)}), now=NOW))
    assert (d.phase, d.reason) == (Phase.PENDING, WAITING_FOR_TOPIC)
    assert d.topic_missing_since == NOW and "'new-topic' does not exist" in d.message and "30 s" in d.message
    assert not d.submit and not d.save_originals and not d.cancel
    assert [(e.type, e.reason) for e in d.events] == [("Normal", WAITING_FOR_TOPIC)]
    assert {c.type: c.status for c in d.conditions} == {"Ready": False, "Progressing": True, "Stalled": False}
    memory = Memory(observed_generation=1, topic_missing_since=NOW)
    later = decide(intent({NEW: (1, 2)}), memory, Observation(view({P0: (1, 2)}), now=NOW + TOPIC_GRACE / 2))
    assert (later.phase, later.topic_missing_since, later.events) == (Phase.PENDING, NOW, ())


def test_pending_goes_on_when_the_topic_it_waited_for_appears() -> None:
    appeared = replace(view({NEW: (1, 2)}), topics=frozenset({"new-topic"}), min_insync={"new-topic": 1})
    memory = Memory(observed_generation=1, topic_missing_since=NOW)
    d = decide(intent({NEW: (3, 2)}), memory, Observation(appeared, now=NOW + TOPIC_GRACE / 2))
    assert d.phase is Phase.EXECUTING and d.topic_missing_since is None
    assert d.submit == {NEW: (3, 2)}


def test_pending_to_invalid_for_a_topic_still_missing_after_the_grace() -> None:
    memory = Memory(observed_generation=1, topic_missing_since=NOW)
    d = decide(intent({NEW: (1, 2)}), memory, Observation(view({P0: (1, 2)}), now=NOW + TOPIC_GRACE))
    assert (d.phase, d.reason) == (Phase.INVALID, "UnknownTopic") and d.topic_missing_since is None
    assert not d.submit and d.events[-1].type == "Warning"


def test_a_missing_topic_beside_a_problem_that_waiting_cannot_clear_is_invalid_at_once() -> None:
    d = decide(intent({NEW: (1, 2), P0: (1, 9)}), Memory(), Observation(view({P0: (1, 2)}), now=NOW))
    assert d.phase is Phase.INVALID
    assert {p.reason for p in d.problems} == {"UnknownTopic", "UnknownBroker"}


def test_a_spec_change_starts_the_wait_for_a_missing_topic_again() -> None:
    memory = Memory(phase=Phase.INVALID, observed_generation=1, topic_missing_since=NOW - 10 * TOPIC_GRACE)
    d = decide(intent({NEW: (1, 2)}, generation=2), memory, Observation(view({P0: (1, 2)}), now=NOW))
    assert (d.phase, d.topic_missing_since) == (Phase.PENDING, NOW)
    assert [(e.type, e.reason) for e in d.events] == [("Normal", WAITING_FOR_TOPIC)]
    assert d.events[0].message.startswith("Invalid -> Pending")


def test_pending_to_invalid_below_min_insync_replicas() -> None:
    v = view({P0: (1, 2, 3)})
    v = ClusterView(brokers=v.brokers, partitions=v.partitions, topics=v.topics, min_insync={T: 2})
    shrink = replace(intent({P0: (1,)}), allow_replication_factor_decrease=True)
    d = decide(shrink, Memory(), Observation(v))
    assert d.phase is Phase.INVALID and d.reason == "BelowMinInsyncReplicas"


def test_pending_stays_pending_on_a_conflict_with_an_older_resource() -> None:
    d = decide(intent({P0: (2, 3)}), Memory(), Observation(view({P0: (1, 2)}), claimed_by_others={P0: "ns/older"}))
    assert d.phase is Phase.PENDING
    assert d.reason == "Conflict" and "ns/older" in d.message
    assert [(c.partition, c.holder) for c in d.conflicts] == [(P0, "ns/older")]
    assert not d.submit
    stalled = {c.type: c.status for c in d.conditions}
    assert stalled == {"Ready": False, "Progressing": False, "Stalled": True}


def test_pending_stays_pending_on_a_move_kpo_did_not_start() -> None:
    v = view({P0: (1, 2)}, ongoing={P0: moving((1, 2), (1, 4))})
    d = decide(intent({P0: (2, 3)}), Memory(), Observation(v))
    assert d.phase is Phase.PENDING
    assert [(c.partition, c.holder) for c in d.conflicts] == [(P0, "external")]
    assert not d.submit and not d.cancel


def test_pending_to_stopped_when_stop_is_set_before_anything_started() -> None:
    d = decide(intent({P0: (2, 3)}, stop=True), Memory(), Observation(view({P0: (1, 2)})))
    assert d.phase is Phase.STOPPED and not d.submit


def test_pending_to_stopping_when_stop_finds_own_moves_in_flight() -> None:
    v = view({P0: (1, 2)}, ongoing={P0: moving((1, 2), (2, 3))})
    memory = Memory(phase=Phase.INVALID, observed_generation=1, owned={P0: (2, 3)})
    d = decide(intent({P0: (2, 3)}, generation=2, stop=True), memory, Observation(v))
    assert d.phase is Phase.STOPPING and d.cancel == (P0,)


def test_pending_to_succeeded_when_every_partition_already_has_its_target() -> None:
    d = decide(intent({P0: (1, 2)}), Memory(), Observation(view({P0: (1, 2)})))
    assert d.phase is Phase.SUCCEEDED and not d.submit and not d.save_originals
    assert {c.type: c.status for c in d.conditions}["Ready"] is True


def test_pending_to_executing_saves_originals_and_submits() -> None:
    d = decide(intent({P0: (2, 3), P1: (1, 2)}), Memory(), Observation(view({P0: (1, 2), P1: (1, 2)})))
    assert d.phase is Phase.EXECUTING
    assert d.save_originals == {P0: (1, 2)}
    assert d.submit == {P0: (2, 3)}
    assert d.events[-1].reason == "Executing"


def test_pending_to_executing_submits_only_what_the_scheduler_admits() -> None:
    d = decide(intent({P0: (2, 3), P1: (3, 4)}), Memory(), Observation(view({P0: (1, 2), P1: (1, 2)})),
               admit=lambda candidates: [c.partition for c in candidates][:1])
    assert d.submit == {P0: (2, 3)}
    assert d.save_originals == {P0: (1, 2)}, "originals are saved for what is sent, before it is sent"


# ----------------------------------------------------------------------------------------------------- Executing


def executing(owned: dict[TopicPartition, tuple[int, ...]], **kwargs: object) -> Memory:
    return Memory(phase=Phase.EXECUTING, observed_generation=1, owned=owned,
                  originals={P0: (1, 2), P1: (1, 2), P2: (1, 2)}, **kwargs)  # type: ignore[arg-type]


def test_executing_stays_while_moves_are_in_flight_and_does_not_resubmit() -> None:
    v = view({P0: (1, 2)}, ongoing={P0: moving((1, 2), (2, 3))})
    d = decide(intent({P0: (2, 3)}), executing({P0: (2, 3)}), Observation(v))
    assert d.phase is Phase.EXECUTING and not d.submit and not d.cancel
    assert d.classification is not None and d.classification.status[P0] is PartitionStatus.IN_FLIGHT


def test_executing_adopts_a_move_to_its_own_target_after_a_lost_status_write() -> None:
    v = view({P0: (1, 2)}, ongoing={P0: moving((1, 2), (2, 3))})
    d = decide(intent({P0: (2, 3)}), executing({}), Observation(v))
    assert not d.submit and d.classification is not None and d.classification.owned == {P0: (2, 3)}


def test_executing_spec_change_retargets_cancels_dropped_and_leaves_unchanged() -> None:
    v = view({P0: (1, 2), P1: (1, 2), P2: (1, 2), P3: (1, 2)},
             ongoing={P0: moving((1, 2), (3, 4)), P1: moving((1, 2), (3, 4)), P2: moving((1, 2), (1, 4)),
                      P3: moving((1, 2), (2, 3))})
    memory = executing({P0: (3, 4), P1: (3, 4), P2: (1, 4), P3: (2, 3)})
    d = decide(intent({P0: (4, 3), P2: (1, 4), P3: (2, 4)}, generation=2), memory, Observation(v))
    assert d.phase is Phase.EXECUTING
    # P0 keeps what it copied (3 and 4 stay in the target): re-targeted in place.
    assert d.submit == {P0: (4, 3)}
    # P1 was dropped; P3's move adds 3, which the new target [2, 4] does not want: cancelled first, so 3 does not
    # linger, and submitted again from its original replicas on the next tick.
    assert d.cancel == (P1, P3)


def test_executing_to_succeeded_when_every_partition_is_at_target() -> None:
    d = decide(intent({P0: (2, 3)}), executing({P0: (2, 3)}), Observation(view({P0: (2, 3)})))
    assert d.phase is Phase.SUCCEEDED and d.reason == "Succeeded"


def test_executing_to_failed_once_nothing_else_runs() -> None:
    refused = {P1: KafkaRefusal("INVALID_REPLICA_ASSIGNMENT", "no")}
    d = decide(intent({P0: (2, 3), P1: (3, 4)}), executing({}, failures=refused),
               Observation(view({P0: (2, 3), P1: (1, 2)})))
    assert d.phase is Phase.FAILED
    assert d.reason == "KafkaRefused" and "INVALID_REPLICA_ASSIGNMENT" in d.message
    assert not d.submit, "a refused move is not retried for the same spec"


def test_a_move_refused_for_want_of_an_acl_fails_as_not_authorized() -> None:
    refused = {P1: KafkaRefusal("CLUSTER_AUTHORIZATION_FAILED", "needs Alter on the cluster")}
    d = decide(intent({P0: (2, 3), P1: (3, 4)}), executing({}, failures=refused),
               Observation(view({P0: (2, 3), P1: (1, 2)})))
    assert d.phase is Phase.FAILED
    assert d.reason == "NotAuthorized" and "needs Alter on the cluster" in d.message


def test_executing_keeps_going_with_others_while_one_failed() -> None:
    refused = {P1: KafkaRefusal("INVALID_REPLICA_ASSIGNMENT", "no")}
    v = view({P0: (1, 2), P1: (1, 2)}, ongoing={P0: moving((1, 2), (2, 3))})
    d = decide(intent({P0: (2, 3), P1: (3, 4)}), executing({P0: (2, 3)}, failures=refused), Observation(v))
    assert d.phase is Phase.EXECUTING


def test_executing_to_stopping_on_stop() -> None:
    v = view({P0: (1, 2)}, ongoing={P0: moving((1, 2), (2, 3))})
    d = decide(intent({P0: (2, 3)}, generation=2, stop=True), executing({P0: (2, 3)}), Observation(v))
    assert d.phase is Phase.STOPPING and d.cancel == (P0,)


def test_executing_to_reverting_on_stop_with_revert_when_nothing_is_in_flight() -> None:
    # P0's move completed between two ticks: nothing to cancel, so the way back starts at once.
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, owned={}, originals={P0: (1, 2)})
    d = decide(intent({P0: (2, 3)}, generation=2, stop=True, revert=True), memory, Observation(view({P0: (2, 3)})))
    assert d.phase is Phase.REVERTING and d.submit == {P0: (1, 2)}


def test_executing_to_invalid_when_the_spec_changes_to_an_impossible_one() -> None:
    v = view({P0: (1, 2)}, ongoing={P0: moving((1, 2), (2, 3))})
    d = decide(intent({P0: (2, 9)}, generation=2), executing({P0: (2, 3)}), Observation(v))
    assert d.phase is Phase.INVALID and not d.cancel and not d.submit


# ------------------------------------------------------------------------------------------ Stopping / Reverting


def test_stopping_stays_while_own_moves_are_in_flight() -> None:
    v = view({P0: (1, 2)}, ongoing={P0: moving((1, 2), (2, 3))})
    memory = Memory(phase=Phase.STOPPING, observed_generation=2, owned={P0: (2, 3)})
    d = decide(intent({P0: (2, 3)}, generation=2, stop=True), memory, Observation(v))
    assert d.phase is Phase.STOPPING and d.cancel == (P0,)


def test_stopping_to_stopped_keeps_completed_partitions() -> None:
    memory = Memory(phase=Phase.STOPPING, observed_generation=2, owned={}, originals={P0: (1, 2)})
    d = decide(intent({P0: (2, 3)}, generation=2, stop=True), memory, Observation(view({P0: (2, 3)})))
    assert d.phase is Phase.STOPPED and not d.submit


def test_stopping_to_reverting_moves_completed_partitions_back() -> None:
    memory = Memory(phase=Phase.STOPPING, observed_generation=2, originals={P0: (1, 2), P1: (1, 2)})
    d = decide(intent({P0: (2, 3), P1: (3, 4)}, generation=2, stop=True, revert=True), memory,
               Observation(view({P0: (2, 3), P1: (1, 2)})))
    assert d.phase is Phase.REVERTING
    assert d.submit == {P0: (1, 2)}


def test_stopping_to_revert_does_not_cancel_a_move_whose_originals_are_all_out_of_sync() -> None:
    # P0's original replicas (1, 2) both fell out of the ISR: cancelling would leave it without an in-sync replica.
    v = view({P0: (3, 4, 1, 2), P1: (2, 3, 1)}, isr={P0: (3, 4), P1: (1, 2, 3)},
             ongoing={P0: moving((1, 2), (3, 4)), P1: moving((1, 2), (2, 3))})
    memory = Memory(phase=Phase.STOPPING, observed_generation=2, owned={P0: (3, 4), P1: (2, 3)},
                    originals={P0: (1, 2), P1: (1, 2)})
    d = decide(intent({P0: (3, 4), P1: (2, 3)}, generation=2, stop=True, revert=True), memory, Observation(v))
    assert d.phase is Phase.STOPPING
    assert d.cancel == (P1,)
    assert set(d.skipped) == {P0} and "out of sync" in d.skipped[P0]


def test_reverting_moves_completed_partitions_back_and_skips_offline_originals() -> None:
    memory = Memory(phase=Phase.REVERTING, observed_generation=2, originals={P0: (1, 2), P1: (1, 5)})
    v = view({P0: (3, 4), P1: (2, 3)})  # broker 5 is not live
    d = decide(intent({P0: (3, 4), P1: (2, 3)}, generation=2, stop=True, revert=True), memory, Observation(v))
    assert d.phase is Phase.REVERTING
    assert d.submit == {P0: (1, 2)}, "a completed move is moved back, though its originals left the ISR long ago"
    assert set(d.skipped) == {P1} and "[5]" in d.skipped[P1]


def test_reverting_to_reverted() -> None:
    memory = Memory(phase=Phase.REVERTING, observed_generation=2, originals={P0: (1, 2)})
    d = decide(intent({P0: (2, 3)}, generation=2, stop=True, revert=True), memory, Observation(view({P0: (1, 2)})))
    assert d.phase is Phase.REVERTED


def test_reverting_to_failed_when_kafka_refused_the_way_back() -> None:
    memory = Memory(phase=Phase.REVERTING, observed_generation=2, originals={P0: (1, 2)},
                    failures={P0: KafkaRefusal("CLUSTER_AUTHORIZATION_FAILED")})
    d = decide(intent({P0: (2, 3)}, generation=2, stop=True, revert=True), memory, Observation(view({P0: (2, 3)})))
    assert d.phase is Phase.FAILED


# ------------------------------------------------------------------------------------------------------ terminal


def test_terminal_phases_stay_put_for_the_same_generation() -> None:
    for phase in (Phase.SUCCEEDED, Phase.FAILED, Phase.INVALID, Phase.STOPPED, Phase.REVERTED):
        d = decide(intent({P0: (2, 3)}), Memory(phase=phase, observed_generation=1), Observation(view({P0: (1, 2)})))
        assert d.phase is phase and not d.submit and not d.events


def test_terminal_phases_go_back_to_pending_on_a_spec_change() -> None:
    for phase in (Phase.SUCCEEDED, Phase.FAILED, Phase.INVALID, Phase.STOPPED, Phase.REVERTED):
        d = decide(intent({P0: (2, 3)}, generation=2), Memory(phase=phase, observed_generation=1),
                   Observation(view({P0: (1, 2)})))
        assert d.phase is Phase.EXECUTING, phase
        assert d.submit == {P0: (2, 3)}


# ---------------------------------------------------------------------------------------------------- Incremental


def test_incremental_submits_the_first_step_only() -> None:
    inc = Intent(generation=1, targets={P0: Target((3, 4, 5))}, incremental=True)
    d = decide(inc, Memory(), Observation(view({P0: (1, 2, 3)}, brokers=5)))
    assert d.phase is Phase.EXECUTING
    assert d.submit == {P0: (1, 2, 3, 4)}


def test_incremental_step_in_flight_is_progress_not_a_stale_target() -> None:
    inc = Intent(generation=1, targets={P0: Target((3, 4, 5))}, incremental=True)
    v = view({P0: (1, 2, 3)}, ongoing={P0: moving((1, 2, 3), (1, 2, 3, 4))}, brokers=5)
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, owned={P0: (1, 2, 3, 4)},
                    originals={P0: (1, 2, 3)})
    d = decide(inc, memory, Observation(v))
    assert d.phase is Phase.EXECUTING and not d.submit and not d.cancel


def test_incremental_waits_for_the_previous_step_to_be_in_sync() -> None:
    inc = Intent(generation=1, targets={P0: Target((3, 4, 5))}, incremental=True)
    v = view({P0: (1, 2, 3, 4)}, isr={P0: (1, 2, 3)}, brokers=5)
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, originals={P0: (1, 2, 3)})
    assert not decide(inc, memory, Observation(v)).submit
    in_sync = view({P0: (1, 2, 3, 4)}, brokers=5)
    # KAFKA-6794 drops the excess followers first, the leader (1) last.
    assert decide(inc, memory, Observation(in_sync)).submit == {P0: (1, 3, 4)}


def test_a_move_of_another_resource_is_reported_with_its_name_not_as_external() -> None:
    v = view({P0: (1, 2)}, ongoing={P0: moving((1, 2), (1, 3))})
    d = decide(intent({P0: (2, 3)}), Memory(), Observation(v, claimed_by_others={P0: "ns/first"}))
    assert [(c.partition, c.holder) for c in d.conflicts] == [(P0, "ns/first")]


# ---------------------------------------------------------------------------------------------------- Log dirs


def test_a_replica_on_its_broker_but_in_another_log_dir_is_moved_and_not_yet_done() -> None:
    logged = Intent(generation=1, targets={P0: Target((1, 2), ("/b1", "any"))})
    v = view({P0: (1, 2)})
    v = ClusterView(brokers=v.brokers, partitions=v.partitions, topics=v.topics, min_insync=v.min_insync,
                    log_dirs={1: frozenset({"/a1", "/b1"}), 2: frozenset({"/a2"})},
                    replica_dirs={(P0, 1): "/a1", (P0, 2): "/a2"})
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, originals={P0: (1, 2)})
    d = decide(logged, memory, Observation(v))
    assert d.phase is Phase.EXECUTING
    assert d.move_dirs == {(P0, 1): "/b1"}
    moving = ClusterView(brokers=v.brokers, partitions=v.partitions, topics=v.topics, log_dirs=v.log_dirs,
                         replica_dirs=v.replica_dirs, future_dirs={(P0, 1): "/b1"})
    d = decide(logged, memory, Observation(moving))
    assert d.phase is Phase.EXECUTING and not d.move_dirs, "a dir move in progress is not asked for twice"
    done = ClusterView(brokers=v.brokers, partitions=v.partitions, topics=v.topics, log_dirs=v.log_dirs,
                       replica_dirs={(P0, 1): "/b1", (P0, 2): "/a2"})
    assert decide(logged, memory, Observation(done)).phase is Phase.SUCCEEDED


def test_intra_broker_moves_are_admitted_like_the_others_and_one_under_way_holds_its_slot() -> None:
    logged = Intent(generation=1, targets={tp: Target((1, 2), ("/b1", "any")) for tp in (P0, P1, P2)})
    v = view({tp: (1, 2) for tp in (P0, P1, P2)})
    v = ClusterView(brokers=v.brokers, partitions=v.partitions, topics=v.topics, min_insync=v.min_insync,
                    log_dirs={1: frozenset({"/a1", "/b1"}), 2: frozenset({"/a2"})},
                    replica_dirs={(tp, b): f"/a{b}" for tp in (P0, P1, P2) for b in (1, 2)})
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, originals={tp: (1, 2) for tp in (P0, P1, P2)})
    asked: list[list[tuple[TopicPartition, frozenset[int]]]] = []

    def one_at_a_time(candidates: Sequence[Candidate]) -> list[TopicPartition]:
        asked.append([(c.partition, c.dir_brokers) for c in candidates])
        return [candidates[0].partition] if candidates else []

    d = decide(logged, memory, Observation(v), one_at_a_time)
    assert asked == [[(P0, frozenset({1})), (P1, frozenset({1})), (P2, frozenset({1}))]]
    assert d.move_dirs == {(P0, 1): "/b1"} and d.submit == {}, "an intra-broker move is no reassignment"
    # P0 under way: it is in flight (the executor counts it), not a candidate; the others wait for the admission.
    moving = replace(v, future_dirs={(P0, 1): "/b1"})
    asked.clear()
    d = decide(logged, memory, Observation(moving), one_at_a_time)
    assert asked == [[(P1, frozenset({1})), (P2, frozenset({1}))]]
    assert d.phase is Phase.EXECUTING and d.move_dirs == {(P1, 1): "/b1"}


def test_stopping_cancels_the_copies_between_log_dirs_and_leaves_the_replicas_where_they_are() -> None:
    logged = Intent(generation=2, targets={P0: Target((1, 2), ("/b1", "any")), P1: Target((1, 2), ("/b1", "any"))},
                    stop=True)
    v = view({P0: (1, 2), P1: (1, 2)})
    # P0 is being copied into /b1; P1's copy into /c1 is someone else's (the spec names /b1): left alone.
    copying = ClusterView(brokers=v.brokers, partitions=v.partitions, topics=v.topics, min_insync=v.min_insync,
                          log_dirs={1: frozenset({"/a1", "/b1", "/c1"})},
                          replica_dirs={(P0, 1): "/a1", (P1, 1): "/a1"}, future_dirs={(P0, 1): "/b1", (P1, 1): "/c1"})
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, originals={P0: (1, 2), P1: (1, 2)})
    d = decide(logged, memory, Observation(copying))
    assert (d.phase, d.move_dirs) == (Phase.STOPPING, {(P0, 1): "/a1"})
    assert "1 cop(ies) between log dirs" in d.message
    stopped = replace(copying, future_dirs={(P1, 1): "/c1"})
    d = decide(logged, replace(memory, phase=Phase.STOPPING), Observation(stopped))
    assert d.phase is Phase.STOPPED and d.move_dirs == {}


def test_a_deleted_resource_cancels_its_copies_between_log_dirs() -> None:
    cluster = FakeCluster({P0: (1, 2)})
    cluster.replica_dirs = {(P0, 1): "/a1", (P0, 2): "/a2"}
    cluster.future_dirs = {(P0, 1): "/b1"}
    holdings = reconciler.Holdings(phase=Phase.EXECUTING, owned={}, targets={P0: (1, 2)},
                                   journal=reconciler.ThrottleJournal(), originals_recorded=False,
                                   dir_targets={P0: Target((1, 2), ("/b1", "any"))})
    events = reconciler.release(holdings, executor_ports(cluster))
    assert cluster.future_dirs == {}, "the copy is dropped; the replica stays in /a1"
    assert [e.reason for e in events] == ["Cancelled"] and "between log dirs" in events[0].message


# ------------------------------------------------------------------------------------------ a broker down (#12)


def test_reverting_counts_a_partition_already_back_on_its_originals_as_reverted_though_one_is_down() -> None:
    # P0's move was cancelled (KIP-455: back on 1, 5) while broker 5 is down: it is reverted, not skipped.
    memory = Memory(phase=Phase.REVERTING, observed_generation=2, originals={P0: (1, 5), P1: (1, 5), P2: (1, 2)})
    v = view({P0: (1, 5), P1: (2, 3), P2: (1, 2)})  # broker 5 is not live
    d = decide(intent({P0: (2, 3), P1: (2, 3), P2: (3, 4)}, generation=2, stop=True, revert=True), memory,
               Observation(v))
    assert d.phase is Phase.REVERTED
    assert set(d.skipped) == {P1}, "only the partition that is not back is skipped"
    assert d.reason == "PartiallyReverted"
    assert d.message.startswith("2 of 3 partition(s) reverted") and "orders-1" in d.message
    assert "every partition" not in d.message


def test_reverting_to_reverted_without_skips_says_every_partition() -> None:
    memory = Memory(phase=Phase.REVERTING, observed_generation=2, originals={P0: (1, 2), P1: (2, 3)})
    d = decide(intent({P0: (2, 3), P1: (3, 4)}, generation=2, stop=True, revert=True), memory,
               Observation(view({P0: (1, 2), P1: (2, 3)})))
    assert d.phase is Phase.REVERTED and d.reason == "Reverted" and not d.skipped
    assert d.message == "every partition reverted to its original replicas"


def test_executing_reports_an_in_flight_move_waiting_on_a_down_destination_broker() -> None:
    # P0 copies to broker 5, which is down; P1 copies to broker 3, which is up.
    v = view({P0: (1, 2, 5), P1: (1, 2, 3)}, ongoing={P0: moving((1, 2), (1, 5)), P1: moving((1, 2), (1, 3))})
    d = decide(intent({P0: (1, 5), P1: (1, 3)}), executing({P0: (1, 5), P1: (1, 3)}), Observation(v))
    assert d.phase is Phase.EXECUTING and not d.submit and not d.cancel
    assert d.reason == "BrokerUnavailable" and d.unavailable_brokers == (5,)
    assert d.message.startswith("broker(s) [5] not available: 1 move(s) wait on it: orders-0 (in flight)")
    assert "0/2 partitions done, 2 moving" in d.message
    progressing = next(c for c in d.conditions if c.type == "Progressing")
    assert progressing.status and progressing.reason == "BrokerUnavailable"


def test_a_listed_broker_that_does_not_answer_counts_as_down() -> None:
    # Broker 3 died as the active controller: the quorum fails over before anyone fences it, so DescribeCluster still
    # lists it while DescribeLogDirs gets no answer from it (what CI run 5's log implies; the fence took over a minute).
    v = replace(view({P0: (1, 2, 3), P1: (1, 2)}, ongoing={P0: moving((1, 2), (1, 3))}), unreachable=frozenset({3}))
    assert 3 in v.brokers
    d = decide(intent({P0: (1, 3), P1: (2, 3)}), executing({P0: (1, 3)}), Observation(v))
    assert d.reason == "BrokerUnavailable" and d.unavailable_brokers == (3,)
    assert "1 move(s) wait on it: orders-0 (in flight)" in d.message
    # Not held back: a broker just restarted may take a request timeout to answer, and Kafka takes the move anyway.
    assert d.submit == {P1: (2, 3)}


def test_executing_holds_back_a_move_to_a_down_broker_and_says_so() -> None:
    v = view({P0: (1, 2), P1: (1, 2)})  # broker 5 is not live
    d = decide(intent({P0: (1, 5), P1: (1, 3)}), executing({}), Observation(v))
    assert d.phase is Phase.EXECUTING
    assert d.submit == {P1: (1, 3)}, "nothing is sent towards a broker that is down"
    assert d.reason == "BrokerUnavailable" and "orders-0 (not started)" in d.message


def test_executing_without_a_down_broker_is_not_broker_unavailable() -> None:
    v = view({P0: (1, 2, 3)}, ongoing={P0: moving((1, 2), (1, 3))})
    d = decide(intent({P0: (1, 3)}), executing({P0: (1, 3)}), Observation(v))
    assert d.reason == "Executing" and d.unavailable_brokers == ()


def test_a_terminal_phase_with_throttles_left_is_not_ready_and_names_them() -> None:
    for phase in (Phase.SUCCEEDED, Phase.REVERTED, Phase.STOPPED):
        d = replace(decide(intent({P0: (2, 3)}), Memory(phase=phase, observed_generation=1),
                           Observation(view({P0: (2, 3)}))), cleanup_pending="rates of broker(s) [2]")
        by_type = {c.type: c for c in d.conditions}
        assert d.phase is phase, "the partitions are where the phase says"
        assert not by_type["Ready"].status and by_type["Progressing"].status and not by_type["Stalled"].status
        assert by_type["Progressing"].reason == "ThrottleCleanupPending"
        assert "rates of broker(s) [2]" in by_type["Progressing"].message
        assert by_type["Ready"].reason == d.reason, "Ready keeps the outcome's reason while throttles are left"


def test_a_terminal_phase_ticked_again_keeps_the_outcome_it_was_reached_with() -> None:
    memory = Memory(phase=Phase.REVERTED, observed_generation=1)
    d = decide(intent({P0: (2, 3)}), memory, Observation(view({P0: (2, 3)})))
    assert "no change since" in d.message
    outcome = "4 of 6 partition(s) reverted to their original replicas; 2 skipped (status.skipped): orders-0"
    status = {"conditions": [{"type": "Ready", "status": "False", "reason": "PartiallyReverted",
                              "message": f"{outcome}; replication throttles still set: rates of broker(s) [2]",
                              "lastTransitionTime": "2026-03-01T09:00:00Z"}]}
    kept = kept_outcome(d, memory, status)
    assert (kept.reason, kept.message) == ("PartiallyReverted", outcome)
    moved_on = replace(d, phase=Phase.REVERTING)
    assert kept_outcome(moved_on, memory, status) is moved_on, "only a phase that stays where it was"


def test_a_reverted_ticked_again_keeps_the_skipped_partitions_its_message_points_to() -> None:
    # A move back with no in-sync replica runs on and is skipped (KIP-236): the revert ended Reverted with it still
    # in flight, so the next tick follows it, and must not rewrite status.skipped empty under the same message.
    cluster = FakeCluster({P0: (1, 2), P1: (1, 2)}, moving={P0: (3, 4)})
    memory = Memory(phase=Phase.REVERTED, observed_generation=1, owned={P0: (3, 4)}, originals={P0: (1, 2)})
    skipped = [{"topic": T, "partition": 0, "reason": "no replica of the move back is in sync"}]
    message = "1 of 2 partition(s) reverted to their original replicas; 1 skipped (status.skipped): orders-0"
    status = {"phase": "Reverted", "observedGeneration": 1, "skipped": skipped,
              "inFlight": [{"topic": T, "partition": 0, "replicas": [3, 4]}],
              "conditions": [{"type": "Ready", "status": "False", "reason": "PartiallyReverted", "message": message,
                              "lastTransitionTime": "2026-03-01T09:00:00Z", "observedGeneration": 1}]}
    ports = executor_ports(cluster, save_originals=lambda _found: "move-rollback")
    body = {"metadata": {"namespace": "ns", "name": "move"}, "status": status}
    later = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    outcome = tick(Inputs(body, intent({P0: (3, 4), P1: (1, 2)}, revert=True), memory, later), ports)
    assert outcome is not None and outcome.status["phase"] == "Reverted"
    assert outcome.status["skipped"] == skipped
    assert condition(outcome.status, "Ready")["message"] == message
    assert not [c for c in cluster.calls if c == "alter_reassignments"], "nothing is sent: the skipped move runs on"


# ---------------------------------------------------------------- a target log dir offline (a failed disk, #30)


def dirs_view(offline: frozenset[str] = frozenset()) -> ClusterView:
    """P0 on broker 1 in /a, P1 on broker 2 in /a; broker 1's /b is offline when ``offline`` says so."""
    return replace(view({P0: (1,), P1: (2,)}),
                   log_dirs={1: frozenset({"/a", "/b"} - offline), 2: frozenset({"/a", "/b"})},
                   offline_dirs={1: offline} if offline else {},
                   replica_dirs={(P0, 1): "/a", (P1, 2): "/a"})


def to_b(*partitions: TopicPartition, generation: int = 1) -> Intent:
    brokers = {P0: 1, P1: 2}
    return Intent(generation=generation, targets={tp: Target((brokers[tp],), ("/b",)) for tp in partitions})


def test_a_target_dir_that_goes_offline_mid_move_fails_its_partition_naming_the_dir() -> None:
    executing = Memory(phase=Phase.EXECUTING, observed_generation=1)
    d = decide(to_b(P0), executing, Observation(dirs_view(frozenset({"/b"}))))
    assert d.phase is Phase.FAILED and d.reason == "LogDirOffline"
    assert "log dir /b of broker 1 is offline; the replica stays in /a" in d.message
    assert d.move_dirs == {}, "not asked again: Kafka would refuse it on every tick"
    assert set(d.dir_failures) == {P0} and d.dir_failures[P0].code == "KAFKA_STORAGE_ERROR"


def test_the_other_partitions_go_on_while_one_waits_for_an_offline_dir() -> None:
    executing = Memory(phase=Phase.EXECUTING, observed_generation=1)
    d = decide(to_b(P0, P1), executing, Observation(dirs_view(frozenset({"/b"}))))
    assert d.phase is Phase.EXECUTING and d.move_dirs == {(P1, 2): "/b"}
    assert set(d.dir_failures) == {P0} and "1 refused by Kafka" in d.message
    recorded = replace(executing, failures=dict(d.dir_failures))
    assert decide(to_b(P0, P1), recorded, Observation(dirs_view(frozenset({"/b"})))).dir_failures == {}, \
        "found once: recorded, it is not reported again"


def test_a_source_dir_that_goes_offline_mid_copy_fails_its_partition_naming_the_dir() -> None:
    """Broker 1's /a fails while P0 is copied from it to /b: DescribeLogDirs lists /a as offline and P0's replica in
    no online dir (only its future replica in /b). The copy can never end: failed, naming the dir, not asked again."""
    executing = Memory(phase=Phase.EXECUTING, observed_generation=1)
    failing = replace(dirs_view(), log_dirs={1: frozenset({"/b"}), 2: frozenset({"/a", "/b"})},
                      offline_dirs={1: frozenset({"/a"})}, replica_dirs={(P1, 2): "/a"},
                      future_dirs={(P0, 1): "/b"})
    d = decide(to_b(P0), executing, Observation(failing))
    assert d.phase is Phase.FAILED and d.reason == "LogDirOffline", d
    assert "the replica on broker 1 is in an offline log dir (/a): Kafka cannot read it" in d.message
    assert d.move_dirs == {} and set(d.dir_failures) == {P0}
    assert d.dir_failures[P0].code == "KAFKA_STORAGE_ERROR"


def test_a_replica_missing_from_the_dirs_of_a_broker_with_no_offline_dir_is_moved_as_before() -> None:
    """Absent from DescribeLogDirs but no dir offline on its broker (a replica being created, an answer in flight):
    no failure, the move is asked for."""
    d = decide(to_b(P0), Memory(phase=Phase.EXECUTING, observed_generation=1),
               Observation(replace(dirs_view(), replica_dirs={(P1, 2): "/a"})))
    assert d.dir_failures == {} and d.phase is Phase.EXECUTING, d


def test_a_spec_naming_an_offline_dir_is_invalid_with_the_reason() -> None:
    d = decide(to_b(P0), Memory(), Observation(dirs_view(frozenset({"/b"}))))
    assert d.phase is Phase.INVALID and d.reason == "LogDirOffline"
    assert "broker 1's log dir '/b' is offline" in d.message


def test_an_online_target_dir_is_moved_to_as_before() -> None:
    d = decide(to_b(P0), Memory(phase=Phase.EXECUTING, observed_generation=1), Observation(dirs_view()))
    assert d.phase is Phase.EXECUTING and d.move_dirs == {(P0, 1): "/b"} and d.dir_failures == {}
