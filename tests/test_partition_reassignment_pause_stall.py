"""Pause / resume (spec.execution.paused) and stall detection (spec.execution.stallAfterSeconds, onStall): one test
per transition they add to the PartitionReassignment life cycle, and the pure stall clock of kpo.domain.stall."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from kpo.domain import conditions as cond
from kpo.domain.model import Broker, ClusterView, KafkaRefusal, OngoingReassignment, PartitionState, TopicPartition
from kpo.domain.reassignment import Target
from kpo.domain.stall import (
    STALLED_CODE,
    Stall,
    Watch,
    copied_bytes,
    down_destinations,
    follow,
    lag_bytes,
    stalled,
)
from kpo.resources.partition_reassignment.lifecycle import (
    MOVE_STALLED,
    PAUSED,
    STALL_CLEARED,
    TRANSITIONS,
    Intent,
    Memory,
    Observation,
    Phase,
    decide,
)

T = "orders"
P0, P1, P2 = (TopicPartition(T, i) for i in range(3))
T0 = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)
FLAGGED = Stall(brokers=(3,), down=(), copied=1000, since=T0)


def view(replicas: dict[TopicPartition, tuple[int, ...]], ongoing: dict[TopicPartition, OngoingReassignment]
         | None = None, *, brokers: tuple[int, ...] = (1, 2, 3, 4),
         sizes: dict[tuple[TopicPartition, int], int] | None = None) -> ClusterView:
    return ClusterView(brokers={b: Broker(b) for b in brokers},
                       partitions={tp: PartitionState(r, r[0], r) for tp, r in replicas.items()},
                       ongoing=ongoing or {}, topics=frozenset({T}), min_insync={T: 1}, replica_sizes=sizes or {})


def moving(original: tuple[int, ...], target: tuple[int, ...]) -> OngoingReassignment:
    adding = tuple(b for b in target if b not in original)
    removing = tuple(b for b in original if b not in target)
    return OngoingReassignment(replicas=target + removing, adding=adding, removing=removing)


def intent(targets: dict[TopicPartition, tuple[int, ...]], generation: int = 1, **kw: object) -> Intent:
    return replace(Intent(generation=generation, targets={tp: Target(r) for tp, r in targets.items()}), **kw)


TARGETS = {P0: (2, 3), P1: (2, 3), P2: (2, 3)}


def half_way(**sizes: int) -> tuple[ClusterView, Memory]:
    """P0 moving (kpo's own), P1 done, P2 not started; the replica of P0 on broker 3 holds ``sizes['p0']``."""
    v = view({P0: (1, 2, 3), P1: (2, 3), P2: (1, 2)}, {P0: moving((1, 2), (2, 3))},
             sizes={(P0, 3): sizes.get("p0", 0)})
    return v, Memory(phase=Phase.EXECUTING, observed_generation=1, owned={P0: (2, 3), P1: (2, 3)},
                     originals={P0: (1, 2), P1: (1, 2)})


def test_the_paused_phase_has_a_transition_map() -> None:
    assert Phase.PAUSED in TRANSITIONS and Phase.PAUSED in TRANSITIONS[Phase.EXECUTING]


# -------------------------------------------------------------------------------------------------------- Pause


def test_pending_to_paused_sends_nothing_and_saves_nothing() -> None:
    d = decide(intent({P0: (2, 3)}, paused=True), Memory(), Observation(view({P0: (1, 2)})))
    assert d.phase is Phase.PAUSED and d.reason == PAUSED
    assert not d.submit and not d.cancel and not d.save_originals
    assert "0 move(s) in flight" in d.message and "1 waiting" in d.message


def test_executing_to_paused_starts_nothing_and_lets_the_move_in_flight_run() -> None:
    v, memory = half_way()
    d = decide(intent(TARGETS, generation=2, paused=True), memory, Observation(v))
    assert d.phase is Phase.PAUSED
    assert not d.submit and not d.cancel and not d.move_dirs
    assert d.classification is not None and dict(d.classification.owned) == {P0: (2, 3)}
    assert "1 move(s) in flight run to the end" in d.message and "1/3 partitions done, 1 waiting" in d.message
    assert d.events[-1].message.startswith("Executing -> Paused")


def test_paused_conditions_are_neither_progressing_nor_stalled() -> None:
    v, memory = half_way()
    d = decide(intent(TARGETS, generation=2, paused=True), memory, Observation(v))
    by_type = {c.type: c for c in d.conditions}
    assert not by_type[cond.READY].status and not by_type[cond.PROGRESSING].status
    assert not by_type[cond.STALLED].status and by_type[cond.PROGRESSING].reason == PAUSED


def test_pausing_never_retargets_or_cancels_a_move_in_flight() -> None:
    # Incremental: the move in flight is a step on the way, not the final target; pausing leaves it as it is, and so
    # does a move of a partition dropped from the spec in the same change.
    v = view({P0: (1, 2, 3), P1: (1, 2, 4)}, {P0: moving((1, 2), (2, 3)), P1: moving((1, 2), (1, 2, 4))})
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, owned={P0: (2, 3), P1: (1, 2, 4)},
                    originals={P0: (1, 2), P1: (1, 2)})
    d = decide(intent({P0: (3, 4)}, generation=2, paused=True, incremental=True), memory, Observation(v))
    assert d.phase is Phase.PAUSED and not d.submit and not d.cancel


