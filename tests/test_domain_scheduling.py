"""The cluster-wide move scheduler: one test per rule, then properties over random clusters."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kpo.domain.model import TopicPartition
from kpo.domain.scheduling import (
    Execution,
    Limits,
    Move,
    Order,
    Owner,
    SchedulerConfig,
    Touch,
    copied_bytes,
    moves_to_start,
)

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
OLDER = Owner(EPOCH, "team-a", "older")
NEWER = Owner(EPOCH + timedelta(minutes=5), "team-b", "newer")
UNLIMITED = SchedulerConfig()


def move(
    owner: Owner,
    partition: int,
    current: tuple[int, ...],
    target: tuple[int, ...],
    *,
    size: int = 0,
    position: int | None = None,
    topic: str = "orders",
    write_rate: float = 0.0,
) -> Move:
    return Move(
        owner=owner,
        partition=TopicPartition(topic, partition),
        current=current,
        target=target,
        size_bytes=size,
        position=partition if position is None else position,
        write_rate=write_rate,
    )


def started_partitions(started: list[Move]) -> list[int]:
    return [m.partition.partition for m in started]


# Rule 3: which brokers a move touches.


def test_a_move_touches_its_new_replicas_and_the_leader_that_feeds_them() -> None:
    m = move(OLDER, 0, (1, 2, 3), (1, 2, 4))
    assert m.touched() == {1, 4}
    assert m.touched(Touch.ALL_REPLICAS) == {1, 2, 3, 4}
    assert Move(OLDER, TopicPartition("t", 0), (1, 2, 3), (1, 2, 4), leader=3).touched() == {3, 4}


def test_dropping_or_reordering_replicas_touches_no_broker_and_starts_even_on_busy_brokers() -> None:
    busy = [move(NEWER, 9, (1, 2), (1, 3))]
    shrink = move(OLDER, 0, (1, 2, 3), (1, 3))
    reorder = move(OLDER, 1, (1, 3), (3, 1))
    assert shrink.touched() == frozenset()
    config = SchedulerConfig(max_moves_per_broker=1)
    assert moves_to_start([shrink, reorder], busy, {}, config) == [shrink, reorder]


def test_with_all_replicas_counted_moves_sharing_a_staying_replica_do_not_run_together() -> None:
    a = move(OLDER, 0, (1, 2), (1, 3))
    b = move(OLDER, 1, (4, 2), (4, 5))
    assert moves_to_start([a, b], [], {}, SchedulerConfig(max_moves_per_broker=1)) == [a, b]
    assert moves_to_start([a, b], [], {}, SchedulerConfig(max_moves_per_broker=1, touch=Touch.ALL_REPLICAS)) == [a]


# Rule 1: a partition moves once at a time.


def test_a_partition_already_moving_is_not_started_again() -> None:
    theirs = move(NEWER, 0, (1, 2), (3, 4))
    ours = move(OLDER, 0, (1, 2), (5, 6))
    other = move(OLDER, 1, (1, 2), (5, 6))
    assert moves_to_start([ours, other], [theirs], {}, UNLIMITED) == [other]


def test_two_crs_claiming_one_partition_get_one_move_started() -> None:
    first = move(OLDER, 0, (1, 2), (3, 4))
    second = move(NEWER, 0, (1, 2), (5, 6))
    assert moves_to_start([second, first], [], {}, UNLIMITED) == [first]


# Rule 2: limits.


def test_cluster_cap_counts_every_move_in_flight() -> None:
    pending = [move(OLDER, p, (1,), (2,)) for p in range(5)]
    in_flight = [move(NEWER, 10, (3,), (4,)), move(NEWER, 11, (3,), (4,))]
    assert started_partitions(moves_to_start(pending, in_flight, {}, SchedulerConfig(max_moves=4))) == [0, 1]


def test_a_crs_max_moves_counts_only_its_own_moves() -> None:
    pending = [move(OLDER, p, (1,), (2,)) for p in range(5)]
    in_flight = [move(OLDER, 10, (3,), (4,)), move(NEWER, 11, (3,), (4,))]
    executions = {OLDER: Execution(limits=Limits(max_moves=3))}
    assert started_partitions(moves_to_start(pending, in_flight, executions, UNLIMITED)) == [0, 1]


def test_the_default_max_moves_applies_to_a_cr_that_sets_none() -> None:
    pending = [move(OLDER, p, (1,), (2,)) for p in range(5)]
    config = SchedulerConfig(defaults=Limits(max_moves=2))
    assert started_partitions(moves_to_start(pending, [], {}, config)) == [0, 1]
    executions = {OLDER: Execution(limits=Limits(max_moves=4))}
    assert started_partitions(moves_to_start(pending, [], executions, config)) == [0, 1, 2, 3]


def test_per_broker_limit_counts_moves_of_other_crs_on_that_broker() -> None:
    in_flight = [move(NEWER, 10, (1, 2), (1, 3))]  # broker 1 sends, 3 receives
    blocked = move(OLDER, 0, (4, 5), (4, 3))  # 3 would receive a second move
    free = move(OLDER, 1, (4, 5), (4, 6))
    executions = {OLDER: Execution(limits=Limits(max_moves_per_broker=1))}
    assert moves_to_start([blocked, free], in_flight, executions, UNLIMITED) == [free]


def test_per_broker_limit_of_two_allows_two_moves_per_broker() -> None:
    pending = [move(OLDER, p, (1, 2), (1, 3)) for p in range(4)]
    config = SchedulerConfig(defaults=Limits(max_moves_per_broker=2))
    assert started_partitions(moves_to_start(pending, [], {}, config)) == [0, 1]


def test_the_cluster_per_broker_cap_wins_over_a_crs_larger_limit() -> None:
    pending = [move(OLDER, p, (1,), (2,)) for p in range(4)]
    executions = {OLDER: Execution(limits=Limits(max_moves_per_broker=3))}
    assert len(moves_to_start(pending, [], executions, SchedulerConfig(max_moves_per_broker=2))) == 2
    assert len(moves_to_start(pending, [], executions, SchedulerConfig())) == 3


def test_per_direction_limit_counts_moves_into_a_broker_and_out_of_it_apart() -> None:
    # Broker 1 sends one move and receives another: one move per direction.
    in_flight = [move(NEWER, 10, (1,), (2,), topic="b"), move(NEWER, 11, (3,), (1,), topic="b")]
    config = SchedulerConfig(defaults=Limits(max_moves_per_broker_direction=1))
    into_1 = move(OLDER, 0, (4,), (1,))
    out_of_1 = move(OLDER, 1, (1,), (5,))
    elsewhere = move(OLDER, 2, (4,), (5,))
    assert moves_to_start([into_1, out_of_1, elsewhere], in_flight, {}, config) == [elsewhere]
    # The same two moves in flight, but a limit of two: one more each way.
    two = SchedulerConfig(defaults=Limits(max_moves_per_broker_direction=2))
    assert moves_to_start([into_1, out_of_1], in_flight, {}, two) == [into_1, out_of_1]


def test_a_broker_that_only_sends_keeps_its_receiving_slots_for_moves_into_it() -> None:
    # With two slots per broker in all, two moves out of broker 1 fill it; with two per direction they do not.
    sending = [move(NEWER, 10 + p, (1,), (p + 2,), topic="b") for p in range(2)]
    into_1 = move(OLDER, 0, (5,), (1,))
    per_broker = SchedulerConfig(defaults=Limits(max_moves_per_broker=2))
    per_direction = SchedulerConfig(defaults=Limits(max_moves_per_broker_direction=2))
    assert moves_to_start([into_1], sending, {}, per_broker) == []
    assert moves_to_start([into_1], sending, {}, per_direction) == [into_1]


def test_a_crs_own_direction_limit_wins_over_the_default() -> None:
    in_flight = [move(NEWER, 10, (1,), (2,), topic="b")]
    config = SchedulerConfig(defaults=Limits(max_moves_per_broker_direction=1))
    executions = {OLDER: Execution(limits=Limits(max_moves_per_broker_direction=3))}
    pending = [move(OLDER, p, (1,), (p + 3,)) for p in range(3)]
    assert started_partitions(moves_to_start(pending, in_flight, executions, config)) == [0, 1]
    assert moves_to_start(pending, in_flight, {}, config) == []


def test_limits_below_one_are_refused() -> None:
    with pytest.raises(ValueError):
        Limits(max_moves=0)
    with pytest.raises(ValueError):
        Limits(max_moves_per_broker=-1)


# Rule 4: order within a CR, as a priority rather than a barrier.

SIZES = {0: 30, 1: 10, 2: 50, 3: 20}


def sized_moves() -> list[Move]:
    return [move(OLDER, p, (p * 2,), (p * 2 + 1,), size=SIZES[p], position=p) for p in SIZES]


@pytest.mark.parametrize(
    ("order", "expected"),
    [(Order.AS_GIVEN, [0, 1, 2, 3]), (Order.SMALLEST_FIRST, [1, 3, 0, 2]), (Order.LARGEST_FIRST, [2, 0, 3, 1])],
)
def test_order_within_a_cr(order: Order, expected: list[int]) -> None:
    executions = {OLDER: Execution(order=order)}
    assert started_partitions(moves_to_start(sized_moves(), [], executions, UNLIMITED)) == expected
    one_at_a_time = {OLDER: Execution(order=order, limits=Limits(max_moves=1))}
    assert started_partitions(moves_to_start(sized_moves(), [], one_at_a_time, UNLIMITED)) == expected[:1]


def test_equal_sizes_keep_spec_order() -> None:
    pending = [move(OLDER, p, (1,), (2,), size=7, position=4 - p) for p in range(4)]
    executions = {OLDER: Execution(order=Order.LARGEST_FIRST)}
    assert started_partitions(moves_to_start(pending, [], executions, UNLIMITED)) == [3, 2, 1, 0]


def test_a_blocked_first_move_does_not_keep_a_later_one_waiting() -> None:
    in_flight = [move(NEWER, 10, (1,), (2,))]
    first = move(OLDER, 0, (1,), (3,), size=100)
    second = move(OLDER, 1, (4,), (5,), size=1)
    executions = {OLDER: Execution(order=Order.LARGEST_FIRST, limits=Limits(max_moves_per_broker=1))}
    assert moves_to_start([first, second], in_flight, executions, UNLIMITED) == [second]
    # Once broker 1 is free, the first move is first in line again.
    assert moves_to_start([first], [second], executions, UNLIMITED) == [first]


# Rule 5: fair turns between CRs.


def test_idle_cluster_gives_round_robin_turns_in_creation_order() -> None:
    pending = [move(NEWER, p, (1,), (2,), topic="b") for p in range(3)]
    pending += [move(OLDER, p, (1,), (2,), topic="a") for p in range(3)]
    started = moves_to_start(pending, [], {}, SchedulerConfig(max_moves=5))
    assert [m.owner for m in started] == [OLDER, NEWER, OLDER, NEWER, OLDER]


def test_a_freed_slot_goes_to_the_cr_with_fewest_moves_in_flight() -> None:
    in_flight = [move(OLDER, 10, (1,), (2,), topic="a"), move(NEWER, 10, (1,), (2,), topic="b")]
    in_flight += [move(NEWER, 11, (1,), (2,), topic="b")]
    pending = [move(NEWER, p, (1,), (2,), topic="b") for p in range(3)]
    pending += [move(OLDER, p, (1,), (2,), topic="a") for p in range(3)]
    started = moves_to_start(pending, in_flight, {}, SchedulerConfig(max_moves=4))
    assert [m.owner for m in started] == [OLDER]


def test_a_cr_with_nothing_that_fits_leaves_the_turn_to_the_next() -> None:
    in_flight = [move(NEWER, 10, (1,), (2,), topic="b")]
    older_blocked = move(OLDER, 0, (1,), (3,))
    newer_free = move(NEWER, 0, (4,), (5,))
    config = SchedulerConfig(defaults=Limits(max_moves_per_broker=1))
    assert moves_to_start([older_blocked, newer_free], in_flight, {}, config) == [newer_free]


# Rule 4: the catch-up guard.

THROTTLE = 100.0
THROTTLED = {OLDER: Execution(throttle=THROTTLE), NEWER: Execution(throttle=THROTTLE)}


def test_flows_count_each_receiver_once_and_the_sender_once_per_receiver() -> None:
    assert move(OLDER, 0, (1, 2, 3), (4, 5, 6)).flows == {(4, "in"): 1, (5, "in"): 1, (6, "in"): 1, (1, "out"): 3}
    assert move(OLDER, 0, (1, 2), (2, 1)).flows == {}


def test_a_cold_move_does_not_join_a_broker_busy_with_a_hot_partition() -> None:
    hot = move(NEWER, 10, (1, 2), (1, 3), write_rate=40.0)  # 2 flows x 40 x headroom 2 = 160 > 100
    same_sender = move(OLDER, 0, (1, 4), (1, 5), write_rate=0.1)
    elsewhere = move(OLDER, 1, (6, 4), (6, 5), write_rate=0.1)
    assert moves_to_start([same_sender, elsewhere], [hot], THROTTLED, UNLIMITED) == [elsewhere]


def test_a_hot_move_does_not_join_a_busy_broker_but_takes_an_idle_one_whatever_its_rate() -> None:
    cold = move(NEWER, 10, (1, 2), (1, 3), write_rate=1.0)
    hot_on_busy = move(OLDER, 0, (1, 4), (1, 5), write_rate=30.0)
    hot_on_idle = move(OLDER, 1, (6, 4), (6, 7), write_rate=70.0)  # alone it has the whole throttle
    assert moves_to_start([hot_on_busy, hot_on_idle], [cold], THROTTLED, UNLIMITED) == [hot_on_idle]


def test_cold_moves_share_brokers_freely() -> None:
    pending = [move(OLDER, p, (1,), (p + 2,), write_rate=1.0) for p in range(10)]
    assert len(moves_to_start(pending, [], THROTTLED, UNLIMITED)) == 10


def test_a_move_held_back_by_the_guard_reserves_nothing_and_starts_once_its_brokers_are_free() -> None:
    cold_in_flight = move(NEWER, 10, (1, 2), (1, 3), write_rate=1.0)
    hot = move(OLDER, 0, (4, 5), (4, 3), size=50, write_rate=45.0)
    cold_next = move(OLDER, 1, (6, 5), (6, 3), size=10, write_rate=1.0)
    executions = {OLDER: Execution(order=Order.LARGEST_FIRST, throttle=THROTTLE), NEWER: Execution(throttle=THROTTLE)}
    # The hot move comes first in LargestFirst order but cannot share broker 3; the cold one behind it may.
    assert moves_to_start([hot, cold_next], [cold_in_flight], executions, UNLIMITED) == [cold_next]
    assert moves_to_start([hot, cold_next], [], executions, UNLIMITED) == [hot]


def test_without_a_throttle_the_guard_does_nothing() -> None:
    hot = move(NEWER, 10, (1, 2), (1, 3), write_rate=40.0)
    same_sender = move(OLDER, 0, (1, 4), (1, 5), write_rate=40.0)
    assert moves_to_start([same_sender], [hot], {}, UNLIMITED) == [same_sender]


def test_a_lower_headroom_admits_more_sharing() -> None:
    hot = move(NEWER, 10, (1, 2), (1, 3), write_rate=30.0)
    joining = move(OLDER, 0, (1, 4), (1, 5), write_rate=1.0)
    assert moves_to_start([joining], [hot], THROTTLED, UNLIMITED) == []
    assert moves_to_start([joining], [hot], THROTTLED, SchedulerConfig(catch_up_headroom=1.5)) == [joining]


def test_size_order_counts_the_bytes_written_while_catching_up() -> None:
    assert copied_bytes(move(OLDER, 0, (1,), (2,), size=100, write_rate=75.0), THROTTLE) == 400
    assert copied_bytes(move(OLDER, 0, (1,), (2,), size=100, write_rate=75.0), None) == 100
    assert copied_bytes(move(OLDER, 0, (1,), (2,), size=100, write_rate=100.0), THROTTLE) == float("inf")
    small_but_hot = move(OLDER, 0, (1,), (2,), size=100, write_rate=75.0)
    big_and_cold = move(OLDER, 1, (3,), (4,), size=300)
    executions = {OLDER: Execution(order=Order.LARGEST_FIRST, throttle=THROTTLE)}
    assert moves_to_start([big_and_cold, small_but_hot], [], executions, UNLIMITED) == [small_but_hot, big_and_cold]


# Rule 5: dominant moves run alone.


def test_a_dominant_move_waits_until_its_brokers_are_idle() -> None:
    small_into_3 = move(NEWER, 10, (1,), (3,), size=10, topic="b")
    # 1000 of the 1000 bytes left out of broker 2, the busiest direction with broker 3's incoming (1010).
    huge = move(OLDER, 0, (2,), (3,), size=1000)
    elsewhere = move(OLDER, 1, (4,), (5,), size=10)
    assert moves_to_start([huge, elsewhere], [small_into_3], {}, UNLIMITED) == [elsewhere]
    assert moves_to_start([huge, elsewhere], [], {}, UNLIMITED) == [huge, elsewhere]


def test_nothing_joins_a_dominant_move_in_flight() -> None:
    huge = move(NEWER, 10, (2,), (3,), size=1000, topic="b")
    into_3 = move(OLDER, 0, (4,), (3,), size=10)
    out_of_2 = move(OLDER, 1, (2,), (5,), size=10)
    elsewhere = move(OLDER, 2, (4,), (6,), size=10)
    assert moves_to_start([into_3, out_of_2, elsewhere], [huge], {}, UNLIMITED) == [elsewhere]
    no_rule = SchedulerConfig(dominant_share=None)
    assert moves_to_start([into_3, out_of_2, elsewhere], [huge], {}, no_rule) == [into_3, out_of_2, elsewhere]


def test_a_move_alone_in_a_direction_is_not_dominant_through_it() -> None:
    # Each is all there is out of its sender, but half of what goes into broker 3: both run, sharing broker 3.
    from_1 = move(OLDER, 0, (1,), (3,), size=100)
    from_2 = move(OLDER, 1, (2,), (3,), size=100)
    assert moves_to_start([from_1, from_2], [], {}, UNLIMITED) == [from_1, from_2]


def test_a_move_alone_in_a_quiet_direction_is_not_dominant() -> None:
    # The only bytes out of broker 6, but 100 against 1000 in the busiest direction: it shares broker 7.
    busy_elsewhere = move(NEWER, 10, (8,), (9,), size=1000, topic="b")
    into_7 = move(NEWER, 11, (10,), (7,), size=10, topic="b")
    quiet = move(OLDER, 0, (6,), (7,), size=100)
    assert moves_to_start([quiet], [busy_elsewhere, into_7], {}, UNLIMITED) == [quiet]


# Continuous refill: the function is called again whenever anything finishes.


def test_continuous_refill_starts_the_next_move_as_soon_as_one_finishes() -> None:
    pending = [move(OLDER, p, (1,), (p + 2,), size=10 - p) for p in range(5)]
    config = SchedulerConfig(defaults=Limits(max_moves_per_broker=2))
    executions = {OLDER: Execution(order=Order.LARGEST_FIRST)}
    in_flight = moves_to_start(pending, [], executions, config)
    assert started_partitions(in_flight) == [0, 1]
    waiting = [m for m in pending if m not in in_flight]
    # Move 1 finishes while move 0 is still running: one slot, one new move, no waiting for move 0.
    refill = moves_to_start(waiting, [in_flight[0]], executions, config)
    assert started_partitions(refill) == [2]


# Properties over random clusters.

BROKERS = st.integers(min_value=0, max_value=5)


@st.composite
def random_moves(draw: st.DrawFn, owners: tuple[Owner, ...], count: int) -> list[Move]:
    moves = []
    for position in range(count):
        current = tuple(draw(st.lists(BROKERS, min_size=1, max_size=3, unique=True)))
        target = tuple(draw(st.lists(BROKERS, min_size=1, max_size=3, unique=True)))
        owner = draw(st.sampled_from(owners))
        partition = draw(st.integers(min_value=0, max_value=15))
        moves.append(move(owner, partition, current, target, size=draw(st.integers(0, 100)), position=position))
    return moves


OWNERS = (OLDER, NEWER, Owner(EPOCH + timedelta(hours=1), "team-c", "newest"))


@given(
    pending=random_moves(OWNERS, 12),
    raw_in_flight=random_moves(OWNERS, 3),
    cluster_cap=st.none() | st.integers(min_value=1, max_value=6),
    broker_cap=st.none() | st.integers(min_value=1, max_value=3),
    executions=st.dictionaries(
        st.sampled_from(OWNERS),
        st.builds(
            Execution,
            order=st.sampled_from(Order),
            limits=st.builds(
                Limits, st.none() | st.integers(1, 4), st.none() | st.integers(1, 3), st.none() | st.integers(1, 2)
            ),
        ),
    ),
    touch=st.sampled_from(Touch),
    default_direction_cap=st.none() | st.integers(min_value=1, max_value=2),
)
def test_every_limit_holds_and_nothing_startable_is_left_waiting(
    *,
    pending: list[Move],
    raw_in_flight: list[Move],
    cluster_cap: int | None,
    broker_cap: int | None,
    executions: dict[Owner, Execution],
    touch: Touch,
    default_direction_cap: int | None,
) -> None:
    in_flight = list({m.partition: m for m in raw_in_flight}.values())
    config = SchedulerConfig(max_moves=cluster_cap, max_moves_per_broker=broker_cap, touch=touch,
                             defaults=Limits(max_moves_per_broker_direction=default_direction_cap))
    started = moves_to_start(pending, in_flight, executions, config)

    def per_broker_limit(owner: Owner) -> int | None:
        own = executions.get(owner, Execution()).limits.max_moves_per_broker
        return min(x for x in (own, broker_cap) if x is not None) if own or broker_cap else None

    bytes_left: Counter[tuple[int, str]] = Counter()
    moves_left: Counter[tuple[int, str]] = Counter()
    for m in [*pending, *in_flight]:
        moves_left.update(m.flows.keys())
        for key, count in m.flows.items():
            bytes_left[key] += count * m.size_bytes
    busiest = max(bytes_left.values(), default=0)

    def dominant(candidate: Move) -> bool:
        return candidate.size_bytes > 0 and any(
            candidate.size_bytes >= 0.7 * bytes_left[key] and bytes_left[key] >= 0.5 * busiest and moves_left[key] > 1
            for key in candidate.flows
        )

    def blocked(candidate: Move, running: list[Move]) -> bool:
        """Whether `candidate` may not start next to `running`, by the rules stated in the module docstring."""
        if candidate.partition in {m.partition for m in running}:
            return True
        if any(key in candidate.flows for m in running if dominant(m) for key in m.flows):
            return True
        busy = {key for m in running for key in m.flows}
        if dominant(candidate) and any(key in busy for key in candidate.flows):
            return True
        if cluster_cap is not None and len(running) >= cluster_cap:
            return True
        own_cap = executions.get(candidate.owner, Execution()).limits.max_moves
        if own_cap is not None and sum(1 for m in running if m.owner == candidate.owner) >= own_cap:
            return True
        limit = per_broker_limit(candidate.owner)
        load = Counter(b for m in running for b in m.touched(touch))
        if limit is not None and any(load[b] >= limit for b in candidate.touched(touch)):
            return True
        direction_limit = (executions.get(candidate.owner, Execution()).limits.max_moves_per_broker_direction
                           or default_direction_cap)
        directions = Counter(key for m in running for key in m.flows)
        return direction_limit is not None and any(directions[key] >= direction_limit for key in candidate.flows)

    running = list(in_flight)
    for chosen in started:
        assert chosen in pending
        assert not blocked(chosen, running), chosen
        running.append(chosen)
    for left in pending:
        if left not in started:
            assert blocked(left, running), f"{left} could have started"


@given(
    moves=random_moves(OWNERS, 14),
    rates=st.lists(st.sampled_from([0.0, 1.0, 10.0, 30.0, 60.0]), min_size=14, max_size=14),
    headroom=st.sampled_from([1.0, 2.0, 3.0]),
)
def test_every_started_move_leaves_each_busy_flow_its_catch_up_headroom(
    *, moves: list[Move], rates: list[float], headroom: float
) -> None:
    moves = [dataclasses.replace(m, write_rate=rate) for m, rate in zip(moves, rates, strict=True)]
    in_flight = list({m.partition: m for m in moves[:3]}.values())
    executions = dict.fromkeys(OWNERS, Execution(throttle=THROTTLE))
    config = SchedulerConfig(catch_up_headroom=headroom, dominant_share=None)  # the guard alone
    started = moves_to_start(moves[3:], in_flight, executions, config)
    flows: Counter[tuple[int, str]] = Counter()
    fastest: dict[tuple[int, str], float] = {}
    for m in in_flight:
        flows.update(m.flows)
        for key in m.flows:
            fastest[key] = max(fastest.get(key, 0.0), m.write_rate)
    def starves(candidate: Move) -> bool:
        return any(flows[key] and (flows[key] + count) * max(fastest[key], candidate.write_rate) * headroom > THROTTLE
                   for key, count in candidate.flows.items())

    moving = {m.partition for m in in_flight}
    for m in started:
        assert not starves(m), m
        moving.add(m.partition)
        for key, count in m.flows.items():
            flows[key] += count
            fastest[key] = max(fastest.get(key, 0.0), m.write_rate)
    # Nothing is reserved: every move left waiting is held back by the guard or by its partition already moving.
    for left in moves[3:]:
        if left not in started:
            assert left.partition in moving or starves(left), f"{left} could have started"


# Rule 2, intra-broker moves (AlterReplicaLogDirs).


def dir_move(owner: Owner, partition: int, replicas: tuple[int, ...], brokers: set[int]) -> Move:
    return dataclasses.replace(move(owner, partition, replicas, replicas), dir_brokers=frozenset(brokers))


def test_an_intra_broker_move_touches_its_broker_and_copies_over_no_network_direction() -> None:
    copy = dir_move(OLDER, 0, (1, 2), {1})
    assert copy.touched() == {1} and copy.touched(Touch.ALL_REPLICAS) == {1, 2}
    assert dict(copy.flows) == {}


def test_an_intra_broker_move_in_flight_holds_its_broker_and_its_resources_slot() -> None:
    config = SchedulerConfig(defaults=Limits(max_moves_per_broker=1))
    pending = [move(OLDER, 1, (1, 2), (3, 2)), move(OLDER, 2, (2, 3), (2, 4))]
    # Broker 1 copies partition 0 between its dirs: the move sent by 1 waits, the other one starts.
    started = moves_to_start(pending, [dir_move(OLDER, 0, (1, 2), {1})], {}, config)
    assert started_partitions(started) == [2]
    # Under maxMoves 1 the resource's dir move is its one move in flight.
    one = {OLDER: Execution(limits=Limits(max_moves=1))}
    assert moves_to_start(pending, [dir_move(OLDER, 0, (1, 2), {1})], one, UNLIMITED) == []


def test_intra_broker_moves_wait_for_their_turn_like_the_others() -> None:
    pending = [dir_move(OLDER, p, (1, 2), {1}) for p in range(3)]
    config = SchedulerConfig(defaults=Limits(max_moves_per_broker=2))
    assert started_partitions(moves_to_start(pending, [], {}, config)) == [0, 1]
