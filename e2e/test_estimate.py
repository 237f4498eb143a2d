"""The estimate before executing, on the real cluster (issue 16, and issue 26 item 4): a generated plan's proposal
states how long its moves should take at the resource's throttle, the bytes over the throttle beside it, and whether
Kafka's windowed quota will likely let the moves through sooner; the finished resource sets the estimate against how
long the moves took (status.duration).

The test times the moves itself, from what Kafka shows: from the first moment ListPartitionReassignments lists a
partition of the topic until DescribeTopics shows every partition off the drained broker."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from e2e.kafka_support import create_topic, replicas_of
from e2e.kube_support import Resources
from e2e.reassignment_support import fill, ongoing

KPR = "PartitionReassignment"
pytestmark = pytest.mark.usefixtures("kpo_operator")


def propose(resources: Resources, name: str, topic: str, throttle: int) -> dict[str, Any]:
    resources.create(KPR, name, {"plan": {"goal": "RemoveBrokers", "brokers": [3], "topics": [topic]},
                                 "execution": {"throttle": throttle}})
    status = resources.wait_phase(KPR, name, {"Proposed", "Failed", "Invalid"}, timeout=240)
    assert status["phase"] == "Proposed", status
    proposal: dict[str, Any] = status["proposal"]
    return proposal


def approve_and_time(kafka_admin: AdminClient, bootstrap_servers: str, resources: Resources, name: str, topic: str,
                     proposal: dict[str, Any], timeout: float = 240) -> float:
    """Approve, and return the seconds Kafka took: from the first listed move to every partition off broker 3."""
    resources.patch_spec(KPR, name, {"approval": {"proposalId": proposal["id"]}})
    deadline = time.monotonic() + timeout
    began = None
    while time.monotonic() < deadline:
        now = time.monotonic()
        if began is None and ongoing(bootstrap_servers, topic):
            began = now
        if began is not None and all(3 not in r for r in replicas_of(kafka_admin, topic).values()):
            return now - began
        time.sleep(0.2)
    raise AssertionError(f"the moves of {topic} did not end within {timeout} s")


def test_a_move_whose_fetches_stay_within_the_quota_window_takes_about_its_estimate(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources) -> None:
    # One 4.5 MB partition at 300 kB/s: a fetch carries at most 1 MiB of it, less than the 3.3 MB the quota passes
    # in its 11 s window, so Kafka holds the move to the rate: about 15 s.
    throttle = 300_000
    create_topic(kafka_admin, topic_name, 1, assignment=[[3]])
    fill(bootstrap_servers, topic_name, [0], messages=450)
    proposal = propose(resources, "steady", topic_name, throttle)
    moved = proposal["bytesToMove"]
    assert moved > 4_000_000, proposal
    assert abs(proposal["estimateAtThrottleSeconds"] - moved / throttle) <= 1, proposal
    assert proposal["estimatedSeconds"] >= proposal["estimateAtThrottleSeconds"] > 0, proposal
    assert f"{throttle} B/s" in proposal["estimateNote"] and "sooner" not in proposal["estimateNote"], proposal

    took = approve_and_time(kafka_admin, bootstrap_servers, resources, "steady", topic_name, proposal)
    status = resources.wait_phase(KPR, "steady", {"Succeeded", "Failed"}, timeout=60)
    assert status["phase"] == "Succeeded", status
    print(f"one 4.5 MB partition at {throttle} B/s: estimate {proposal['estimatedSeconds']} s, "
          f"{proposal['estimateAtThrottleSeconds']} s at the throttle, Kafka took {took:.1f} s")
    assert 0.8 * proposal["estimateAtThrottleSeconds"] <= took <= 1.5 * proposal["estimatedSeconds"] + 5
    duration = status["duration"]
    assert duration["estimatedSeconds"] == proposal["estimatedSeconds"], duration
    # kpo counts from its submission to the poll (1 s here) that saw the end.
    assert took - 3 <= duration["tookSeconds"] <= took + 5, (duration, took)
    assert f"took {duration['tookSeconds']} s" in duration["summary"]


def test_many_partitions_in_flight_beat_the_throttle_and_the_proposal_says_so(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources) -> None:
    # Issue 26, item 4: twelve 1.5 MB partitions drained from broker 3 at 150 kB/s. With five moves in flight per
    # broker (the operator's default), a round of fetches takes 5 MiB out of broker 3, three times what its quota
    # passes in the window (1.65 MB): the quota forgets the excess, and the moves end well before the 120 s of
    # bytes over the throttle (85.6 s when the issue was filed).
    throttle = 150_000
    create_topic(kafka_admin, topic_name, 12, assignment=[[3]] * 12)
    fill(bootstrap_servers, topic_name, list(range(12)))
    proposal = propose(resources, "bursty", topic_name, throttle)
    at_throttle = proposal["estimateAtThrottleSeconds"]
    assert abs(at_throttle - proposal["bytesToMove"] / throttle) <= 1, proposal
    note = proposal["estimateNote"]
    assert "Kafka will likely finish sooner" in note and "broker 3 sends" in note, note

    took = approve_and_time(kafka_admin, bootstrap_servers, resources, "bursty", topic_name, proposal)
    status = resources.wait_phase(KPR, "bursty", {"Succeeded", "Failed"}, timeout=60)
    assert status["phase"] == "Succeeded", status
    print(f"twelve 1.5 MB partitions at {throttle} B/s: estimate {proposal['estimatedSeconds']} s, "
          f"{at_throttle} s at the throttle, Kafka took {took:.1f} s")
    assert took < 0.9 * at_throttle, "bytes over the throttle is no bound, and the docs do not claim it"
    duration = status["duration"]
    assert duration["estimatedSeconds"] == proposal["estimatedSeconds"], duration
    assert took - 3 <= duration["tookSeconds"] <= took + 5, (duration, took)
    assert "replication quota" in duration["summary"], duration