def test_paused_stays_paused_while_a_move_finishes() -> None:
    v = view({P0: (2, 3), P1: (2, 3), P2: (1, 2)})
    memory = Memory(phase=Phase.PAUSED, observed_generation=2, owned={P0: (2, 3)}, originals={P0: (1, 2)})
    d = decide(intent(TARGETS, generation=2, paused=True), memory, Observation(v))
    assert d.phase is Phase.PAUSED and not d.submit and not d.events
    assert "0 move(s) in flight" in d.message and "2/3 partitions done" in d.message


def test_paused_to_executing_on_resume_starts_the_waiting_moves() -> None:
    v, memory = half_way()
    memory = replace(memory, phase=Phase.PAUSED, observed_generation=2)
    d = decide(intent(TARGETS, generation=3), memory, Observation(v))
    assert d.phase is Phase.EXECUTING and d.submit == {P2: (2, 3)}
    assert d.events[-1].message.startswith("Paused -> Executing")


def test_paused_to_succeeded_on_resume_when_everything_finished_meanwhile() -> None:
    v = view({P0: (2, 3), P1: (2, 3), P2: (2, 3)})
    memory = Memory(phase=Phase.PAUSED, observed_generation=2, originals={P0: (1, 2)})
    d = decide(intent(TARGETS, generation=3), memory, Observation(v))
    assert d.phase is Phase.SUCCEEDED


def test_paused_to_stopping_on_stop_cancels_the_move_in_flight() -> None:
    v, memory = half_way()
    memory = replace(memory, phase=Phase.PAUSED, observed_generation=2)
    d = decide(intent(TARGETS, generation=3, paused=True, stop=True), memory, Observation(v))
    assert d.phase is Phase.STOPPING and d.cancel == (P0,)


def test_paused_to_stopped_on_stop_with_nothing_in_flight() -> None:
    v = view({P0: (2, 3), P1: (2, 3), P2: (1, 2)})
    memory = Memory(phase=Phase.PAUSED, observed_generation=2, originals={P0: (1, 2)})
    d = decide(intent(TARGETS, generation=3, paused=True, stop=True), memory, Observation(v))
    assert d.phase is Phase.STOPPED


def test_paused_to_reverting_on_stop_with_revert_and_nothing_in_flight() -> None:
    v = view({P0: (2, 3), P1: (2, 3), P2: (1, 2)})
    memory = Memory(phase=Phase.PAUSED, observed_generation=2, originals={P0: (1, 2), P1: (1, 2)})
    d = decide(intent(TARGETS, generation=3, paused=True, stop=True, revert_on_stop=True), memory, Observation(v))
    assert d.phase is Phase.REVERTING and set(d.submit) == {P0, P1}


