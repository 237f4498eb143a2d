"""The executor of one cluster (kpo.execution): the shared look, admission with reservations, the throttle ledger.

These are the promises that broke with 100 resources at once: limits counted against moves the other resources had
just sent, one read of the cluster for many ticks, a broker rate taken back by whichever resource ends last.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from executor_support import executor_for
from kafka_fake import FakeCluster
from kpo.domain.claims import Claim, move_holders
from kpo.domain.model import KafkaRefusal, TopicPartition
from kpo.domain.reassignment import Candidate
from kpo.domain.scheduling import Execution, Limits, Move, Owner, SchedulerConfig
from kpo.domain.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    ConfigChange,
    ThrottleJournal,
    plan,
)
from kpo.execution.executor import NotLeading
from kpo.execution.observation import SharedLooks
from kpo.kafka.admin import KafkaUnavailable

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
ONE_INTO_EACH_BROKER = SchedulerConfig(defaults=Limits(max_moves_per_broker_direction=1), dominant_share=None)


def owner(i: int) -> Owner:
    return Owner(EPOCH + timedelta(seconds=i), "ns", f"r{i}")


def partitions(n: int) -> list[TopicPartition]:
    return [TopicPartition(f"t{i}", 0) for i in range(n)]


def into_broker_4(tp: TopicPartition, position: int = 0) -> Candidate:
    """A move copying a new replica onto broker 4, sent by broker 1: one flow into 4, one out of 1."""
    return Candidate(tp, current=(1, 2), target=(1, 4), size_bytes=100, leader=1, position=position)


def test_a_move_admitted_for_one_resource_counts_against_the_next_before_kafka_lists_it() -> None:
    cluster = FakeCluster({tp: (1, 2) for tp in partitions(2)})
    executor = executor_for(cluster, ONE_INTO_EACH_BROKER)
    executor.looks.after(time.monotonic())
    first, second = partitions(2)
    assert executor.admit(owner(1), Execution(), [into_broker_4(first)], {}) == [first]
    # Not sent yet, and no look lists it: reserved all the same.
    assert executor.admit(owner(2), Execution(), [into_broker_4(second)], {}) == []


def test_a_sent_move_counts_until_a_later_look_shows_it_ended() -> None:
    cluster = FakeCluster({tp: (1, 2) for tp in partitions(2)})
    executor = executor_for(cluster, ONE_INTO_EACH_BROKER)
    executor.looks.after(time.monotonic())
    first, second = partitions(2)
    executor.admit(owner(1), Execution(), [into_broker_4(first)], {})
    executor.send(owner(1), {first: (1, 4)})
    assert executor.admit(owner(2), Execution(), [into_broker_4(second)], {}) == [], "sent, the look is older"
    executor.looks.after(time.monotonic())
    assert executor.admit(owner(2), Execution(), [into_broker_4(second)], {}) == [], "listed as moving"
    cluster.finish_moves()
    executor.looks.after(time.monotonic())
    assert executor.admit(owner(2), Execution(), [into_broker_4(second)], {}) == [second]


def test_what_a_tick_was_admitted_and_did_not_send_is_free_when_it_ends() -> None:
    cluster = FakeCluster({tp: (1, 2) for tp in partitions(2)})
    executor = executor_for(cluster, ONE_INTO_EACH_BROKER)
    first, second = partitions(2)
    executor.admit(owner(1), Execution(), [into_broker_4(first)], {})
    executor.settle(owner(1))
    assert executor.admit(owner(2), Execution(), [into_broker_4(second)], {}) == [second]


def test_a_hundred_resources_admitting_at_once_never_exceed_a_broker_limit() -> None:
    tps = partitions(100)
    cluster = FakeCluster({tp: (1, 2) for tp in tps})
    executor = executor_for(cluster, SchedulerConfig(defaults=Limits(max_moves_per_broker_direction=2),
                                                     dominant_share=None))
    executor.looks.after(time.monotonic())
    admitted: list[TopicPartition] = []
    lock = threading.Lock()
    start = threading.Barrier(20)

    def resource(i: int) -> None:
        start.wait()
        for tp in tps[i * 5:(i + 1) * 5]:
            got = executor.admit(owner(i), Execution(), [into_broker_4(tp)], {})
            executor.send(owner(i), dict.fromkeys(got, (1, 4)))
            with lock:
                admitted.extend(got)

    threads = [threading.Thread(target=resource, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(admitted) == 2
    assert len(cluster.moving) == 2


def test_a_move_the_executor_sent_is_its_senders_even_before_the_status_says_so() -> None:
    cluster = FakeCluster({tp: (1, 2) for tp in partitions(2)})
    per_resource = SchedulerConfig(defaults=Limits(max_moves=1), dominant_share=None)
    executor = executor_for(cluster, per_resource)
    first, second = partitions(2)
    executor.send(owner(1), {first: (1, 4)})
    executor.looks.after(time.monotonic())
    # The claims index does not show the move yet (no holders): the executor knows it sent it for owner 1.
    assert executor.admit(owner(1), Execution(), [into_broker_4(second)], {}) == []
    assert executor.admit(owner(2), Execution(), [into_broker_4(second)], {}) == [second]


def test_a_replica_that_may_not_act_sends_nothing() -> None:
    cluster = FakeCluster({tp: (1, 2) for tp in partitions(1)})
    executor = executor_for(cluster)
    executor._may_act = lambda: False
    with pytest.raises(NotLeading):
        executor.send(owner(1), {partitions(1)[0]: (1, 4)})
    assert cluster.altered == []


# ----------------------------------------------------------------------------------------------------- the looks


class SlowCluster(FakeCluster):
    def __init__(self) -> None:
        super().__init__({tp: (1, 2) for tp in partitions(3)})
        self.listings = 0

    def list_reassignments(self, partitions: Collection[TopicPartition] | None = None) -> dict[TopicPartition, object]:
        self.listings += 1
        time.sleep(0.05)
        return super().list_reassignments(partitions)  # type: ignore[return-value]


def test_ticks_asking_at_once_share_one_look() -> None:
    cluster = SlowCluster()
    looks = SharedLooks(lambda: cluster)  # type: ignore[arg-type, return-value]
    moment = time.monotonic()
    threads = [threading.Thread(target=looks.after, args=(moment, {f"t{i % 3}"})) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # The first look covers the topic of the first asker; the others need one more look at most, not fifty.
    assert cluster.listings <= 3


def test_a_look_covers_every_topic_asked_for_and_is_not_older_than_the_moment_asked() -> None:
    cluster = FakeCluster({tp: (1, 2) for tp in partitions(2)})
    looks = SharedLooks(lambda: cluster)  # type: ignore[arg-type, return-value]
    first = looks.after(time.monotonic(), {"t0"})
    assert looks.after(first.started, {"t0"}) is first
    second = looks.after(first.started, {"t1"})
    assert second is not first and {"t0", "t1"} <= second.covered
    assert looks.after(time.monotonic(), {"t0"}).started > second.started


def test_a_failing_cluster_fails_every_tick_at_once_until_its_backoff_ends() -> None:
    cluster = FakeCluster({tp: (1, 2) for tp in partitions(1)})
    cluster.down = True
    clock = [100.0]
    looks = SharedLooks(lambda: cluster, clock=lambda: clock[0])  # type: ignore[arg-type, return-value]
    with pytest.raises(KafkaUnavailable):
        looks.after(clock[0])
    calls = len(cluster.calls)
    cluster.down = False
    clock[0] += 1.0
    for _ in range(10):
        with pytest.raises(KafkaUnavailable):
            looks.after(clock[0])  # within the backoff: the failure again, without a connection attempt
    assert len(cluster.calls) == calls
    clock[0] += 5.0
    assert looks.after(clock[0]).started == clock[0]


# ---------------------------------------------------------------------------------------------------- the ledger


class ThrottledCluster(FakeCluster):
    """Keeps broker and topic configs as Kafka does, SET/DELETE/APPEND/SUBTRACT included."""

    def __init__(self) -> None:
        super().__init__({TopicPartition("a", 0): (1, 2), TopicPartition("a", 1): (1, 2)})
        self.configs: dict[tuple[str, str], dict[str, str]] = {}

    def broker_configs(self, brokers: Collection[int], names: Collection[str]) -> dict[int, dict[str, str]]:
        return {b: {k: v for k, v in self.configs.get(("broker", str(b)), {}).items() if k in names}
                for b in brokers}

    def topic_configs(self, topics: Collection[str], names: Collection[str]) -> dict[str, dict[str, str]]:
        return {t: {k: v for k, v in self.configs.get(("topic", t), {}).items() if k in names} for t in topics}

    def alter_configs(self, changes: Sequence[ConfigChange]) -> None:
        for change in changes:
            entity = self.configs.setdefault((change.resource, change.name), {})
            listed = [e for e in entity.get(change.key, "").split(",") if e]
            if change.op == "SET":
                entity[change.key] = change.value
            elif change.op == "DELETE":
                entity.pop(change.key, None)
            elif change.op == "APPEND":
                entity[change.key] = ",".join(listed + [e for e in change.value.split(",") if e not in listed])
            elif change.op == "SUBTRACT":
                entity[change.key] = ",".join(e for e in listed if e not in change.value.split(","))

    def throttled(self) -> dict[tuple[str, str], dict[str, str]]:
        return {k: v for k, v in self.configs.items() if v}


def test_a_shared_broker_rate_is_taken_back_by_the_last_resource_to_end_whatever_the_order() -> None:
    for last in ("first", "second"):
        cluster = ThrottledCluster()
        executor = executor_for(cluster)
        ledger = executor.throttles
        p0, p1 = TopicPartition("a", 0), TopicPartition("a", 1)
        # Neither resource's status says anything yet (the index is empty): only the ledger knows.
        first = ledger.ensure("ns/first", cluster, plan(1000, {p0: ((1, 2), (1, 3))}), previous=ThrottleJournal(),  # type: ignore[arg-type]
                              index={}, save=lambda _j: None, live_brokers={1, 2, 3})
        second = ledger.ensure("ns/second", cluster, plan(1000, {p1: ((1, 2), (1, 3))}), previous=ThrottleJournal(),  # type: ignore[arg-type]
                               index={}, save=lambda _j: None, live_brokers={1, 2, 3})
        assert first.brokers == second.brokers == {1, 2, 3}
        order = [("ns/first", first), ("ns/second", second)]
        if last == "first":
            order.reverse()
        (key, journal), (last_key, last_journal) = order
        assert ledger.remove(key, cluster, journal, index={}, save=lambda _j: None, live_brokers={1, 2, 3}).empty  # type: ignore[arg-type]
        assert cluster.configs[("broker", "3")] == {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}, "still needed"
        assert ledger.remove(last_key, cluster, last_journal, index={}, save=lambda _j: None,  # type: ignore[arg-type]
                             live_brokers={1, 2, 3}).empty
        assert cluster.throttled() == {}, f"nothing left, not even an empty replica list ({last} ended last)"


def test_a_users_rate_is_never_taken_and_never_removed() -> None:
    cluster = ThrottledCluster()
    cluster.configs[("broker", "1")] = {LEADER_RATE: "7", FOLLOWER_RATE: "7"}
    cluster.configs[("topic", "a")] = {LEADER_REPLICAS: "9:9"}
    ledger = executor_for(cluster).throttles
    mine = ledger.ensure("ns/r", cluster, plan(1000, {TopicPartition("a", 0): ((1, 2), (1, 3))}),  # type: ignore[arg-type]
                         previous=ThrottleJournal(), index={}, save=lambda _j: None, live_brokers={1, 2, 3})
    assert 1 not in mine.brokers
    assert cluster.configs[("topic", "a")][FOLLOWER_REPLICAS] == "0:3"
    ledger.remove("ns/r", cluster, mine, index={}, save=lambda _j: None, live_brokers={1, 2, 3})  # type: ignore[arg-type]
    assert cluster.throttled() == {("broker", "1"): {LEADER_RATE: "7", FOLLOWER_RATE: "7"},
                                   ("topic", "a"): {LEADER_REPLICAS: "9:9"}}


def test_a_look_names_the_partitions_an_earlier_look_saw_moving_for_a_while() -> None:
    p0 = TopicPartition("t0", 0)
    cluster = FakeCluster({p0: (1, 2)}, {p0: (1, 3)})
    clock = [100.0]
    looks = SharedLooks(lambda: cluster, clock=lambda: clock[0])  # type: ignore[arg-type, return-value]
    assert p0 in looks.after(clock[0]).ongoing
    cluster.finish_moves()
    clock[0] += 1.0
    assert looks.after(clock[0]).recently_moved == {p0}
    clock[0] += 11.0
    assert looks.after(clock[0]).recently_moved == frozenset()


# ----------------------------------------------------------------------------------------------------- refill


def test_an_armed_move_is_sent_by_the_executor_the_moment_a_slot_frees() -> None:
    cluster = FakeCluster({tp: (1, 2) for tp in partitions(2)})
    executor = executor_for(cluster, ONE_INTO_EACH_BROKER)
    first, second = partitions(2)
    executor.admit(owner(1), Execution(), [into_broker_4(first)], {})
    executor.send(owner(1), {first: (1, 4)})
    assert executor.admit(owner(2), Execution(), [into_broker_4(second)], {}) == []
    assert executor.waiting(owner(2)) == {second: (1, 2)}
    assert executor.refill() == {}, "nothing armed: the resource has not recorded its originals yet"
    executor.arm(owner(2), {second})
    executor.listed(cluster.list_reassignments(None), time.monotonic())
    assert executor.refill() == {}, "the slot is still taken"
    cluster.finish_moves()
    executor.listed(cluster.list_reassignments(None), time.monotonic())
    assert executor.refill() == {owner(2): [second]}
    assert cluster.moving == {second: (1, 4)}
    assert executor.waiting(owner(2)) == {}


def test_moves_that_change_the_replication_factor_are_left_to_their_resource() -> None:
    cluster = FakeCluster({tp: (1, 2) for tp in partitions(1)})
    executor = executor_for(cluster, ONE_INTO_EACH_BROKER)
    wider = Candidate(partitions(1)[0], current=(1, 2), target=(1, 2, 4), size_bytes=1, leader=1, position=0)
    executor.admit(owner(1), Execution(), [wider], {})  # admitted, but the tick did not send it
    executor.settle(owner(1))
    executor.admit(owner(2), Execution(), [], {})
    assert executor.waiting(owner(1)) == {}


def test_a_refusal_of_a_move_the_executor_sent_goes_to_its_resource() -> None:
    class Refusing(FakeCluster):
        def alter_reassignments(self, targets, *, allow_replication_factor_change=False):  # type: ignore[no-untyped-def]
            return dict.fromkeys(targets, KafkaRefusal("INVALID_REPLICA_ASSIGNMENT", "no"))

    tp = partitions(1)[0]
    executor = executor_for(Refusing({tp: (1, 2)}), ONE_INTO_EACH_BROKER)
    executor._reserved.clear()
    executor.admit(owner(1), Execution(), [], {})
    executor._waiting[owner(1)].moves = [
        Move(owner=owner(1), partition=tp, current=(1, 2), target=(1, 4), size_bytes=1, leader=1)]
    executor.arm(owner(1), {tp})
    assert executor.refill() == {owner(1): []}
    assert executor.take_refused(owner(1)) == {tp: KafkaRefusal("INVALID_REPLICA_ASSIGNMENT", "no")}
    assert executor.take_refused(owner(1)) == {}


class HangingCluster(FakeCluster):
    """A cluster whose listing does not answer until released."""

    def __init__(self) -> None:
        super().__init__({tp: (1, 2) for tp in partitions(1)})
        self.release = threading.Event()
        self.listing = threading.Event()

    def list_reassignments(self, partitions: Collection[TopicPartition] | None = None) -> dict[TopicPartition, object]:
        self.listing.set()
        self.release.wait(5)
        return super().list_reassignments(partitions)  # type: ignore[return-value]


def test_once_the_first_look_is_older_than_the_first_wait_ticks_are_told_at_once() -> None:
    cluster = HangingCluster()
    ahead = [0.0]  # a clock that runs, and can be put forward

    def clock() -> float:
        return time.monotonic() + ahead[0]

    looks = SharedLooks(lambda: cluster, clock=clock)  # type: ignore[arg-type, return-value]
    def first_tick() -> None:
        with contextlib.suppress(KafkaUnavailable):  # it starts the look; what it is told is not the point here
            looks.after(clock())

    waiting = threading.Thread(target=first_tick)
    waiting.start()
    assert cluster.listing.wait(5)
    ahead[0] += 3.5  # the look under way began 3.5 s ago, longer than the first wait
    began = time.monotonic()
    with pytest.raises(KafkaUnavailable, match="did not answer within 3s"):
        looks.after(clock())
    assert time.monotonic() - began < 1.0, "told at once, not after one more wait of its own"
    cluster.release.set()
    waiting.join(5)


def test_a_failed_look_names_the_cluster_and_its_bootstrap_servers() -> None:
    cluster = FakeCluster({tp: (1, 2) for tp in partitions(1)})
    cluster.down = True
    looks = SharedLooks(lambda: cluster, named="cluster 'east' (bootstrap 127.0.0.1:9)")  # type: ignore[arg-type, return-value]
    with pytest.raises(KafkaUnavailable, match=r"^cluster 'east' \(bootstrap 127.0.0.1:9\): the connection"):
        looks.after(time.monotonic())


def test_the_refill_counts_a_resources_moves_another_replica_sent_against_its_limit() -> None:
    tps = partitions(3)
    cluster = FakeCluster({tp: (1, 2) for tp in tps}, {tps[0]: (1, 3)})  # sent before this replica took over
    executor = executor_for(cluster, SchedulerConfig(defaults=Limits(max_moves=1), dominant_share=None))
    executor.looks.after(time.monotonic())
    # The resource's status claims the move in flight (the index says so); its other moves wait.
    assert executor.admit(owner(1), Execution(), [into_broker_4(tps[1])], {tps[0]: owner(1)}) == []
    executor.arm(owner(1), {tps[1]})
    executor.listed(cluster.list_reassignments(None), time.monotonic())
    assert executor.refill() == {}, "its one move in flight is its limit"


def test_a_resources_move_its_status_does_not_list_counts_against_its_limit_after_a_handover() -> None:
    """The e2e handover: the old leader sent a move, its status write was lost; the new leader's holders (from
    ``move_holders``) name the resource for its own partition, so ``maxMoves: 1`` holds."""
    tps = partitions(3)
    cluster = FakeCluster({tp: (1, 2) for tp in tps}, {tps[0]: (1, 3)})
    executor = executor_for(cluster, SchedulerConfig(defaults=Limits(max_moves=1), dominant_share=None))
    executor.looks.after(time.monotonic())
    me = Claim("ns/r1", "", frozenset(tps), frozenset(), live=True)
    holders = {tp: owner(1) for tp in move_holders(me, [])}
    assert executor.admit(owner(1), Execution(), [into_broker_4(tps[1])], holders) == []
    # Without it the move is a stranger's, and the resource starts its own beside it: what the e2e run saw.
    assert executor.admit(owner(1), Execution(), [into_broker_4(tps[1])], {}) == [tps[1]]


def test_an_intra_broker_move_counts_as_in_flight_from_its_send_until_a_look_shows_it_done() -> None:
    tps = partitions(2)
    cluster = FakeCluster({tp: (1, 2) for tp in tps})
    executor = executor_for(cluster, SchedulerConfig(defaults=Limits(max_moves=1), dominant_share=None))
    executor.looks.after(time.monotonic())
    copy = Candidate(tps[0], current=(1, 2), target=(1, 2), size_bytes=100, leader=1, position=0,
                     dir_brokers=frozenset({1}))
    assert executor.admit(owner(1), Execution(), [copy], {}) == [tps[0]]
    executor.move_dirs({(tps[0], 1): "/b"})
    executor.settle(owner(1))  # the tick ends: a sent move keeps its slot
    assert executor.admit(owner(1), Execution(), [into_broker_4(tps[1])], {}) == []
    # A later look shows the copy under way (DescribeLogDirs: a future replica), then done.
    executor.looks.after(time.monotonic(), {tps[0].topic, tps[1].topic})
    assert executor.admit(owner(1), Execution(), [into_broker_4(tps[1])], {tp: owner(1) for tp in tps}) == []
    cluster.future_dirs.clear()
    executor.looks.after(time.monotonic(), {tps[0].topic, tps[1].topic})
    assert executor.admit(owner(1), Execution(), [into_broker_4(tps[1])], {tp: owner(1) for tp in tps}) == [tps[1]]


def test_the_refill_loop_never_sends_an_intra_broker_move() -> None:
    tps = partitions(3)
    # A move on broker 1 in flight fills its one slot: both of the resource's moves wait.
    cluster = FakeCluster({tp: (1, 2) for tp in tps}, {tps[2]: (1, 3)})
    executor = executor_for(cluster, SchedulerConfig(defaults=Limits(max_moves_per_broker=1), dominant_share=None))
    executor.looks.after(time.monotonic())
    copy = Candidate(tps[0], current=(1, 2), target=(1, 2), size_bytes=100, leader=1, position=0,
                     dir_brokers=frozenset({1}))
    assert executor.admit(owner(1), Execution(), [copy, into_broker_4(tps[1], 1)], {}) == []
    # The refill loop may send the reassignment when the slot frees, never the dir move (its tick sends that).
    assert executor.waiting(owner(1)) == {tps[1]: (1, 2)}


def test_a_new_replica_is_told_its_dir_before_the_move_so_it_is_created_there() -> None:
    tp = partitions(1)[0]
    cluster = FakeCluster({tp: (1, 2)})
    executor = executor_for(cluster, ONE_INTO_EACH_BROKER)
    executor.looks.after(time.monotonic())
    move = Candidate(tp, current=(1, 2), target=(1, 4), size_bytes=100, leader=1, position=0,
                     new_dirs=((4, "/data-b"),))
    assert executor.admit(owner(1), Execution(), [move], {}) == [tp]
    executor.send(owner(1), {tp: (1, 4)})
    # AlterReplicaLogDirs went first (Kafka: no such replica yet, the dir remembered), then the reassignment.
    assert [c for c in cluster.calls if c in ("alter_replica_log_dirs", "alter_reassignments")] == [
        "alter_replica_log_dirs", "alter_reassignments"]
    cluster.finish_moves()
    assert cluster.replica_dirs[(tp, 4)] == "/data-b"
