"""Throttle plans and journals: kpo sets and takes back only its own throttles."""

from __future__ import annotations

from kpo.domain.model import KafkaRefusal, TopicPartition
from kpo.domain.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    ConfigChange,
    ThrottleJournal,
    applied_only,
    apply_changes,
    describe_pending,
    journal,
    plan,
    reachable,
    removal_changes,
    still_set,
)
from kpo.execution.throttles import ensure, remove
from kpo.kafka.admin import KafkaRequestRefused, KafkaUnavailable

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_plan_throttles_existing_replicas_as_leaders_and_new_ones_as_followers() -> None:
    p = plan(1000, {A0: ((1, 2), (2, 3)), A1: ((1, 2), (2, 1)), B0: ((3,), (1,))})
    assert p.brokers == {1, 2, 3}
    assert p.leader_replicas == {"a": {"0:1", "0:2"}, "b": {"0:3"}}
    assert p.follower_replicas == {"a": {"0:3"}, "b": {"0:1"}}, "a reorder (A1) copies nothing"


def test_journal_leaves_someone_elses_rate_and_entries_alone() -> None:
    wanted = plan(1000, {A0: ((1, 2), (2, 3))})
    mine = journal(wanted, ThrottleJournal(), broker_configs={1: {LEADER_RATE: "5"}},
                   topic_configs={"a": {LEADER_REPLICAS: "0:1,7:7"}}, held_by_others=[])
    assert mine.brokers == {2, 3}, "broker 1's rate was set by someone else"
    assert mine.leader_replicas == {"a": {"0:2"}}
    assert mine.follower_replicas == {"a": {"0:3"}}


def test_journal_holds_a_reference_to_brokers_another_resource_throttles() -> None:
    wanted = plan(1000, {A0: ((1, 2), (2, 3))})
    other = ThrottleJournal(rate=500, brokers=frozenset({3}), leader_replicas={"a": frozenset({"0:1"})})
    # Broker 3's rate and the entry 0:1 are set, by the other resource: shared, so recorded by both.
    mine = journal(wanted, ThrottleJournal(), {3: {LEADER_RATE: "500", FOLLOWER_RATE: "500"}},
                   {"a": {LEADER_REPLICAS: "0:1"}}, [other])
    assert mine.brokers == {1, 2, 3}
    assert mine.leader_replicas == {"a": {"0:1", "0:2"}}


def test_a_shared_broker_runs_at_the_lowest_rate_of_its_holders() -> None:
    mine = ThrottleJournal(rate=1000, brokers=frozenset({3}))
    other = ThrottleJournal(rate=500, brokers=frozenset({3}))
    assert apply_changes(mine, {3: {LEADER_RATE: "500", FOLLOWER_RATE: "500"}}, {}, [other]) == []
    assert apply_changes(mine, {3: {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}}, {}, [other]) == [
        ConfigChange("broker", "3", LEADER_RATE, "SET", "500"),
        ConfigChange("broker", "3", FOLLOWER_RATE, "SET", "500"),
    ]


def test_removal_deletes_a_replica_list_it_would_leave_empty() -> None:
    mine = ThrottleJournal(rate=1000, leader_replicas={"a": frozenset({"0:1"}), "b": frozenset({"0:2"})})
    current = {"a": {LEADER_REPLICAS: "0:1"}, "b": {LEADER_REPLICAS: "0:2,5:5"}}
    assert removal_changes(mine, [], current) == [
        ConfigChange("topic", "a", LEADER_REPLICAS, "DELETE"),
        ConfigChange("topic", "b", LEADER_REPLICAS, "SUBTRACT", "0:2"),
    ]


def test_journal_keeps_what_it_recorded_before() -> None:
    wanted = plan(1000, {A0: ((1, 2), (2, 3))})
    before = ThrottleJournal(rate=1000, brokers=frozenset({1, 2, 3}), leader_replicas={"a": frozenset({"0:1"})})
    # Now configured (by kpo itself): still kpo's to remove.
    mine = journal(wanted, before, {1: {LEADER_RATE: "1000"}}, {"a": {LEADER_REPLICAS: "0:1"}}, [])
    assert mine.brokers == {1, 2, 3}
    assert mine.leader_replicas["a"] >= {"0:1"}