def test_paused_to_invalid_when_the_changed_spec_cannot_be_carried_out() -> None:
    v, memory = half_way()
    memory = replace(memory, phase=Phase.PAUSED, observed_generation=2)
    d = decide(intent({**TARGETS, P2: (2, 9)}, generation=3, paused=True), memory, Observation(v))
    assert d.phase is Phase.INVALID and d.reason == "UnknownBroker" and not d.submit and not d.cancel


def test_paused_to_failed_on_resume_when_only_refused_moves_are_left() -> None:
    v = view({P0: (2, 3), P1: (2, 3), P2: (1, 2)})
    memory = Memory(phase=Phase.PAUSED, observed_generation=2, originals={P0: (1, 2)},
                    failures={P2: KafkaRefusal("INVALID_REPLICA_ASSIGNMENT")})
    d = decide(intent(TARGETS, generation=3), memory, Observation(v))
    assert d.phase is Phase.FAILED and d.reason == "KafkaRefused"


def test_a_terminal_resource_changed_to_paused_goes_through_pending_to_paused() -> None:
    v = view({P0: (1, 2)})
    memory = Memory(phase=Phase.SUCCEEDED, observed_generation=1)
    d = decide(intent({P0: (2, 3)}, generation=2, paused=True), memory, Observation(v))
    assert d.phase is Phase.PAUSED and not d.submit


# ------------------------------------------------------------------------------------------------ stall: domain


def test_a_move_whose_new_replicas_grow_restarts_its_clock() -> None:
    later = T0 + dt.timedelta(seconds=30)
    watches = follow({P0: Watch(100, T0), P1: Watch(100, T0)}, {P0: 150, P1: 100, P2: 0}, later)
    assert watches == {P0: Watch(150, later), P1: Watch(100, T0), P2: Watch(0, later)}


def test_copied_bytes_count_only_the_new_replicas_of_the_move() -> None:
    v = view({P0: (1, 2, 3, 4)}, {P0: moving((1, 2), (3, 4))}, sizes={(P0, 1): 500, (P0, 3): 20, (P0, 4): 30})
    assert copied_bytes(v, P0) == 50 and copied_bytes(v, P1) == 0


def test_a_move_is_stalled_only_after_stall_after_seconds_and_names_the_down_broker() -> None:
    v = view({P0: (1, 2, 3)}, {P0: moving((1, 2), (2, 3))}, brokers=(1, 2))
    watches = {P0: Watch(0, T0)}
    assert stalled(watches, v, T0 + dt.timedelta(seconds=59), 60) == {}
    found = stalled(watches, v, T0 + dt.timedelta(seconds=60), 60)
    assert found[P0].brokers == (3,) and found[P0].down == (3,) and found[P0].since == T0
    listed_but_silent = replace(view({P0: (1, 2, 3)}, {P0: moving((1, 2), (2, 3))}), unreachable=frozenset({3}))
    assert stalled(watches, listed_but_silent, T0 + dt.timedelta(seconds=60), 60)[P0].down == (3,)


# --------------------------------------------------------------------------------------------- stall: life cycle


def test_executing_follows_a_growing_move_without_flagging_it() -> None:
    v, memory = half_way(p0=5000)
    memory = replace(memory, watches={P0: Watch(1000, T0)})
    now = T0 + dt.timedelta(seconds=3600)
    d = decide(intent(TARGETS, stall_after=60), memory, Observation(v, now=now))
    assert d.phase is Phase.EXECUTING and not d.stalled
    assert d.watches[P0] == Watch(5000, now, behind=0, closing_since=now)
    assert not any(e.reason == MOVE_STALLED for e in d.events)


