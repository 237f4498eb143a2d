"""Size and resource bounds (issue 12) on the real test bed: user-supplied numbers cost the operator no memory in
proportion to them, messages and status stay within the API's limits, and a status the API server would refuse
still ends in a visible condition and Event.

Every test also reads the operator's peak resident set (VmHWM) and requires it to stay under 400 MB: the operator
of the session is shared, so the figure covers every test that ran before in the same session too.
"""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kubernetes.client.exceptions import ApiException

from e2e.kafka_support import create_topic, replicas_of
from e2e.kube_support import Resources, wait_until
from e2e.operator_support import OperatorProcess
from kpo.api.partition_reassignment import MAX_EXPLICIT_PARTITIONS
from kpo.api.topic_partition_count import MAX_NEW_PARTITIONS, MAX_TOPIC_PARTITIONS
from kpo.domain.keyremap import remapped_fraction
from kpo.resources.shell import OBJECT_BUDGET_BYTES
from kpo_testbed import Testbed

KPR = "PartitionReassignment"
KTPC = "TopicPartitionCount"
RSS_LIMIT = 400 * 1024 * 1024
CONDITION_MESSAGE_LIMIT = 32768
log = logging.getLogger(__name__)
pytestmark = pytest.mark.usefixtures("kpo_operator")


def _assert_rss_bounded(operator: OperatorProcess) -> None:
    peak = operator.peak_rss_bytes()
    log.warning("operator peak RSS (VmHWM): %.1f MB", peak / 2**20)
    print(f"operator peak RSS (VmHWM): {peak / 2**20:.1f} MB")
    assert peak < RSS_LIMIT, f"operator peak RSS {peak / 2**20:.1f} MB"


def _kpo_annotations(obj: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in (obj["metadata"].get("annotations") or {}).items() if k.startswith("kpo.dev/")}


def _conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions") or []}


def _entries(topic: str, count: int) -> list[dict[str, Any]]:
    return [{"topic": topic, "partition": p, "replicas": [1, 2, 3]} for p in range(count)]


@pytest.mark.parametrize("partitions", [20_000_001, 2**31 - 1])
def test_a_partition_count_no_client_can_send_is_refused_at_admission(resources: Resources, topic_name: str,
                                                                      partitions: int) -> None:
    with pytest.raises(ApiException) as refused:
        resources.create(KTPC, "huge", {"topic": topic_name, "partitions": partitions})
    assert refused.value.status == 422
    body = str(refused.value.body)
    assert "spec.partitions" in body and str(MAX_TOPIC_PARTITIONS) in body


def test_more_new_partitions_than_kafka_adds_per_request_is_invalid_and_costs_no_memory(
        kafka_admin: AdminClient, topic_name: str, resources: Resources, kpo_operator: OperatorProcess) -> None:
    create_topic(kafka_admin, topic_name, 6)
    resources.create(KTPC, "too-many", {"topic": topic_name, "partitions": MAX_TOPIC_PARTITIONS,
                                        "keyOrdering": {"policy": "Allow", "sampleMessages": 100_000_000}})
    status = resources.wait_phase(KTPC, "too-many", {"Invalid", "Failed", "Growing", "Succeeded"}, timeout=60)
    assert status["phase"] == "Invalid", status
    stalled = _conditions(status)["Stalled"]
    assert stalled["status"] == "True" and stalled["reason"] == "TooManyNewPartitions"
    assert f"at most {6 + MAX_NEW_PARTITIONS}" in stalled["message"]
    remap = status["keyRemap"]
    assert (remap["fromPartitions"], remap["toPartitions"]) == (6, MAX_TOPIC_PARTITIONS)
    moved = remapped_fraction(6, MAX_TOPIC_PARTITIONS)
    assert remap["movedKeySpace"] == f"{moved.numerator}/{moved.denominator}" and len(remap["sources"]) == 64
    resources.wait_event("too-many", "TooManyNewPartitions")
    assert len(replicas_of(kafka_admin, topic_name)) == 6, "nothing may be sent to Kafka"
    _assert_rss_bounded(kpo_operator)


