"""Pause / resume and stall detection of a PartitionReassignment on the real test bed (issue 16).

Pause: a throttled move is caught in flight, the resource is paused, and Kafka is watched: the move in flight runs to
its end, nothing else starts, the throttle stays; clearing ``paused`` finishes the job. Stall: a move's destination
broker is killed (SIGKILL, started again in a ``finally``) and the resource flags the move that copies nothing any
more (onStall Report), or cancels it (onStall Cancel).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from e2e.kafka_support import broker_rate, create_topic, replicas_of, wait_for
from e2e.kube_support import Resources
from e2e.reassignment_support import fill, ongoing, spec_partitions
from e2e.test_broker_loss import _roles, node_down
from kpo_testbed import Testbed

KPR = "PartitionReassignment"
pytestmark = pytest.mark.usefixtures("kpo_operator")
HEALTH_SCRIPT = Path(__file__).resolve().parent.parent / "helm" / "kpo" / "files" / "argocd-health.lua"


def _argocd_health(obj: dict[str, Any]) -> str:
    """Argo CD's verdict on the live object, by the chart's health script under a real Lua 5.1 (Argo CD's dialect)."""
    lua51 = pytest.importorskip("lupa.lua51")
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    return str(lua.execute(HEALTH_SCRIPT.read_text())["status"])


def _events(resources: Resources, name: str, reason: str) -> list[str]:
    return [e.message for e in resources.events(name) if e.reason == reason]


@contextmanager
def _released(resources: Resources, *names: str) -> Iterator[None]:
    """Delete the resources at the end, pass or fail, and wait for their finalizers: the throttles they set are
    taken back then, so no rate leaks into the next test on the shared brokers."""
    try:
        yield
    finally:
        for name in names:
            if resources.exists(KPR, name):
                resources.delete(KPR, name)
        wait_for(lambda: not any(resources.exists(KPR, n) for n in names), 120, "resources released")


def _condition(resources: Resources, name: str, type_: str) -> dict[str, Any]:
    found = resources.condition(KPR, name, type_)
    assert found is not None, f"no {type_} condition"
    return found


def test_pause_lets_the_move_in_flight_finish_starts_nothing_keeps_the_throttle_and_resume_finishes(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources) -> None:
    # Three single-replica partitions on broker 1, all going to broker 2, one at a time. p0 carries 6 MB under a
    # 100 kB/s throttle, so it is in flight for about a minute unless the test lifts the throttle; p1 and p2 are
    # empty, so they would complete the moment they start: while paused, they must not.
    create_topic(kafka_admin, topic_name, 3, assignment=[[1]] * 3)
    fill(bootstrap_servers, topic_name, [0], messages=600)
    with _released(resources, "pause"):
        resources.create(KPR, "pause", {"partitions": spec_partitions(topic_name, {0: [2], 1: [2], 2: [2]}),
                                        "execution": {"throttle": 100_000, "maxMoves": 1}})
        wait_for(lambda: set(ongoing(bootstrap_servers, topic_name)) == {0}, 60, "p0 in flight")

        resources.patch_spec(KPR, "pause", {"execution": {"paused": True}})
        status = resources.wait_phase(KPR, "pause", "Paused", timeout=30)
        assert status["progress"]["inFlight"] == 1 and [m["partition"] for m in status["inFlight"]] == [0]
        progressing = _condition(resources, "pause", "Progressing")
        assert progressing["status"] == "False" and progressing["reason"] == "Paused"
        assert "1 move(s) in flight run to the end" in progressing["message"]
        assert _condition(resources, "pause", "Ready")["status"] == "False"
        assert _condition(resources, "pause", "Stalled")["status"] == "False"
        assert _argocd_health(resources.get(KPR, "pause")) == "Suspended"
        assert any(m.startswith("Executing -> Paused") for m in _events(resources, "pause", "Paused"))
        # Several ticks (1 s each): the pause neither cancelled nor re-targeted p0, and started nothing else.
        time.sleep(4)
        assert set(ongoing(bootstrap_servers, topic_name)) == {0}, "p0 still in flight, nothing else started"
        assert replicas_of(kafka_admin, topic_name)[1] == [1] and replicas_of(kafka_admin, topic_name)[2] == [1]

        # A faster rate, changed while paused: kpo follows it on the brokers (its throttle stays), and p0 finishes.
        resources.patch_spec(KPR, "pause", {"execution": {"throttle": 50_000_000}})
        wait_for(lambda: replicas_of(kafka_admin, topic_name)[0] == [2] and not ongoing(bootstrap_servers, topic_name),
                 90, "p0 finished while paused")
        wait_for(lambda: resources.status(KPR, "pause")["progress"]["inFlight"] == 0, 30, "status: nothing in flight")
        time.sleep(4)  # several ticks after p0 ended: still nothing started
        status = resources.status(KPR, "pause")
        assert status["phase"] == "Paused" and status["progress"]["completed"] == 1
        assert ongoing(bootstrap_servers, topic_name) == {}
        assert replicas_of(kafka_admin, topic_name) == {0: [2], 1: [1], 2: [1]}
        assert "0 move(s) in flight" in _condition(resources, "pause", "Progressing")["message"]
        assert status["throttle"]["rate"] == 50_000_000, "the throttle stays while paused"
        # kpo sets the rate on brokers 1 and 2 unless someone else's rate is there (left alone and not listed).
        assert status["throttle"]["brokers"], status["throttle"]
        assert all(broker_rate(kafka_admin, b) == "50000000" for b in status["throttle"]["brokers"])

        resources.patch_spec(KPR, "pause", {"execution": {"paused": False}})
        resources.wait_phase(KPR, "pause", "Succeeded", timeout=60)
        assert replicas_of(kafka_admin, topic_name) == {0: [2], 1: [2], 2: [2]}
        brokers = status["throttle"]["brokers"]
        wait_for(lambda: not resources.status(KPR, "pause").get("throttle"), 30, "throttle taken back")
        assert all(broker_rate(kafka_admin, b) is None for b in brokers)
        assert any(m.startswith("Paused -> Executing") for m in _events(resources, "pause", "Executing"))


def test_a_move_whose_destination_broker_dies_is_flagged_stalled_once_or_cancelled(
        testbed: Testbed, kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str,
        resources: Resources) -> None:
    controller, victim, _ = _roles(testbed)
    # Two partitions on the controller, each moving to the victim under a 200 kB/s throttle: 10 MB each keep them in
    # flight for about a minute, growing by a fetch every few seconds, well within stallAfterSeconds (15).
    create_topic(kafka_admin, topic_name, 2, assignment=[[controller], [controller]])
    fill(bootstrap_servers, topic_name, [0, 1], messages=1000)
    execution = {"throttle": 200_000, "stallAfterSeconds": 15}
    resources.create(KPR, "stall-report", {"partitions": spec_partitions(topic_name, {0: [victim]}),
                                           "execution": execution})
    resources.create(KPR, "stall-cancel", {"partitions": spec_partitions(topic_name, {1: [victim]}),
                                           "execution": {**execution, "onStall": "Cancel"}})

    with _released(resources, "stall-report", "stall-cancel"):
        def copied(name: str) -> int:
            moves = resources.status(KPR, name).get("inFlight") or []
            return int(moves[0].get("copiedBytes") or 0) if moves else 0

        wait_for(lambda: copied("stall-report") > 0 and copied("stall-cancel") > 0, 60, "both moves copying")
        # Progressing moves are not flagged: 20 s (more than stallAfterSeconds) of a throttled copy.
        time.sleep(20)
        for name in ("stall-report", "stall-cancel"):
            status = resources.status(KPR, name)
            assert status["phase"] == "Executing" and not status.get("stalledMoves"), f"{name}: {status}"
            assert not _events(resources, name, "MoveStalled")
        assert set(ongoing(bootstrap_servers, topic_name)) == {0, 1}, "both still moving when the victim is killed"

        with node_down(testbed, victim):
            killed = time.monotonic()

            def flagged() -> list[dict[str, Any]] | None:
                return resources.status(KPR, "stall-report").get("stalledMoves") or None

            stalled = wait_for(flagged, 90, "stall-report: the move flagged")
            assert time.monotonic() - killed >= 5, "flagged before stallAfterSeconds could have passed"
            assert stalled == [{"topic": topic_name, "partition": 0, "brokers": [victim], "down": [victim],
                                "copiedBytes": stalled[0]["copiedBytes"], "since": stalled[0]["since"]}]
            condition = _condition(resources, "stall-report", "Stalled")
            assert condition["status"] == "True" and condition["reason"] == "MoveStalled"
            assert f"{topic_name}-0 to broker(s) [{victim}]" in condition["message"]
            assert resources.status(KPR, "stall-report")["phase"] == "Executing"
            assert _argocd_health(resources.get(KPR, "stall-report")) == "Degraded"

            # onStall Cancel: the move is cancelled (KIP-455: back on the controller), the partition failed with why.
            status = resources.wait_phase(KPR, "stall-cancel", "Failed", timeout=60)
            assert _condition(resources, "stall-cancel", "Ready")["reason"] == "MoveStalled"
            assert [(f["partition"], f["reason"]) for f in status["failures"]] == [(1, "MoveStalled")]
            assert replicas_of(kafka_admin, topic_name)[1] == [controller]
            assert set(ongoing(bootstrap_servers, topic_name)) == {0}, "Report leaves its move running; Cancel did not"
            # One Event for the cancellation, one for the phase change (both reason MoveStalled), none per tick.
            cancel_events = _events(resources, "stall-cancel", "MoveStalled")
            assert len([m for m in cancel_events if "cancelling (execution.onStall Cancel)" in m]) == 1, cancel_events
            assert len([m for m in cancel_events if m.startswith("Executing -> Failed")]) == 1, cancel_events

            time.sleep(5)  # several ticks: the stall is reported once, not per tick
            assert len(_events(resources, "stall-report", "MoveStalled")) == 1
            assert resources.status(KPR, "stall-report").get("stalledMoves")

        # The victim is back: the move copies again and (at full speed) ends; the flag goes with a Normal Event.
        resources.patch_spec(KPR, "stall-report", {"execution": {"throttle": 50_000_000}})
        status = resources.wait_phase(KPR, "stall-report", "Succeeded", timeout=120)
        assert not status.get("stalledMoves")
        assert replicas_of(kafka_admin, topic_name)[0] == [victim]
        assert _condition(resources, "stall-report", "Stalled")["status"] == "False"
        assert _events(resources, "stall-report", "StallCleared")
        # Both throttles are taken back once the victim is back (it kept its rates while it was down).
        wait_for(lambda: not resources.status(KPR, "stall-report").get("throttle")
                 and not resources.status(KPR, "stall-cancel").get("throttle"), 90, "throttles taken back")
        assert broker_rate(kafka_admin, controller) is None and broker_rate(kafka_admin, victim) is None