def test_executing_flags_a_move_without_progress_with_condition_stalled_and_one_event() -> None:
    v, memory = half_way(p0=1000)
    memory = replace(memory, watches={P0: Watch(1000, T0)})
    now = T0 + dt.timedelta(seconds=61)
    d = decide(intent(TARGETS, stall_after=60), memory, Observation(v, now=now))
    assert d.phase is Phase.EXECUTING and set(d.stalled) == {P0} and P0 not in d.cancel
    stalled_condition = {c.type: c for c in d.conditions}[cond.STALLED]
    assert stalled_condition.status and stalled_condition.reason == MOVE_STALLED
    assert "orders-0 to broker(s) [3]" in stalled_condition.message
    assert [e.reason for e in d.events] == [MOVE_STALLED] and d.events[0].type == "Warning"
    # The next tick, already reported: flagged still, no second Event.
    again = decide(intent(TARGETS, stall_after=60), replace(memory, stalled=dict(d.stalled)),
                   Observation(v, now=now + dt.timedelta(seconds=5)))
    assert set(again.stalled) == {P0} and not again.events


def test_a_stalled_move_that_copies_again_is_cleared_with_an_event() -> None:
    v, memory = half_way(p0=2000)
    memory = replace(memory, watches={P0: Watch(1000, T0)}, stalled={P0: FLAGGED})
    d = decide(intent(TARGETS, stall_after=60), memory, Observation(v, now=T0 + dt.timedelta(seconds=600)))
    assert not d.stalled and [e.reason for e in d.events] == [STALL_CLEARED]
    assert not {c.type: c for c in d.conditions}[cond.STALLED].status


def test_a_stalled_move_that_ended_is_cleared_with_an_event_when_the_phase_moves_on() -> None:
    v = view({P0: (2, 3), P1: (2, 3), P2: (2, 3)})
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, owned={P0: (2, 3)}, originals={P0: (1, 2)},
                    watches={P0: Watch(1000, T0)}, stalled={P0: FLAGGED})
    d = decide(intent(TARGETS, stall_after=60), memory, Observation(v, now=T0 + dt.timedelta(seconds=600)))
    assert d.phase is Phase.SUCCEEDED and not d.stalled
    assert [e.reason for e in d.events] == [STALL_CLEARED, "Succeeded"]


def test_on_stall_cancel_cancels_the_stalled_move_and_records_why() -> None:
    v, memory = half_way(p0=1000)
    memory = replace(memory, watches={P0: Watch(1000, T0)})
    d = decide(intent(TARGETS, stall_after=60, cancel_on_stall=True), memory,
               Observation(v, now=T0 + dt.timedelta(seconds=61)))
    assert d.phase is Phase.EXECUTING and P0 in d.cancel and d.give_up[P0].code == STALLED_CODE
    assert [e.reason for e in d.events] == [MOVE_STALLED] and "cancelling" in d.events[0].message


def test_executing_to_failed_with_reason_move_stalled_once_the_rest_is_done() -> None:
    v = view({P0: (1, 2), P1: (2, 3), P2: (2, 3)})
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, originals={P0: (1, 2)},
                    failures={P0: KafkaRefusal(STALLED_CODE, "no byte progress")})
    d = decide(intent(TARGETS, stall_after=60, cancel_on_stall=True), memory,
               Observation(v, now=T0))
    assert d.phase is Phase.FAILED and d.reason == MOVE_STALLED and "stalled and were cancelled" in d.message
    assert not d.submit  # the cancelled move is not sent again until the spec changes


def test_a_paused_resource_still_watches_its_moves_in_flight() -> None:
    v, memory = half_way(p0=0)
    memory = replace(memory, phase=Phase.PAUSED, observed_generation=2, watches={P0: Watch(0, T0)})
    d = decide(intent(TARGETS, generation=2, paused=True, stall_after=60), memory,
               Observation(v, now=T0 + dt.timedelta(seconds=120)))
    assert d.phase is Phase.PAUSED and set(d.stalled) == {P0}