def test_the_most_entries_are_handled_with_bounded_message_status_and_bookkeeping(
        resources: Resources, topic_name: str, kpo_operator: OperatorProcess, testbed: Testbed,
        tmp_path: Path) -> None:
    # Every entry names a topic that does not exist: Invalid with one problem per entry, nothing sent to Kafka.
    # Applied as docs/api.md recommends, with server-side apply: its managedFields once took 110 bytes per entry and
    # 10,000 entries did not fit etcd (issue 26 C); the target list is atomic now, one line of managedFields.
    manifest = tmp_path / "most.yaml"
    manifest.write_text(json.dumps({
        "apiVersion": "kpo.dev/v1alpha1", "kind": KPR, "metadata": {"name": "most", "namespace": resources.namespace},
        "spec": {"partitions": _entries(topic_name, MAX_EXPLICIT_PARTITIONS)}}))
    apply = ["kubectl", "apply", "--server-side", "--field-manager=gitops", "-f", str(manifest)]
    done = subprocess.run(apply, env=testbed.env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    # Missing topics are waited for 30 s (Pending, WaitingForTopic) before the spec is Invalid.
    status = resources.wait_phase(KPR, "most", {"Invalid", "Executing", "Failed"}, timeout=240)
    assert status["phase"] == "Invalid", status
    stalled = _conditions(status)["Stalled"]
    assert stalled["reason"] == "UnknownTopic"
    assert len(stalled["message"]) < 16_384
    assert f"and {MAX_EXPLICIT_PARTITIONS - 20} more problem(s)" in stalled["message"]
    assert f"{MAX_EXPLICIT_PARTITIONS} in all" in stalled["message"]
    # Kopf's bookkeeping is a digest, not a copy of the 10000 entries (a copy passed the 256 KiB annotation limit).
    obj = wait_until(lambda: (found := resources.get(KPR, "most")) and
                     "kpo.dev/last-handled-digest" in _kpo_annotations(found) and found, 60, "Kopf's diff base")
    assert sum(len(k) + len(v) for k, v in _kpo_annotations(obj).items()) < 1024, _kpo_annotations(obj)
    events = resources.wait_event("most", "UnknownTopic")
    assert events and all(len(e.message) <= 1024 for e in events)
    # A GitOps re-apply of the same manifest, with kpo's status on the object now, still fits.
    again = subprocess.run([*apply, "--force-conflicts"], env=testbed.env(), capture_output=True, text=True,
                           timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    _assert_rss_bounded(kpo_operator)


def test_more_entries_than_the_limit_are_refused_at_admission(resources: Resources, topic_name: str) -> None:
    with pytest.raises(ApiException) as refused:
        resources.create(KPR, "too-many", {"partitions": _entries(topic_name, MAX_EXPLICIT_PARTITIONS + 1)})
    assert refused.value.status == 422
    body = str(refused.value.body)
    assert "spec.partitions" in body and f"at most {MAX_EXPLICIT_PARTITIONS}" in body


def test_a_status_the_api_server_would_refuse_ends_in_a_condition_and_an_event(
        resources: Resources, kpo_operator: OperatorProcess) -> None:
    # A spec just inside one etcd write (a few kB under kpo's budget, so the API server takes it): its Invalid
    # status (conditions naming 20 problems of 150 bytes) would push the object over. kpo writes the small part of
    # the status instead and says so.
    topic = "x" * 101
    per_entry = len(json.dumps(_entries(topic, 10_000)[-1], separators=(",", ":"))) + 1
    count = (OBJECT_BUDGET_BYTES - 2_500) // per_entry
    spec = {"partitions": _entries(topic, count)}
    assert OBJECT_BUDGET_BYTES - 4_000 < len(json.dumps(spec, separators=(",", ":"))) < OBJECT_BUDGET_BYTES - 1_000
    resources.create(KPR, "edge", spec)
    # Its topic does not exist: waited for 30 s (Pending, WaitingForTopic; that status is too large as well, and the
    # fallback keeps topicMissingSince, so the wait ends), then Invalid.
    status = resources.wait_phase(KPR, "edge", {"Invalid", "Executing", "Failed"}, timeout=240)
    assert status["phase"] == "Invalid", status
    stalled = _conditions(status)["Stalled"]
    assert stalled["reason"] == "StatusRefused" and "bytes" in stalled["message"], stalled
    # Kopf posts Events from a queue, a moment after the status is written (a CI run read none right at Invalid).
    wait_until(lambda: "StatusRefused" in [e.reason for e in resources.events("edge")], 30, "the StatusRefused Event")
    # Said once, not on every tick of the wait (kpo's Events are counted by Kubernetes: count 1).
    refused = [e for e in resources.events("edge") if e.reason == "StatusRefused"]
    assert len(refused) == 1 and (refused[0].count or 1) == 1, refused
    _assert_rss_bounded(kpo_operator)


def test_a_resource_whose_annotations_fill_the_limit_is_handled_and_let_go(
        resources: Resources, kafka_admin: AdminClient, topic_name: str, kpo_operator: OperatorProcess) -> None:
    """One user annotation of 262,118 bytes leaves 26 of the API server's 262,144: no kpo annotation fits. kpo keeps
    none, says so at most once, carries the move out and lets go of the resource on deletion (issue 26 D: it was
    never let go, with a traceback per attempt)."""
    create_topic(kafka_admin, topic_name, 1, assignment=[[1]])
    name = "full-annotations"
    body = {"apiVersion": "kpo.dev/v1alpha1", "kind": KPR,
            "metadata": {"name": name, "annotations": {"big": "x" * 262_118}},
            "spec": {"partitions": [{"topic": topic_name, "partition": 0, "replicas": [2]}]}}
    resources.custom.create_namespaced_custom_object("kpo.dev", "v1alpha1", resources.namespace,
                                                     "partitionreassignments", body)
    resources.wait_phase(KPR, name, "Succeeded", timeout=90)
    wait_until(lambda: replicas_of(kafka_admin, topic_name) == {0: [2]}, 30, "Kafka to show the move")
    assert _kpo_annotations(resources.get(KPR, name)) == {}
    resources.delete(KPR, name)
    wait_until(lambda: not resources.exists(KPR, name), 30, "the finalizer to be let go")
    said = [line for line in kpo_operator.log_text().splitlines() if f"{resources.namespace}/{name}" in line]
    # Said at most once (only when Kopf had something to write), never a refused patch.
    assert sum("leave no room for kpo's bookkeeping" in line for line in said) <= 1, said
    assert "Too long: may not be more than 262144 bytes" not in kpo_operator.log_text()
