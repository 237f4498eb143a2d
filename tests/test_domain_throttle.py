"""Throttle plans and journals: kpo sets and takes back only its own throttles."""

from __future__ import annotations

from kpo.domain.model import TopicPartition
from kpo.domain.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    ConfigChange,
    ThrottleJournal,
    apply_changes,
    journal,
    plan,
    removal_changes,
)

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


def test_journal_shares_brokers_another_live_resource_throttles() -> None:
    wanted = plan(1000, {A0: ((1, 2), (2, 3))})
    other = ThrottleJournal(rate=500, brokers=frozenset({3}))
    mine = journal(wanted, ThrottleJournal(), {}, {}, [other])
    assert mine.brokers == {1, 2}


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