def test_a_move_submitted_or_retargeted_by_the_decision_is_not_followed_yet() -> None:
    v = view({P0: (1, 2)})
    d = decide(intent({P0: (2, 3)}, stall_after=60), Memory(), Observation(v, now=T0))
    assert d.submit == {P0: (2, 3)} and d.watches == {}


# --------------------------------------------------------------- stall: timing and a broker's return (issue 26)


def test_a_destination_broker_that_comes_back_restarts_the_clock_and_one_still_down_does_not() -> None:
    later = T0 + dt.timedelta(seconds=30)
    previous = {P0: Watch(100, T0, down=(3,)), P1: Watch(100, T0, down=(3,))}
    watches = follow(previous, {P0: 100, P1: 100}, later, {P0: (), P1: (3,)})
    assert watches == {P0: Watch(100, later), P1: Watch(100, T0, down=(3,))}
    # A broker that goes down is no progress: the clock keeps its start, and remembers who is down.
    assert follow({P0: Watch(100, T0)}, {P0: 0}, later, {P0: (3,)}) == {P0: Watch(0, T0, down=(3,))}


def test_down_destinations_are_the_unlisted_or_silent_brokers_the_move_copies_to() -> None:
    v = replace(view({P0: (1, 2, 3, 4)}, {P0: moving((1, 2), (3, 4))}, brokers=(1, 2, 4)),
                unreachable=frozenset({4}))
    assert down_destinations(v, P0) == (3, 4) and down_destinations(v, P1) == ()


def test_the_catch_up_after_a_brokers_return_is_not_a_stall() -> None:
    # P0's destination (3) was down since T0 and flagged; it is back now, its replica the size it had: not stalled,
    # whatever the time since the last growth, and the flag goes with a StallCleared Event.
    v, memory = half_way(p0=1000)
    memory = replace(memory, watches={P0: Watch(1000, T0, down=(3,))}, stalled={P0: FLAGGED})
    now = T0 + dt.timedelta(seconds=300)
    for cancel in (False, True):
        d = decide(intent(TARGETS, stall_after=60, cancel_on_stall=cancel), memory, Observation(v, now=now))
        assert not d.stalled and P0 not in d.cancel and not d.give_up
        assert d.watches[P0] == Watch(1000, now, behind=0, closing_since=now)
        assert [e.reason for e in d.events] == [STALL_CLEARED]
    # stallAfterSeconds more without growth after the return: stalled again.
    back = replace(memory, watches={P0: Watch(1000, now)}, stalled={})
    assert not decide(intent(TARGETS, stall_after=60), back,
                      Observation(v, now=now + dt.timedelta(seconds=59))).stalled
    assert set(decide(intent(TARGETS, stall_after=60), back,
                      Observation(v, now=now + dt.timedelta(seconds=60))).stalled) == {P0}


def test_on_stall_cancel_reports_the_stall_in_the_deciding_tick_with_the_down_broker() -> None:
    v, memory = half_way(p0=1000)
    v = replace(v, brokers={b: v.brokers[b] for b in (1, 2, 4)})  # broker 3, P0's destination, died
    memory = replace(memory, watches={P0: Watch(1000, T0, down=(3,))})
    d = decide(intent(TARGETS, stall_after=60, cancel_on_stall=True), memory,
               Observation(v, now=T0 + dt.timedelta(seconds=60)))
    assert P0 in d.cancel and d.give_up[P0].code == STALLED_CODE
    assert d.stalled[P0].brokers == (3,) and d.stalled[P0].down == (3,) and not d.stalled[P0].cancelled
    by_type = {c.type: c for c in d.conditions}
    assert by_type[cond.STALLED].status and by_type[cond.STALLED].reason == MOVE_STALLED
    assert "cancelling (execution.onStall Cancel)" in by_type[cond.STALLED].message
    assert "broker(s) [3] down" in by_type[cond.STALLED].message
    # The next tick, the cancellation accepted (the failure recorded): still reported, as cancelled, no new Event.
    cancelled = replace(d.stalled[P0], cancelled=True)
    after = replace(memory, owned={P1: (2, 3)}, failures={P0: d.give_up[P0]}, stalled={P0: cancelled}, watches={})
    again = decide(intent(TARGETS, stall_after=60, cancel_on_stall=True), after,
                   Observation(view({P0: (1, 2), P1: (2, 3), P2: (1, 2)}), now=T0 + dt.timedelta(seconds=62)))
    assert again.phase is Phase.EXECUTING and again.stalled == {P0: cancelled}
    assert not any(e.reason in (MOVE_STALLED, STALL_CLEARED) for e in again.events)
    stalled_condition = {c.type: c for c in again.conditions}[cond.STALLED]
    assert stalled_condition.status and stalled_condition.reason == MOVE_STALLED
    assert "stalled and were cancelled" in stalled_condition.message


