"""The intra-broker throttle (execution.logDirThrottle, issue 30): replica.alter.log.dirs.io.max.bytes.per.second on
the brokers that copy a replica between their own log dirs, journaled, shared and taken back like the replication
rates, a user's rate left alone."""

from __future__ import annotations

from kpo.domain.model import TopicPartition
from kpo.domain.throttle import (
    FOLLOWER_RATE,
    LEADER_RATE,
    LOG_DIR_RATE,
    ConfigChange,
    ThrottleJournal,
    apply_changes,
    describe_pending,
    journal,
    plan,
    removal_changes,
)
from kpo.execution.ledger import ThrottleLedger
from test_cluster_executor import ThrottledCluster

A0 = TopicPartition("a", 0)
LIVE = {1, 2, 3}


def test_a_log_dir_plan_alone_sets_no_replication_throttle() -> None:
    wanted = plan(0, {A0: ((1, 2), (1, 3))}, log_dir_rate=5000, log_dir_brokers=[2])
    assert (wanted.brokers, dict(wanted.leader_replicas), wanted.log_dir_brokers) == (frozenset(), {}, {2})
    assert plan(1000, {}, log_dir_rate=0, log_dir_brokers=[2]).log_dir_brokers == frozenset(), "no rate: none"


def test_the_journal_takes_a_free_broker_and_leaves_a_users_rate_alone() -> None:
    wanted = plan(0, {}, log_dir_rate=5000, log_dir_brokers=[1, 2])
    mine = journal(wanted, ThrottleJournal(), {1: {LOG_DIR_RATE: "777"}, 2: {}}, {}, [])
    assert (mine.log_dir_rate, mine.log_dir_brokers) == (5000, {2})
    assert apply_changes(mine, {2: {}}, {}) == [ConfigChange("broker", "2", LOG_DIR_RATE, "SET", "5000")]
    assert removal_changes(mine, []) == [ConfigChange("broker", "2", LOG_DIR_RATE, "DELETE")]


def test_a_broker_two_resources_hold_runs_at_the_lower_rate_and_the_last_to_end_takes_it_back() -> None:
    other = ThrottleJournal(log_dir_rate=3000, log_dir_brokers=frozenset({2}))
    wanted = plan(0, {}, log_dir_rate=5000, log_dir_brokers=[2])
    mine = journal(wanted, ThrottleJournal(), {2: {LOG_DIR_RATE: "3000"}}, {}, [other])
    assert mine.log_dir_brokers == {2}, "set by the other resource: shared, one reference each"
    assert apply_changes(mine, {2: {LOG_DIR_RATE: "3000"}}, {}, [other]) == []
    assert removal_changes(mine, [other]) == [], "the other still needs it"
    assert removal_changes(mine, []) == [ConfigChange("broker", "2", LOG_DIR_RATE, "DELETE")]


def test_the_journal_reads_back_and_an_earlier_journal_has_no_log_dir_part() -> None:
    mine = ThrottleJournal(rate=1000, brokers=frozenset({1}), log_dir_rate=5000, log_dir_brokers=frozenset({2}))
    assert ThrottleJournal.from_json(mine.to_json()) == mine
    assert "logDirRate" not in ThrottleJournal(rate=1000, brokers=frozenset({1})).to_json(), "the shape kept"
    earlier = ThrottleJournal.from_json({"rate": 1000, "brokers": [1], "topics": []})
    assert earlier.log_dir_brokers == frozenset() and earlier.all_brokers == {1}
    assert not ThrottleJournal(log_dir_rate=5000, log_dir_brokers=frozenset({2})).empty
    assert ThrottleJournal(log_dir_rate=5000, log_dir_brokers=frozenset({2})).without(brokers=[2]).empty


def test_a_pending_log_dir_rate_is_named() -> None:
    left = ThrottleJournal(log_dir_rate=5000, log_dir_brokers=frozenset({3}))
    assert describe_pending(left, unreachable=[3]) == (
        "replication throttles still set: log dir rates of broker(s) [3] (broker(s) [3] not available: retried "
        "until they return)")


def test_through_the_ledger_both_rates_are_set_on_a_broker_and_taken_back_together() -> None:
    cluster = ThrottledCluster()
    cluster.configs[("broker", "1")] = {LOG_DIR_RATE: "777"}
    ledger = ThrottleLedger()
    wanted = plan(1000, {A0: ((1, 2), (1, 3))}, log_dir_rate=5000, log_dir_brokers=[1, 2])
    mine = ledger.ensure("ns/r", cluster, wanted, previous=ThrottleJournal(), index={},  # type: ignore[arg-type]
                         save=lambda _j: None, live_brokers=LIVE)
    assert cluster.configs[("broker", "2")] == {LEADER_RATE: "1000", FOLLOWER_RATE: "1000", LOG_DIR_RATE: "5000"}
    assert cluster.configs[("broker", "1")] == {LEADER_RATE: "1000", FOLLOWER_RATE: "1000", LOG_DIR_RATE: "777"}
    assert mine.log_dir_brokers == {2}
    left = ledger.remove("ns/r", cluster, mine, index={}, save=lambda _j: None,  # type: ignore[arg-type]
                         live_brokers=LIVE)
    assert left.empty
    assert cluster.throttled() == {("broker", "1"): {LOG_DIR_RATE: "777"}}, "the user's rate, and nothing else"


def test_a_down_broker_keeps_its_log_dir_rate_in_the_journal_until_it_is_back() -> None:
    cluster = ThrottledCluster()
    ledger = ThrottleLedger()
    wanted = plan(0, {}, log_dir_rate=5000, log_dir_brokers=[2, 3])
    mine = ledger.ensure("ns/r", cluster, wanted, previous=ThrottleJournal(), index={},  # type: ignore[arg-type]
                         save=lambda _j: None, live_brokers=LIVE)
    left = ledger.remove("ns/r", cluster, mine, index={}, save=lambda _j: None,  # type: ignore[arg-type]
                         live_brokers={1, 2})
    assert left.log_dir_brokers == {3} and cluster.throttled() == {("broker", "3"): {LOG_DIR_RATE: "5000"}}
    assert ledger.remove("ns/r", cluster, left, index={}, save=lambda _j: None,  # type: ignore[arg-type]
                         live_brokers=LIVE).empty
    assert cluster.throttled() == {}
