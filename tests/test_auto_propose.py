"""Auto-propose on broker changes: the decision (kpo.domain.auto_propose), the proposal it writes, the configuration
that feeds it, and the watcher's shell (kpo.background.broker_changes) over a fake cluster and a fake proposal store."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import ValidationError

from kafka_fake import FakeCluster
from kpo.api.partition_reassignment import PartitionReassignmentSpec
from kpo.background.broker_changes import BrokerChangeWatcher, holders
from kpo.config import AutoProposeCluster, OperatorConfig
from kpo.domain.auto_propose import (
    AUTO_PROPOSE_LABEL,
    CLUSTER_LABEL,
    add_brokers_proposal,
    covered_brokers,
    departures,
    newcomers,
    proposal_name,
    remove_brokers_proposal,
)
from kpo.domain.model import Broker, TopicPartition
from kpo.kafka.admin import KafkaAdmin

SETTLE = 60.0


def look(empty_since: Mapping[int, float], live: set[int], holding: set[int], now: float, *,
         covered: set[int] | None = None, ignored: set[int] | None = None) -> tuple[dict[int, float], set[int]]:
    seen = newcomers(empty_since, live, holding, covered=covered or set(), ignored=ignored or set(),
                     settle_seconds=SETTLE, now=now)
    return seen.waiting_since, set(seen.due)


def test_an_empty_broker_is_proposed_once_it_has_settled() -> None:
    since, due = look({}, {1, 2, 3, 4}, {1, 2, 3}, now=100)
    assert (since, due) == ({4: 100}, set())
    since, due = look(since, {1, 2, 3, 4}, {1, 2, 3}, now=159)
    assert (since, due) == ({4: 100}, set())
    since, due = look(since, {1, 2, 3, 4}, {1, 2, 3}, now=160)
    assert (since, due) == ({}, {4})


def test_brokers_of_one_scale_out_are_proposed_together() -> None:
    since, _ = look({}, {1, 2, 3, 4}, {1, 2, 3}, now=0)
    since, due = look(since, {1, 2, 3, 4, 5}, {1, 2, 3}, now=30)
    assert due == set() and since == {4: 0, 5: 30}
    since, due = look(since, {1, 2, 3, 4, 5}, {1, 2, 3}, now=60)
    assert due == set(), "broker 5 has not settled yet: wait for it rather than propose 4 alone"
    since, due = look(since, {1, 2, 3, 4, 5}, {1, 2, 3}, now=90)
    assert (since, due) == ({}, {4, 5})


def test_a_stream_of_newcomers_does_not_hold_the_first_for_ever() -> None:
    since: dict[int, float] = {4: 0}
    live = frozenset({1, 2, 3, 4})
    for t in range(30, 240, 30):
        live = live | {4 + t // 30}
        since, due = look(since, live, {1, 2, 3}, now=t)
        assert due == set()
    since, due = look(since, live | {12}, {1, 2, 3}, now=240)
    assert due == set(range(4, 11)), "after MAX_SETTLE_PERIODS the settled ones go, the others keep waiting"
    assert since == {11: 210, 12: 240}


def test_a_broker_that_leaves_before_it_settles_is_forgotten() -> None:
    since, _ = look({}, {1, 2, 3, 4}, {1, 2, 3}, now=0)
    since, due = look(since, {1, 2, 3}, {1, 2, 3}, now=30)
    assert (since, due) == ({}, set())
    since, due = look(since, {1, 2, 3, 4}, {1, 2, 3}, now=60)
    assert (since, due) == ({4: 60}, set()), "its settle period starts again"


def test_covered_ignored_and_holding_brokers_are_never_proposed() -> None:
    _, due = look({4: 0, 5: 0, 6: 0}, {1, 2, 3, 4, 5, 6}, {1, 2, 3, 6}, now=100, covered={4}, ignored={5})
    assert due == set()


def test_a_cluster_where_nobody_holds_a_replica_has_nothing_to_move() -> None:
    _, due = look({1: 0, 2: 0}, {1, 2}, set(), now=1000)
    assert due == set()


def test_the_proposal_is_an_add_brokers_plan_that_waits_for_approval() -> None:
    body = add_brokers_proposal(cluster="prod-eu", namespace="kafka-ops", brokers={5, 4},
                                racks={4: "rack-d", 5: None}, automatic=False,
                                plan={"excludeTopicPattern": "tmp-.*", "tolerance": 0.05},
                                execution={"throttle": 10_000_000}, seen_at="2026-11-25T10:00:00+00:00")
    assert body["metadata"]["name"] == "auto-add-brokers-prod-eu-4-5"
    assert body["metadata"]["labels"][AUTO_PROPOSE_LABEL] == "add-brokers"
    assert body["metadata"]["labels"][CLUSTER_LABEL] == "prod-eu"
    assert "4 (rack rack-d), 5 (rack none)" in body["metadata"]["annotations"]["kpo.dev/reason"]
    spec = body["spec"]
    assert spec["plan"] == {"excludeTopicPattern": "tmp-.*", "tolerance": 0.05, "goal": "AddBrokers", "brokers": [4, 5]}
    assert spec["approval"] == {"mode": "Manual"} and spec["clusterRef"] == "prod-eu"
    # The CRD's own model admits it.
    PartitionReassignmentSpec.model_validate(spec)
    assert covered_brokers([body]) == {4, 5}


def test_proposal_names_are_valid_whatever_the_cluster_is_called() -> None:
    assert proposal_name("default", [4]) == "auto-add-brokers-default-4"
    assert proposal_name("Prod_EU", [4]) == "auto-add-brokers-prod-eu-4"
    assert proposal_name("--", [1]) == "auto-add-brokers-cluster-1"
    assert len(proposal_name("x" * 400, range(100))) <= 253


def test_the_configuration_refuses_a_template_the_crd_would_refuse() -> None:
    with pytest.raises(ValidationError, match="goal or brokers"):
        AutoProposeCluster.model_validate({"namespace": "ops", "plan": {"goal": "Rebalance"}})
    with pytest.raises(ValidationError, match="tolerance"):
        AutoProposeCluster.model_validate({"namespace": "ops", "plan": {"tolerance": 7}})
    with pytest.raises(ValidationError, match="approval"):
        AutoProposeCluster.model_validate({"namespace": "ops", "approval": "Sometimes"})
    with pytest.raises(ValidationError, match="names no configured cluster: prod"):
        OperatorConfig.model_validate({"clusters": {"default": {"bootstrapServers": "k:9092"}},
                                       "autoPropose": {"clusters": {"prod": {"namespace": "ops"}}}})
    config = OperatorConfig.model_validate({"clusters": {"default": {"bootstrapServers": "k:9092"}}})
    assert config.auto_propose.clusters == {}, "off unless asked for"


class Cluster(FakeCluster):
    live = frozenset({1, 2, 3, 4})

    def brokers(self) -> dict[int, Broker]:
        self.called("brokers")
        return {b: Broker(b, rack=f"rack-{b}") for b in self.live}


class Store:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.messages: list[str] = []

    def existing(self, namespace: str, cluster: str) -> list[dict[str, Any]]:
        return [b for b in self.created if b["metadata"]["namespace"] == namespace]

    def create(self, body: Mapping[str, Any], message: str) -> bool:
        if any(b["metadata"]["name"] == body["metadata"]["name"] for b in self.created):
            return False
        self.created.append(dict(body))
        self.messages.append(message)
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def three_brokers() -> Cluster:
    return Cluster({TopicPartition("a", 0): (1, 2), TopicPartition("a", 1): (2, 3),
                    TopicPartition("__consumer_offsets", 0): (3, 1)})


def watcher(kafka: Cluster, store: Store, clock: Clock, **settings: Any) -> BrokerChangeWatcher:
    config = AutoProposeCluster.model_validate({"namespace": "ops", "settleSeconds": 60, **settings})

    def adapter(name: str) -> KafkaAdmin:
        return kafka

    return BrokerChangeWatcher({"default": config}, 30, kafka=adapter, forget=lambda name: None,
                               proposals=store, topics_per_request=1, clock=clock)


def test_holders_stops_reading_once_every_broker_is_found() -> None:
    kafka = three_brokers()
    assert holders(kafka, {1, 3}, topics_per_request=1) == {1, 3}
    assert kafka.calls.count("describe_topics") == 1, "topic __consumer_offsets (3, 1) answered both"
    kafka.calls.clear()
    assert holders(kafka, {4}, topics_per_request=1) == set()
    assert kafka.calls.count("describe_topics") == 2


def test_the_watcher_proposes_a_new_broker_once_and_then_only_asks_who_is_registered() -> None:
    kafka, store, clock = three_brokers(), Store(), Clock()
    w = watcher(kafka, store, clock)
    w.run_due()
    assert store.created == []
    clock.now = 60
    w.run_due()
    assert [b["metadata"]["name"] for b in store.created] == ["auto-add-brokers-default-4"]
    assert "waits at Proposed" in store.messages[0]
    for step in range(1, 4):
        clock.now = 60 + 30 * step
        kafka.calls.clear()
        w.run_due()
        assert kafka.calls == ["brokers"], "broker 4 is covered: no topic walk while its proposal exists"
    assert len(store.created) == 1
    # Its plan ran: broker 4 holds replicas now, and a later look still proposes nothing.
    kafka.replicas[TopicPartition("a", 0)] = (4, 2)
    store.created.clear()
    clock.now = 1000
    w.run_due()
    assert store.created == []


def test_an_outage_is_said_once_and_backs_off(caplog: pytest.LogCaptureFixture) -> None:
    kafka, store, clock = three_brokers(), Store(), Clock()
    w = watcher(kafka, store, clock)
    kafka.down = True
    with caplog.at_level(logging.WARNING, logger="kpo.background.broker_changes"):
        waits = []
        for _ in range(4):
            waits.append(w.run_due())
            clock.now += waits[-1]
        kafka.down = False
        w.run_due()
    said = [r.getMessage() for r in caplog.records]
    assert waits == [60.0, 120.0, 240.0, 480.0]
    assert len([m for m in said if "cannot look" in m]) == 1
    assert len([m for m in said if "again after" in m]) == 1


def test_a_refused_template_is_said_once_per_broker_set(caplog: pytest.LogCaptureFixture) -> None:
    class RefusedError(Exception):
        status = 422

    class RefusingStore(Store):
        def create(self, body: Mapping[str, Any], message: str) -> bool:
            raise RefusedError("spec.plan.tolerance: Invalid value")

    kafka, clock = three_brokers(), Clock()
    w = watcher(kafka, RefusingStore(), clock, settleSeconds=0)
    with caplog.at_level(logging.ERROR, logger="kpo.background.broker_changes"):
        for _ in range(3):
            w.run_due()
            clock.now += 30
    assert len([r for r in caplog.records if "refused the auto-proposal" in r.getMessage()]) == 1


def test_a_broker_gone_for_long_enough_while_holding_replicas_is_proposed_for_removal() -> None:
    seen = departures({}, {5}, covered=set(), ignored=set(), after_seconds=1800, now=100)
    assert (seen.waiting_since, set(seen.due)) == ({5: 100}, set())
    seen = departures(seen.waiting_since, {5}, covered=set(), ignored=set(), after_seconds=1800, now=1899)
    assert set(seen.due) == set()
    seen = departures(seen.waiting_since, {5}, covered=set(), ignored=set(), after_seconds=1800, now=1900)
    assert (seen.waiting_since, set(seen.due)) == ({}, {5})
    # Back before the threshold: forgotten; covered or ignored: never.
    assert departures({5: 0}, set(), covered=set(), ignored=set(), after_seconds=10, now=100).waiting_since == {}
    assert not departures({5: 0}, {5}, covered={5}, ignored=set(), after_seconds=10, now=100).due
    assert not departures({5: 0}, {5}, covered=set(), ignored={5}, after_seconds=10, now=100).due


def test_the_removal_proposal_is_a_remove_brokers_plan_labelled_apart() -> None:
    body = remove_brokers_proposal(cluster="default", namespace="ops", brokers={5}, automatic=True, plan={},
                                   execution={}, seen_at="2026-11-25T10:00:00+00:00")
    assert body["metadata"]["name"] == "auto-remove-brokers-default-5"
    assert body["metadata"]["labels"][AUTO_PROPOSE_LABEL] == "remove-brokers"
    assert body["spec"]["plan"] == {"goal": "RemoveBrokers", "brokers": [5]}
    assert body["spec"]["approval"] == {"mode": "Automatic"}
    PartitionReassignmentSpec.model_validate(body["spec"])
    assert covered_brokers([body]) == set(), "an add proposal does not cover a broker being removed"
    assert covered_brokers([body], "remove-brokers") == {5}


def test_the_watcher_proposes_removing_a_dead_broker_that_holds_replicas_only_when_asked() -> None:
    kafka, store, clock = three_brokers(), Store(), Clock()
    kafka.replicas[TopicPartition("b", 0)] = (4, 1)
    w = watcher(kafka, store, clock, removeDeadAfterSeconds=100)
    w.run_due()
    assert store.created == [] and kafka.calls.count("describe_topics") == 3, "the first look walks every topic"
    kafka.live = frozenset({1, 2, 3})  # broker 4 dies holding a replica of b-0
    for t in (30, 60, 90, 120):
        clock.now = t
        w.run_due()
    assert store.created == []
    clock.now = 150
    w.run_due()
    assert [b["metadata"]["name"] for b in store.created] == ["auto-remove-brokers-default-4"]
    # Drained: the next looks stop walking the topics.
    kafka.replicas[TopicPartition("b", 0)] = (2, 1)
    clock.now = 180
    w.run_due()
    kafka.calls.clear()
    clock.now = 210
    w.run_due()
    assert kafka.calls == ["brokers"]
    assert len(store.created) == 1

    # Off (the default): a dead broker is never proposed for removal.
    kafka, store, clock = three_brokers(), Store(), Clock()
    kafka.replicas[TopicPartition("b", 0)] = (4, 1)
    kafka.live = frozenset({1, 2, 3})
    w = watcher(kafka, store, clock)
    for t in range(0, 10_000, 1000):
        clock.now = t
        w.run_due()
    assert store.created == []


def test_a_broker_filled_by_an_add_proposal_that_dies_is_proposed_for_removal() -> None:
    """Broker 4 was never walked for (its add proposal covered it), yet it holds replicas when it dies."""
    kafka, store, clock = three_brokers(), Store(), Clock()
    w = watcher(kafka, store, clock, removeDeadAfterSeconds=10, settleSeconds=0)
    w.run_due()
    assert [b["metadata"]["name"] for b in store.created] == ["auto-add-brokers-default-4"]
    kafka.replicas[TopicPartition("a", 0)] = (4, 2)  # the proposal ran
    clock.now = 30
    w.run_due()
    kafka.live = frozenset({1, 2, 3})
    for t in (60, 90):
        clock.now = t
        w.run_due()
    assert [b["metadata"]["name"] for b in store.created][1:] == ["auto-remove-brokers-default-4"]
    # Back alive, emptied, dead again: no walk finds it holding anything, no second removal.
    kafka.replicas[TopicPartition("a", 0)] = (1, 2)
    kafka.live = frozenset({1, 2, 3, 4})
    clock.now = 120
    w.run_due()
    kafka.live = frozenset({1, 2, 3})
    for t in (150, 180, 210):
        clock.now = t
        w.run_due()
    assert len(store.created) == 2


def test_the_proposal_comes_when_the_settle_time_runs_out_not_an_interval_later() -> None:
    # Interval 30 s, settle 45 s: broker 4 first seen at t=0. With looks only every 30 s the settle time ran out
    # between looks (t=45) and the proposal waited for the look at t=60 (issue 26, item 7).
    kafka, store, clock = three_brokers(), Store(), Clock()
    w = watcher(kafka, store, clock, settleSeconds=45)
    assert w.run_due() == 30
    clock.now = 30
    assert w.run_due() == 15, "the next look is due when the settle time runs out"
    clock.now = 45
    w.run_due()
    assert [b["metadata"]["name"] for b in store.created] == ["auto-add-brokers-default-4"]
    assert w.run_due() == 30, "nothing waits: back to the interval"