def test_failed_for_a_stall_with_throttles_left_is_stalled_and_still_progressing() -> None:
    v = view({P0: (1, 2), P1: (2, 3), P2: (2, 3)})
    refusal = KafkaRefusal(STALLED_CODE, "no byte progress")
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, originals={P0: (1, 2)}, failures={P0: refusal},
                    stalled={P0: replace(FLAGGED, cancelled=True)})
    d = decide(intent(TARGETS, stall_after=60, cancel_on_stall=True), memory, Observation(v, now=T0))
    assert d.phase is Phase.FAILED and set(d.stalled) == {P0}
    by_type = {c.type: c for c in replace(d, cleanup_pending="rates of broker(s) [3]").conditions}
    assert by_type[cond.STALLED].status and by_type[cond.STALLED].reason == MOVE_STALLED
    assert by_type[cond.PROGRESSING].status and by_type[cond.PROGRESSING].reason == "ThrottleCleanupPending"
    assert not by_type[cond.READY].status and by_type[cond.READY].reason == MOVE_STALLED


# ------------------------------------------------------------- stall: a move that copies but never catches up


def behind_view(leader: int, copied: int) -> ClusterView:
    """P0 moving from (1, 2) to (2, 3): the leader (1) and broker 2 hold ``leader`` bytes, broker 3 ``copied``."""
    return view({P0: (1, 2, 3)}, {P0: moving((1, 2), (2, 3))},
                sizes={(P0, 1): leader, (P0, 2): leader, (P0, 3): copied})


def test_a_moves_lag_is_what_its_slowest_new_replica_lacks_against_the_largest_replica() -> None:
    v = view({P0: (1, 2, 3, 4)}, {P0: moving((1, 2), (3, 4))}, sizes={(P0, 1): 900, (P0, 2): 1000, (P0, 3): 700,
                                                                     (P0, 4): 400})
    assert lag_bytes(v, P0) == 600 and lag_bytes(v, P1) == 0
    # A destination that does not answer has no size: it lacks everything.
    assert lag_bytes(replace(v, replica_sizes={(P0, 1): 1000, (P0, 3): 700}), P0) == 1000


def test_a_move_that_copies_while_its_leader_grows_as_fast_is_stalled_behind_after_stall_after_seconds() -> None:
    # Every 30 s the new replica gains 500 bytes and the leader 1000: the lag grows, never reaching a new low.
    watches: dict[TopicPartition, Watch] = {}
    for step in range(4):
        v = behind_view(leader=2000 + 1000 * step, copied=1000 + 500 * step)
        now = T0 + dt.timedelta(seconds=30 * step)
        watches = follow(watches, {P0: copied_bytes(v, P0)}, now, {P0: ()}, {P0: lag_bytes(v, P0)})
        found = stalled(watches, v, now, 60)
        assert watches[P0].since == now, "it copies: the byte clock restarts every look"
        assert watches[P0].behind == 1000 and watches[P0].closing_since == T0
        assert (P0 in found) == (step >= 2), step
    assert found[P0] == Stall(brokers=(3,), down=(), copied=2500, since=T0, behind=2500)
    assert "still 2500 bytes behind its largest replica and no closer for 90s" in found[P0].describe(P0, now)


