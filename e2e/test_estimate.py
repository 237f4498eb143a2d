"""The estimate before executing, on the real cluster (issue 16): a generated plan's proposal states how long its moves
should take at the resource's throttle (and the floor from the bytes alone), and the finished resource shows how
long they took."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from e2e.kafka_support import create_topic, replicas_of
from e2e.kube_support import Resources
from e2e.reassignment_support import fill

KPR = "PartitionReassignment"
pytestmark = pytest.mark.usefixtures("kpo_operator")
THROTTLE = 1024 * 1024  # bytes/s: ~1.5 MB per partition takes seconds, not milliseconds


def test_a_proposal_states_its_duration_and_the_result_its_actual(kafka_admin: AdminClient, bootstrap_servers: str,
                                                                 topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 4, assignment=[[3], [3], [1], [2]])
    fill(bootstrap_servers, topic_name, [0, 1])
    resources.create(KPR, "timed", {"plan": {"goal": "RemoveBrokers", "brokers": [3], "topics": [topic_name]},
                                    "execution": {"throttle": THROTTLE}})
    status = resources.wait_phase(KPR, "timed", {"Proposed", "Failed", "Invalid"}, timeout=240)
    assert status["phase"] == "Proposed", status
    proposal = status["proposal"]
    moved = proposal["bytesToMove"]
    assert moved > 2 * 1_000_000, proposal
    # Broker 3 sends both partitions: the floor is its bytes over the throttle, and the estimate is no less.
    assert abs(proposal["estimateFloorSeconds"] - moved / THROTTLE) <= 1, proposal
    assert proposal["estimatedSeconds"] >= proposal["estimateFloorSeconds"] > 0, proposal
    assert f"{THROTTLE} B/s" in proposal["estimateNote"]

    resources.patch_spec(KPR, "timed", {"approval": {"proposalId": proposal["id"]}})
    status = resources.wait_phase(KPR, "timed", {"Succeeded", "Failed"}, timeout=180)
    assert status["phase"] == "Succeeded", status
    assert all(3 not in r for r in replicas_of(kafka_admin, topic_name).values())
    elapsed = status["progress"]["elapsedSeconds"]
    # Kafka's throttle lets a fetch of up to replica.fetch.max.bytes (1 MiB) through before it holds back, so small
    # partitions copy somewhat faster than the rate; kpo notices the end at a poll. The estimate stays in view.
    assert elapsed > 0, status["progress"]
    assert status["proposal"]["estimatedSeconds"] == proposal["estimatedSeconds"], "the estimate stays to compare"