def test_apply_sets_missing_rates_and_appends_missing_entries_only() -> None:
    mine = ThrottleJournal(rate=1000, brokers=frozenset({1, 2}), leader_replicas={"a": frozenset({"0:1", "0:2"})},
                           follower_replicas={"a": frozenset({"0:3"})})
    changes = apply_changes(mine, {1: {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}},
                            {"a": {LEADER_REPLICAS: "0:1,9:9"}})
    assert changes == [
        ConfigChange("broker", "2", LEADER_RATE, "SET", "1000"),
        ConfigChange("broker", "2", FOLLOWER_RATE, "SET", "1000"),
        ConfigChange("topic", "a", LEADER_REPLICAS, "APPEND", "0:2"),
        ConfigChange("topic", "a", FOLLOWER_REPLICAS, "APPEND", "0:3"),
    ]


def test_removal_takes_back_exactly_its_own_entries_and_unshared_brokers() -> None:
    mine = ThrottleJournal(rate=1000, brokers=frozenset({1, 2}), leader_replicas={"a": frozenset({"0:1", "0:2"})},
                           follower_replicas={"a": frozenset({"0:3"})})
    other = ThrottleJournal(rate=1000, brokers=frozenset({2}), leader_replicas={"a": frozenset({"0:2"})})
    assert removal_changes(mine, [other]) == [
        ConfigChange("broker", "1", LEADER_RATE, "DELETE"),
        ConfigChange("broker", "1", FOLLOWER_RATE, "DELETE"),
        ConfigChange("topic", "a", LEADER_REPLICAS, "SUBTRACT", "0:1"),
        ConfigChange("topic", "a", FOLLOWER_REPLICAS, "SUBTRACT", "0:3"),
    ]


def test_journal_round_trips_through_json() -> None:
    mine = ThrottleJournal(rate=7, brokers=frozenset({3, 1}), leader_replicas={"a": frozenset({"0:1"})},
                           follower_replicas={"b": frozenset({"1:2"})})
    assert ThrottleJournal.from_json(mine.to_json()) == mine
    assert ThrottleJournal.from_json(None).empty


# ------------------------------------------------------------------------- removal with a broker down (#12)