def test_a_move_that_gains_on_its_leader_is_not_stalled_however_slowly() -> None:
    # The leader grows 1000 bytes every 30 s, the copy 1100: the lag falls by 100 bytes a look.
    watches: dict[TopicPartition, Watch] = {}
    for step in range(20):
        v = behind_view(leader=50_000 + 1000 * step, copied=1000 + 1100 * step)
        now = T0 + dt.timedelta(seconds=30 * step)
        watches = follow(watches, {P0: copied_bytes(v, P0)}, now, {P0: ()}, {P0: lag_bytes(v, P0)})
        assert stalled(watches, v, now, 60) == {} and watches[P0].closing_since == now


def test_a_move_whose_lag_is_not_known_is_judged_by_its_bytes_only() -> None:
    # A status an older kpo wrote has no lag: the clock starts at the first look that has one.
    old = {P0: Watch(1000, T0)}
    v = behind_view(leader=9000, copied=2000)
    later = T0 + dt.timedelta(seconds=600)
    assert follow(old, {P0: 2000}, later, {P0: ()})[P0] == Watch(2000, later)
    assert follow(old, {P0: 2000}, later, {P0: ()}, {P0: 7000})[P0] == Watch(2000, later, behind=7000,
                                                                             closing_since=later)
    assert stalled({P0: Watch(2000, later)}, v, later + dt.timedelta(seconds=600), 60)[P0].behind is None


def test_executing_flags_a_move_behind_with_its_lag_the_throttle_to_raise_and_one_event() -> None:
    v = replace(behind_view(leader=9000, copied=5000), partitions={
        P0: PartitionState((1, 2, 3), 1, (1, 2)), P1: PartitionState((2, 3), 2, (2, 3)),
        P2: PartitionState((1, 2), 1, (1, 2))})
    _, memory = half_way()
    memory = replace(memory, watches={P0: Watch(4000, T0, behind=3000, closing_since=T0)})
    now = T0 + dt.timedelta(seconds=61)
    d = decide(intent(TARGETS, stall_after=60, throttle=1_048_576), memory, Observation(v, now=now))
    assert d.phase is Phase.EXECUTING and d.stalled[P0].behind == 4000 and P0 not in d.cancel
    message = {c.type: c for c in d.conditions}[cond.STALLED].message
    assert "1 move(s) made no progress for 60s or more: orders-0 to broker(s) [3] (5000 bytes copied, still 4000 " \
           "bytes behind its largest replica and no closer for 61s" in message
    assert message.endswith("raise execution.throttle (1048576 B/s now) above their write rate"), message
    assert [e.reason for e in d.events] == [MOVE_STALLED] and "raise execution.throttle" in d.events[0].message
    # Cancel under onStall Cancel, as any stall; without a throttle the hint names the fetch rate instead.
    cancel = decide(intent(TARGETS, stall_after=60, cancel_on_stall=True), memory, Observation(v, now=now))
    assert P0 in cancel.cancel and cancel.give_up[P0].code == STALLED_CODE
    assert "its destination brokers fetch slower than it takes writes" in cancel.events[0].message
    # The throttle raised: the copy gains, the lag reaches a new low, and the flag goes with one Event.
    gaining = replace(v, replica_sizes={**v.replica_sizes, (P0, 3): 8500})
    cleared = decide(intent(TARGETS, stall_after=60, throttle=10_485_760), replace(memory, watches=d.watches,
                     stalled=dict(d.stalled)), Observation(gaining, now=now + dt.timedelta(seconds=2)))
    assert not cleared.stalled and [e.reason for e in cleared.events] == [STALL_CLEARED]
