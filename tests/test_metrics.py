"""kpo's metrics: what one reconcile records, and how the per-resource gauges add up at scrape time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kopf
import pytest
from kubernetes.client.exceptions import ApiException
from prometheus_client import generate_latest

from kpo import metrics
from kpo.api import PARTITION_REASSIGNMENT, PREFERRED_LEADER_ELECTION, Progress
from kpo.domain.conditions import Event
from kpo.domain.model import KafkaRefusal, TopicPartition
from kpo.kafka.admin import KafkaRequestRefused, KafkaUnavailable
from kpo.resources import shell

KIND = PARTITION_REASSIGNMENT.kind


@pytest.fixture(autouse=True)
def fresh_states() -> Iterator[None]:
    metrics.STATES.clear()
    yield
    metrics.STATES.clear()


def sample(name: str, **labels: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(name, labels)


def tick(uid: str, before: dict[str, Any], written: dict[str, Any], cluster: str = "default",
         originals: dict[TopicPartition, tuple[int, ...]] | None = None) -> None:
    patch: dict[str, Any] = {}
    with metrics.reconcile(PARTITION_REASSIGNMENT, uid, status=before, patch=patch, cluster=cluster) as scope:
        patch["status"] = written
        scope.settle(originals or {})


def in_flight(*entries: tuple[str, int, list[int]]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p, "replicas": r} for t, p, r in entries]


def test_brokers_touched_are_those_gaining_or_dropping_a_replica() -> None:
    assert metrics.brokers_touched((2, 3, 4), (1, 2, 3)) == {1, 4}
    assert metrics.brokers_touched((3, 2, 1), (1, 2, 3)) == frozenset()  # a leader-order change moves no data
    assert metrics.brokers_touched((2, 3), None) == {2, 3}


def test_moves_in_flight_add_up_across_resources_and_per_broker() -> None:
    originals = {TopicPartition("t", 0): (1, 2), TopicPartition("t", 1): (2, 3)}
    tick("a", {"phase": "Pending"}, {"phase": "Executing", "inFlight": in_flight(("t", 0, [2, 3]), ("t", 1, [3, 1]))},
         originals=originals)
    tick("b", {}, {"phase": "Executing", "inFlight": in_flight(("u", 0, [1, 3]))},
         originals={TopicPartition("u", 0): (1, 2)})
    assert sample("kpo_moves_in_flight", cluster="default") == 3
    # t-0: 1 -> 3; t-1: 2 -> 1; u-0: 2 -> 3.
    assert sample("kpo_broker_moves_in_flight", cluster="default", broker="1") == 2
    assert sample("kpo_broker_moves_in_flight", cluster="default", broker="2") == 2
    assert sample("kpo_broker_moves_in_flight", cluster="default", broker="3") == 2
    assert sample("kpo_resources", kind=KIND, phase="Executing") == 2

    tick("a", {"phase": "Executing"}, {"phase": "Succeeded", "inFlight": []})
    assert sample("kpo_moves_in_flight", cluster="default") == 1
    assert sample("kpo_broker_moves_in_flight", cluster="default", broker="1") is None
    assert sample("kpo_resources", kind=KIND, phase="Succeeded") == 1
    assert sample("kpo_resources", kind=KIND, phase="Executing") == 1


def test_a_tick_that_writes_nothing_keeps_the_resource_in_its_phase() -> None:
    tick("a", {"phase": "Succeeded", "inFlight": []}, {})
    assert sample("kpo_resources", kind=KIND, phase="Succeeded") == 1


def test_forgotten_and_stale_resources_leave_the_gauges() -> None:
    clock = [100.0]
    states = metrics.ResourceStates(clock=lambda: clock[0], stale_after=30)
    states.put("a", metrics.Snapshot(KIND, "default", "Executing", moves_in_flight=2))
    states.put("b", metrics.Snapshot(KIND, "default", "Executing", moves_in_flight=1))
    states.forget("b")
    assert [s.moves_in_flight for s in states.current()] == [2]
    clock[0] += 31
    assert states.current() == []


def resource_counts(states: metrics.ResourceStates) -> dict[tuple[str, str], float]:
    family = next(f for f in states.collect() if f.name == "kpo_resources")
    return {(s.labels["kind"], s.labels["phase"]): s.value for s in family.samples}


def test_a_resource_at_rest_stays_counted_after_its_ticks_stop_until_it_is_deleted() -> None:
    # At rest (Succeeded, a finished election) a resource has no timer: its last tick is its last snapshot.
    clock = [100.0]
    states = metrics.ResourceStates(clock=lambda: clock[0], stale_after=30)
    states.put("a", metrics.Snapshot(KIND, "default", "Succeeded"))
    states.put("b", metrics.Snapshot(KIND, "default", "Executing", moves_in_flight=2))
    clock[0] += 3600
    assert states.current() == [], "the move gauges forget snapshots whose ticks stopped"
    assert resource_counts(states) == {(KIND, "Succeeded"): 1, (KIND, "Executing"): 1}
    states.forget("a")
    assert resource_counts(states) == {(KIND, "Executing"): 1}


def test_the_watch_counts_resources_that_never_tick() -> None:
    # After a restart a resource at rest is only ever seen by the watch's listing: no tick rebuilds it.
    clock = [100.0]
    states = metrics.ResourceStates(clock=lambda: clock[0], stale_after=30)
    for uid in ("a", "b", "c"):
        states.watched(uid, "PreferredLeaderElection", "Succeeded")
    states.watched("c", "PreferredLeaderElection", "Failed")
    clock[0] += 3600
    assert resource_counts(states) == {("PreferredLeaderElection", "Succeeded"): 2,
                                       ("PreferredLeaderElection", "Failed"): 1}
    states.put("c", metrics.Snapshot("PreferredLeaderElection", "default", "Pending"))
    assert resource_counts(states)[("PreferredLeaderElection", "Pending")] == 1, "a tick moves it as the watch does"


def test_every_watch_event_counts_the_resource_and_deleted_forgets_it() -> None:
    kind: shell.Kind[Any] = shell.Kind(resource=PREFERRED_LEADER_ELECTION,
                                       parse=lambda spec: spec, at_rest=lambda _generation, _status: True,
                                       reconcile=lambda _tick: None)
    body = kopf.Body({"metadata": {"uid": "u1"}, "status": {"phase": "Succeeded"}})
    shell.seen(kind, type=None, body=body, uid="u1")  # the listing at start-up
    shell.seen(kind, type="ADDED", body=kopf.Body({"metadata": {"uid": "u2"}}), uid="u2")
    assert sample("kpo_resources", kind="PreferredLeaderElection", phase="Succeeded") == 1
    assert sample("kpo_resources", kind="PreferredLeaderElection", phase="Pending") == 1
    shell.seen(kind, type="DELETED", body=body, uid="u1")
    assert sample("kpo_resources", kind="PreferredLeaderElection", phase="Succeeded") is None
    metrics.watched(PARTITION_REASSIGNMENT, "odd", {"phase": "Executing", "inFlight": "not a list"})
    assert sample("kpo_resources", kind=KIND, phase="Executing") == 1, "a status the model refuses still counts"


def test_known_clusters_report_zero_when_nothing_moves() -> None:
    metrics.STATES.known_clusters(["default", "east"])
    assert sample("kpo_moves_in_flight", cluster="east") == 0
    assert sample("kpo_throttles_active", cluster="east") == 0


def test_throttled_brokers_come_from_the_status_throttle_journal() -> None:
    tick("a", {}, {"phase": "Executing", "throttle": {"rate": 1000, "brokers": [1, 2]}})
    tick("b", {}, {"phase": "Executing", "throttle": {"rate": 1000, "brokers": [2, 3]}})
    assert sample("kpo_throttles_active", cluster="default") == 3
    assert sample("kpo_throttled_resources", cluster="default") == 2
    replicas_only = {"rate": 1000, "brokers": [], "topics": [{"topic": "t", "leader": ["0:1"], "follower": []}]}
    tick("c", {}, {"phase": "Executing", "throttle": replicas_only})
    assert sample("kpo_throttled_resources", cluster="default") == 3  # replica throttles only: still in place
    assert sample("kpo_throttles_active", cluster="default") == 3
    tick("c", {}, {"phase": "Succeeded", "throttle": None})
    tick("a", {"phase": "Executing", "throttle": {"rate": 1000, "brokers": [1, 2]}}, {"phase": "Succeeded"})
    assert sample("kpo_throttles_active", cluster="default") == 3  # still in the status: still set
    tick("a", {"phase": "Succeeded", "throttle": {"brokers": [1, 2]}}, {"throttle": None})
    tick("b", {"phase": "Executing"}, {"phase": "Succeeded", "throttle": None})
    assert sample("kpo_throttles_active", cluster="default") == 0
    assert sample("kpo_throttled_resources", cluster="default") == 0


def test_throttled_brokers_count_once_per_cluster() -> None:
    tick("a", {}, {"phase": "Executing", "throttle": {"rate": 1000, "brokers": [1, 2]}})
    tick("b", {}, {"phase": "Executing", "throttle": {"rate": 1000, "brokers": [2, 3]}})
    assert sample("kpo_throttles_active", cluster="default") == 3, "broker 2 counts once"
    tick("a", {"phase": "Executing"}, {"phase": "Succeeded", "throttle": None})
    assert sample("kpo_throttles_active", cluster="default") == 2
    tick("b", {"phase": "Executing"}, {"phase": "Succeeded", "throttle": None})
    assert sample("kpo_throttles_active", cluster="default") == 0


@pytest.mark.parametrize(("before", "after", "moved"), [
    (0, 500, 500),
    (500, 800, 300),
    (800, 800, 0),
    (800, 100, 100),  # a new run (changed spec, revert) counts again from zero
])
def test_bytes_moved_count_what_each_tick_added(before: int, after: int, moved: int) -> None:
    assert metrics.bytes_moved_delta(Progress(bytes_moved=before), Progress(bytes_moved=after)) == moved


def test_no_progress_yet_counts_from_zero() -> None:
    assert metrics.bytes_moved_delta(None, Progress(bytes_moved=700)) == 700
    assert metrics.bytes_moved_delta(Progress(bytes_moved=700), None) == 0


def test_bytes_moved_counter_grows_by_the_status_delta() -> None:
    start = sample("kpo_bytes_moved_total", kind=KIND, cluster="bytes") or 0.0
    tick("a", {"progress": {"bytesMoved": 0}}, {"phase": "Executing", "progress": {"bytesMoved": 1000}}, "bytes")
    tick("a", {"progress": {"bytesMoved": 1000}}, {"phase": "Executing", "progress": {"bytesMoved": 1500}}, "bytes")
    assert sample("kpo_bytes_moved_total", kind=KIND, cluster="bytes") == start + 1500


def test_phase_transitions_are_counted_once_per_entry() -> None:
    start = sample("kpo_phase_transitions_total", kind=KIND, phase="Failed") or 0.0
    tick("a", {"phase": "Executing"}, {"phase": "Failed"})
    tick("a", {"phase": "Failed"}, {"phase": "Failed"})
    tick("a", {"phase": "Failed"}, {})
    assert sample("kpo_phase_transitions_total", kind=KIND, phase="Failed") == start + 1


def ready(reason: str) -> list[dict[str, Any]]:
    return [{"type": "Ready", "status": "False", "reason": reason, "message": "m",
             "lastTransitionTime": "2026-11-26T08:00:00Z"}]


def test_failures_are_counted_by_the_reason_of_their_ready_condition() -> None:
    planning = {"kind": KIND, "reason": "PlanningFailed"}
    refused = {"kind": KIND, "reason": "KafkaRefused"}
    start_planning, start_refused = sample("kpo_resource_failures_total", **planning) or 0.0, \
        sample("kpo_resource_failures_total", **refused) or 0.0
    tick("a", {"phase": "Planning"}, {"phase": "Failed", "conditions": ready("PlanningFailed")})
    tick("a", {"phase": "Failed", "conditions": ready("PlanningFailed")}, {"phase": "Failed"})  # no new entry
    tick("b", {"phase": "Executing"}, {"phase": "Failed", "conditions": ready("KafkaRefused")})
    tick("c", {"phase": "Executing"}, {"phase": "Succeeded", "conditions": ready("Succeeded")})  # not a failure
    assert sample("kpo_resource_failures_total", **planning) == start_planning + 1
    assert sample("kpo_resource_failures_total", **refused) == start_refused + 1
    assert sample("kpo_resource_failures_total", kind=KIND, reason="Succeeded") is None


def stalled(*moves: tuple[str, int, bool]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p, "brokers": [3], "cancelled": c} for t, p, c in moves]


def test_stalled_moves_count_those_still_in_flight() -> None:
    tick("a", {}, {"phase": "Executing", "inFlight": in_flight(("t", 0, [3]), ("t", 2, [3])),
                   "stalledMoves": stalled(("t", 0, False), ("t", 1, True))}, "stall")
    tick("b", {}, {"phase": "Executing", "inFlight": in_flight(("u", 0, [3])),
                   "stalledMoves": stalled(("u", 0, False))}, "stall")
    assert sample("kpo_stalled_moves", cluster="stall") == 2  # t-1 was cancelled for it: no longer in flight
    tick("a", {"phase": "Executing"}, {"stalledMoves": []}, "stall")
    assert sample("kpo_stalled_moves", cluster="stall") == 1
    # Still listed, but no longer in flight (the resource was stopped): not a stalled move any more.
    tick("b", {"phase": "Executing"}, {"phase": "Stopped", "inFlight": []}, "stall")
    assert sample("kpo_stalled_moves", cluster="stall") == 0


def test_a_throttle_left_after_the_run_ended_is_counted_until_taken_back() -> None:
    journal = {"rate": 1000, "brokers": [1, 2]}
    tick("a", {}, {"phase": "Executing", "throttle": journal})
    assert sample("kpo_ended_resources_holding_throttle", cluster="default") == 0  # running: the throttle belongs
    tick("a", {"phase": "Executing", "throttle": journal}, {"phase": "Reverted"})  # a broker down kept it
    tick("b", {}, {"phase": "Succeeded", "throttle": None})
    assert sample("kpo_ended_resources_holding_throttle", cluster="default") == 1
    tick("a", {"phase": "Reverted", "throttle": journal}, {"throttle": None})
    assert sample("kpo_ended_resources_holding_throttle", cluster="default") == 0


@pytest.mark.parametrize(("error", "family", "labels"), [
    (KafkaUnavailable("down"), "kpo_kafka_errors_total",
     {"kind": KIND, "cluster": "err", "reason": "KafkaUnavailable"}),
    (KafkaRequestRefused(KafkaRefusal("CLUSTER_AUTHORIZATION_FAILED")), "kpo_kafka_errors_total",
     {"kind": KIND, "cluster": "err", "reason": "CLUSTER_AUTHORIZATION_FAILED"}),
    (ApiException(status=403), "kpo_kubernetes_api_errors_total", {"kind": KIND, "code": "403"}),
])
def test_errors_escaping_a_tick_are_counted_and_re_raised(error: Exception, family: str,
                                                          labels: dict[str, str]) -> None:
    start = sample(family, **labels) or 0.0
    latency_count = sample("kpo_reconcile_duration_seconds_count", kind=KIND) or 0.0
    with pytest.raises(type(error)), metrics.reconcile(PARTITION_REASSIGNMENT, "a", status={}, patch={}, cluster="err"):
        raise error
    assert sample(family, **labels) == start + 1
    assert sample("kpo_reconcile_duration_seconds_count", kind=KIND) == latency_count + 1


def test_errors_are_found_through_the_cause_chain() -> None:
    class RetryLaterError(Exception):
        pass

    try:
        try:
            raise KafkaUnavailable("down")
        except KafkaUnavailable as exc:
            raise RetryLaterError("later") from exc
    except RetryLaterError as wrapped:
        assert metrics.classify(wrapped) == ("kafka", "KafkaUnavailable")
    assert metrics.classify(ValueError("not ours")) is None


def test_kafka_refusals_reported_as_events_are_counted() -> None:
    labels = {"kind": KIND, "cluster": "ev", "reason": "KafkaRefused"}
    start = sample("kpo_kafka_errors_total", **labels) or 0.0
    with metrics.reconcile(PARTITION_REASSIGNMENT, "a", status={}, patch={}, cluster="ev") as scope:
        scope.settle(events=(Event("Warning", "KafkaRefused", "no"), Event("Normal", "Started", "go")))
    assert sample("kpo_kafka_errors_total", **labels) == start + 1


def test_originals_recorded_by_this_tick_count_for_the_per_broker_gauge() -> None:
    patch: dict[str, Any] = {}
    with metrics.reconcile(PARTITION_REASSIGNMENT, "a", status={}, patch=patch, cluster="default") as scope:
        patch["status"] = {"phase": "Executing", "inFlight": in_flight(("t", 0, [2, 3]))}
        scope.settle(recorded_now={TopicPartition("t", 0): (1, 2)})
    assert sample("kpo_broker_moves_in_flight", cluster="default", broker="1") == 1
    assert sample("kpo_broker_moves_in_flight", cluster="default", broker="3") == 1
    assert sample("kpo_broker_moves_in_flight", cluster="default", broker="2") is None


def test_exposition_names_every_family() -> None:
    metrics.STATES.known_clusters(["default"])
    tick("a", {}, {"phase": "Executing", "inFlight": in_flight(("t", 0, [1]))})
    text = generate_latest(metrics.REGISTRY).decode()
    for family in ("kpo_reconcile_duration_seconds", "kpo_bytes_moved_total", "kpo_kafka_errors_total",
                   "kpo_kubernetes_api_errors_total", "kpo_resources", "kpo_moves_in_flight",
                   "kpo_broker_moves_in_flight", "kpo_throttles_active", "kpo_throttled_resources",
                   "kpo_phase_transitions_total", "kpo_resource_failures_total", "kpo_stalled_moves",
                   "kpo_ended_resources_holding_throttle"):
        assert f"# TYPE {family.removesuffix('_total')}" in text, family