class _Kafka:
    """An in-memory stand-in for the admin client: records config changes; brokers in ``down`` do not answer."""

    def __init__(self, down: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.down = down
        self.applied: list[ConfigChange] = []

    def alter_configs(self, changes: list[ConfigChange]) -> None:
        if any(c.resource == "broker" and int(c.name) in self.down for c in changes):
            raise KafkaUnavailable("broker did not answer")
        self.applied.extend(changes)

    def broker_configs(self, brokers: set[int], names: object) -> dict[int, dict[str, str]]:
        if set(brokers) & self.down:
            raise KafkaUnavailable("broker did not answer")
        return {}

    def topic_configs(self, topics: set[str], names: object) -> dict[str, dict[str, str]]:
        return {}


MINE = ThrottleJournal(rate=1000, brokers=frozenset({1, 2, 3}), leader_replicas={"a": frozenset({"0:1"})},
                       follower_replicas={"a": frozenset({"0:3"}), "b": frozenset({"0:2"})})


def test_without_keeps_only_the_entities_not_yet_cleaned() -> None:
    left = MINE.without(brokers=[1, 3], topics=["a"])
    assert left.brokers == {2} and left.topics == {"b"} and not left.empty
    assert MINE.without(brokers=[1, 2, 3], topics=["a", "b"]).empty


def test_removal_takes_topics_and_live_brokers_back_and_keeps_a_down_broker_for_later() -> None:
    kafka, saved = _Kafka(), []
    left = remove(kafka, MINE, [], saved.append, live_brokers={1, 3})  # type: ignore[arg-type]
    assert left == ThrottleJournal(rate=1000, brokers=frozenset({2}))
    assert saved == [left]
    assert {(c.resource, c.name) for c in kafka.applied} == {("topic", "a"), ("topic", "b"), ("broker", "1"),
                                                             ("broker", "3")}
    assert "broker(s) [2]" in describe_pending(left, unreachable={2}) and "not available" in describe_pending(
        left, unreachable={2})
    # The broker is back: only its rates are left to take back, and then nothing is.
    kafka2 = _Kafka()
    assert remove(kafka2, left, [], saved.append, live_brokers={1, 2, 3}).empty  # type: ignore[arg-type]
    assert {(c.resource, c.name) for c in kafka2.applied} == {("broker", "2")}
    assert saved[-1] == ThrottleJournal()


def test_removal_keeps_a_broker_that_does_not_answer_although_listed_live() -> None:
    kafka, saved = _Kafka(down={3}), []
    left = remove(kafka, MINE, [], saved.append, live_brokers={1, 2, 3})  # type: ignore[arg-type]
    assert left.brokers == {3} and not left.topics


def test_reachable_keeps_topic_changes_and_the_live_brokers_rates_only() -> None:
    changes = [ConfigChange("broker", "2", LEADER_RATE, "SET", "1"),
               ConfigChange("broker", "3", LEADER_RATE, "SET", "1"),
               ConfigChange("topic", "a", LEADER_REPLICAS, "APPEND", "0:3")]
    assert reachable(changes, {1, 2}) == [changes[0], changes[2]]


def test_ensure_with_a_destination_broker_down_throttles_the_rest_and_adds_the_broker_when_it_is_back() -> None:
    moves = {A0: ((1, 2), (1, 3))}
    kafka, saved = _Kafka(down={3}), []
    mine = ensure(kafka, plan(1000, moves), previous=ThrottleJournal(), others=[], save=saved.append,  # type: ignore[arg-type]
                  live_brokers={1, 2})
    assert mine.brokers == {1, 2}, "the down broker is not recorded: nothing was applied to it"
    assert {(c.resource, c.name) for c in kafka.applied} == {("broker", "1"), ("broker", "2"), ("topic", "a")}
    back = _Kafka()
    mine = ensure(back, plan(1000, moves), previous=mine, others=[], save=saved.append,  # type: ignore[arg-type]
                  live_brokers={1, 2, 3})
    assert mine.brokers == {1, 2, 3}
    assert ("broker", "3") in {(c.resource, c.name) for c in back.applied}
    assert saved[-1] == mine


def test_ensure_never_asks_a_down_broker_it_throttled_before() -> None:
    before = ThrottleJournal(rate=1000, brokers=frozenset({1, 2, 3}), follower_replicas={"a": frozenset({"0:3"})})
    kafka = _Kafka(down={3})
    mine = ensure(kafka, plan(1000, {A0: ((1, 2), (1, 3))}), previous=before, others=[], save=[].append,  # type: ignore[arg-type]
                  live_brokers={1, 2})
    assert mine.brokers == {1, 2, 3}, "still kpo's to take back once the broker returns"
    assert all(c.name != "3" for c in kafka.applied)


# ------------------------------------------------------------- a throttle change Kafka refuses (#12, describe-only)


def test_applied_only_drops_refused_entities_and_keeps_what_was_recorded_before() -> None:
    previous = ThrottleJournal(rate=1000, brokers=frozenset({1}), follower_replicas={"a": frozenset({"1:1"})})
    cut = applied_only(MINE, previous, [("broker", "1"), ("broker", "3"), ("topic", "a")])
    assert cut.brokers == {1, 2}  # broker 1 was applied by an earlier tick; 3 never was
    assert cut.leader_replicas == {} and cut.follower_replicas == {"a": frozenset({"1:1"}), "b": frozenset({"0:2"})}
    assert applied_only(MINE, ThrottleJournal(), [("broker", "1"), ("broker", "2"), ("broker", "3"),
                                                  ("topic", "a"), ("topic", "b")]).empty
    assert applied_only(MINE, ThrottleJournal(), []) == MINE


class _Refusing(_Kafka):
    """Refuses IncrementalAlterConfigs on the entities in ``refused``, as an authorizer without the ACL does."""

    def __init__(self, refused: set[tuple[str, str]]) -> None:
        super().__init__()
        self.refused = refused
        self.asked: list[tuple[str, str]] = []

    def broker_configs(self, brokers: object, names: object) -> dict[int, dict[str, str]]:
        return {}

    def topic_configs(self, topics: object, names: object) -> dict[str, dict[str, str]]:
        return {}

    def alter_configs(self, changes: list[ConfigChange]) -> None:
        self.asked.extend(dict.fromkeys((c.resource, c.name) for c in changes))
        if any((c.resource, c.name) in self.refused for c in changes):
            raise KafkaRequestRefused(KafkaRefusal("CLUSTER_AUTHORIZATION_FAILED", "needs AlterConfigs"))
        super().alter_configs(changes)


MOVES = {A0: ((1, 2), (2, 3))}


def test_a_throttle_refused_everywhere_leaves_an_empty_journal() -> None:
    kafka, saved = _Refusing({("broker", "1"), ("broker", "2"), ("broker", "3"), ("topic", "a")}), []
    try:
        ensure(kafka, plan(1000, MOVES), previous=ThrottleJournal(), others=[], save=saved.append,  # type: ignore[arg-type]
               live_brokers={1, 2, 3})
    except KafkaRequestRefused as exc:
        assert exc.refusal.code == "CLUSTER_AUTHORIZATION_FAILED"
    else:
        raise AssertionError("the refusal must reach the tick")
    assert not saved[0].empty  # journal first, as always ...
    assert saved[-1].empty  # ... cut back once Kafka refused
    assert kafka.asked == [("broker", "1")] and kafka.applied == []  # nothing more is sent after a refusal


def test_a_throttle_refused_for_a_topic_keeps_the_brokers_it_set() -> None:
    kafka, saved = _Refusing({("topic", "a")}), []
    try:
        ensure(kafka, plan(1000, MOVES), previous=ThrottleJournal(), others=[], save=saved.append,  # type: ignore[arg-type]
               live_brokers={1, 2, 3})
    except KafkaRequestRefused:
        pass
    else:
        raise AssertionError("the refusal must reach the tick")
    assert saved[-1] == ThrottleJournal(rate=1000, brokers=frozenset({1, 2, 3}))
    assert {(c.resource, c.name) for c in kafka.applied} == {("broker", "1"), ("broker", "2"), ("broker", "3")}


def test_a_throttle_applied_in_full_keeps_the_whole_journal() -> None:
    kafka, saved = _Refusing(set()), []
    mine = ensure(kafka, plan(1000, MOVES), previous=ThrottleJournal(), others=[], save=saved.append,  # type: ignore[arg-type]
                  live_brokers={1, 2, 3})
    assert saved == [mine] and mine.brokers == {1, 2, 3} and mine.topics == {"a"}


# ------------------------------------------------------------ a removal Kafka acknowledges but does not show


def test_still_set_names_a_deleted_key_with_a_value_and_a_list_that_kept_a_subtracted_entry() -> None:
    changes = [ConfigChange("broker", "3", LEADER_RATE, "DELETE"),
               ConfigChange("topic", "a", LEADER_REPLICAS, "SUBTRACT", "0:1,0:2")]
    assert still_set(changes, {LEADER_RATE: "1000", LEADER_REPLICAS: "0:2,5:1"}) == [LEADER_RATE, LEADER_REPLICAS]
    assert still_set(changes, {LEADER_RATE: "", LEADER_REPLICAS: "5:1"}) == []
    assert still_set(changes, {}) == []


class _Sticky(_Kafka):
    """Acknowledges every change, as Kafka 3.2 did, but broker 3 keeps its rates and topic ``a`` its list."""

    def broker_configs(self, brokers: set[int], names: object) -> dict[int, dict[str, str]]:
        return {3: {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}} if 3 in set(brokers) else {}

    def topic_configs(self, topics: set[str], names: object) -> dict[str, dict[str, str]]:
        return {"a": {LEADER_REPLICAS: "0:1"}} if "a" in set(topics) else {}


def test_a_removal_kafka_acknowledges_but_does_not_show_stays_in_the_journal_and_is_tried_again() -> None:
    saved: list[ThrottleJournal] = []
    left = remove(_Sticky(), MINE, [], saved.append, live_brokers={1, 2, 3},  # type: ignore[arg-type]
                  read_back_seconds=0)
    assert left.brokers == {3} and left.topics == {"a"}, "what Kafka still shows is still kpo's to take back"
    assert saved == [left]
    again = _Kafka()
    assert remove(again, left, [], saved.append, live_brokers={1, 2, 3}).empty  # type: ignore[arg-type]
    assert {(c.resource, c.name, c.op) for c in again.applied} >= {("broker", "3", "DELETE")}
