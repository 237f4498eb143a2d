"""PartitionReassignment's whole life cycle on the real cluster, one test per behaviour (issue 4).

Each test makes its own topic and namespace; moves that must stay in flight carry ~1.5 MB per partition under a
50 kB/s replication throttle, which the test removes when it wants them to finish.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
)
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KpTopicPartition

from e2e.kafka_support import (
    assert_replicas,
    create_topic,
    describe_only,
    replicas_of,
    wait_for,
    wait_for_new_controller,
)
from e2e.kube_support import Resources
from e2e.operator_support import OperatorProcess
from e2e.reassignment_support import KeyedProducer, fill, kafka, ongoing, read_log, spec_partitions, throttled
from kpo.domain.model import TopicPartition as TopicPartitionKey
from kpo_testbed import Testbed
from kpo_testbed.kafka import LIMITED_USER

KPR = "PartitionReassignment"
pytestmark = pytest.mark.usefixtures("kpo_operator")


def _reasons(resources: Resources, name: str) -> list[str]:
    return [e.reason for e in resources.events(name)]


def test_happy_path_12_partitions_while_producing(testbed: Testbed, kafka_admin: AdminClient,
                                                  bootstrap_servers: str, topic_name: str,
                                                  resources: Resources) -> None:
    brokers = [1, 2, 3]
    original = {p: [brokers[p % 3], brokers[(p + 1) % 3]] for p in range(12)}
    target = {p: [brokers[(p + 1) % 3], brokers[(p + 2) % 3]] for p in range(12)}
    create_topic(kafka_admin, topic_name, 12, assignment=[original[p] for p in range(12)])

    producer = KeyedProducer(bootstrap_servers, topic_name)
    producer.start()
    time.sleep(2)
    resources.create(KPR, "happy", {"partitions": spec_partitions(topic_name, target)})
    waited = subprocess.run(["kubectl", "wait", "--for=condition=Ready", "kpr/happy", "-n", resources.namespace,
                             "--timeout=180s"], env=testbed.env(), capture_output=True, text=True, check=False)
    assert waited.returncode == 0, waited.stderr
    # kubectl wait returned: the reassignment is done, in the CR and in Kafka.
    status = resources.status(KPR, "happy")
    assert status["phase"] == "Succeeded"
    assert status["progress"]["completed"] == 12
    assert status["observedGeneration"] == 1
    assert_replicas(kafka_admin, topic_name, target)
    assert ongoing(bootstrap_servers, topic_name) == {}
    time.sleep(2)
    delivered = producer.stop()
    assert len(delivered) > 500

    consumed = read_log(bootstrap_servers, topic_name, 12)
    assert len(consumed) == len(set(consumed)), "duplicates in the log"
    assert sorted(consumed, key=int) == sorted(delivered, key=int), "lost or extra messages"
    wait_for(lambda: _reasons(resources, "happy")[-1:] == ["Succeeded"], 20, "the Succeeded event, last")


@pytest.mark.parametrize(("case", "reason", "field"), [
    ("unknown-topic", "UnknownTopic", "spec.partitions[0].topic"),
    ("unknown-partition", "UnknownPartition", "spec.partitions[0].partition"),
    ("unknown-broker", "UnknownBroker", "spec.partitions[0].replicas"),
    ("below-min-isr", "BelowMinInsyncReplicas", "spec.partitions[0].replicas"),
    ("unknown-log-dir", "UnknownLogDir", "spec.partitions[0].logDirs"),
])
def test_invalid_spec_sends_nothing_to_kafka(kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str,
                                             resources: Resources, case: str, reason: str, field: str) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1, 2], [2, 3]], config={"min.insync.replicas": "2"})
    entry: dict[str, Any] = {"topic": topic_name, "partition": 0, "replicas": [2, 3]}
    if case == "unknown-topic":
        entry["topic"] = f"{topic_name}-missing"
    elif case == "unknown-partition":
        entry["partition"] = 7
    elif case == "unknown-broker":
        entry["replicas"] = [2, 9]
    elif case == "below-min-isr":
        entry["replicas"] = [3]  # a decrease too: acknowledged below, so that min.insync.replicas is what refuses it
    elif case == "unknown-log-dir":
        entry["logDirs"] = ["/no/such/dir", "any"]
    resources.create(KPR, case, {"partitions": [entry, {"topic": topic_name, "partition": 1, "replicas": [3, 1]}],
                                 "allowReplicationFactorDecrease": case == "below-min-isr"})
    if case == "unknown-topic":
        # A missing topic is waited for (kpo.domain.topic_wait, 30 s) before the spec is declared Invalid.
        waiting = resources.wait_waiting_for_topic(KPR, case)
        assert waiting.get("topicMissingSince"), waiting
    status = resources.wait_phase(KPR, case, "Invalid", timeout=90)
    assert "topicMissingSince" not in status
    ready = resources.condition(KPR, case, "Ready")
    stalled = resources.condition(KPR, case, "Stalled")
    assert ready is not None and ready["status"] == "False" and ready["reason"] == reason
    assert stalled is not None and stalled["status"] == "True"
    assert field in ready["message"]
    assert status["observedGeneration"] == 1
    wait_for(lambda: reason in _reasons(resources, case), 20, f"a {reason} event")
    # Nothing partially applied: not even the valid second entry was sent, and no rollback ConfigMap was written.
    time.sleep(3)
    assert_replicas(kafka_admin, topic_name, {0: [1, 2], 1: [2, 3]})
    assert ongoing(bootstrap_servers, topic_name) == {}
    assert resources.config_map(f"{case}-rollback") is None


def test_a_topic_created_after_its_reassignment_is_waited_for_and_moved(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources) -> None:
    """GitOps applies a topic and a reassignment of it together, in no particular order."""
    resources.create(KPR, "early", {"partitions": spec_partitions(topic_name, {0: [2, 3], 1: [3, 1]})})
    waiting = resources.wait_waiting_for_topic(KPR, "early")
    assert waiting.get("topicMissingSince"), waiting
    time.sleep(5)
    create_topic(kafka_admin, topic_name, 2, assignment=[[1, 2], [2, 3]])
    status = resources.wait_phase(KPR, "early", {"Succeeded", "Failed", "Invalid"}, timeout=90)
    assert status["phase"] == "Succeeded", status
    assert "topicMissingSince" not in status
    # Judged by Kafka: the replicas moved, nothing left in flight.
    assert_replicas(kafka_admin, topic_name, {0: [2, 3], 1: [3, 1]})
    assert ongoing(bootstrap_servers, topic_name) == {}
    reasons = _reasons(resources, "early")
    assert reasons.count("WaitingForTopic") == 1 and "UnknownTopic" not in reasons, reasons


def test_spec_change_mid_flight_retargets_cancels_and_leaves_the_rest(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 3, assignment=[[1], [2], [3]])
    fill(bootstrap_servers, topic_name, [0, 1, 2])
    with throttled(kafka_admin, topic_name):
        resources.create(KPR, "retarget", {"partitions": spec_partitions(topic_name, {0: [2], 1: [3], 2: [1]})})
        wait_for(lambda: len(ongoing(bootstrap_servers, topic_name)) == 3, 60, "three moves in flight")
        assert ongoing(bootstrap_servers, topic_name)[0].adding == (2,)
        # p0 re-targeted [2] -> [3]; p1 dropped from the spec; p2 unchanged.
        resources.patch_spec(KPR, "retarget", {"partitions": spec_partitions(topic_name, {0: [3], 2: [1]})})

        def changed() -> bool:
            now = ongoing(bootstrap_servers, topic_name)
            return 0 in now and now[0].target == (3,) and 1 not in now

        wait_for(changed, 60, "p0 re-targeted to [3] and p1 cancelled")
        moving = ongoing(bootstrap_servers, topic_name)
        assert 2 not in moving[0].replicas, "broker 2 (old target only) must not linger"
        assert moving[2].target == (1,)
        assert replicas_of(kafka_admin, topic_name)[1] == [2]
        status = resources.status(KPR, "retarget")
        assert status["observedGeneration"] == 2
        assert {(e["partition"], tuple(e["replicas"])) for e in status["inFlight"]} == {(0, (3,)), (2, (1,))}
    resources.wait_phase(KPR, "retarget", "Succeeded", timeout=120)
    assert_replicas(kafka_admin, topic_name, {0: [3], 1: [2], 2: [1]})
    assert ongoing(bootstrap_servers, topic_name) == {}


def test_stop_cancels_in_flight_and_keeps_completed(testbed: Testbed, kafka_admin: AdminClient,
                                                    bootstrap_servers: str, topic_name: str,
                                                    resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 3, assignment=[[1], [2], [3]])
    fill(bootstrap_servers, topic_name, [1, 2])  # p0 stays empty: it completes at once
    with throttled(kafka_admin, topic_name):
        resources.create(KPR, "stopme", {"partitions": spec_partitions(topic_name, {0: [2], 1: [3], 2: [1]})})
        wait_for(lambda: resources.status(KPR, "stopme").get("progress", {}).get("completed") == 1, 60,
                 "p0 to complete while p1 and p2 are in flight")
        assert set(ongoing(bootstrap_servers, topic_name)) == {1, 2}
        # Not done, so kubectl wait must not return Ready.
        waited = subprocess.run(["kubectl", "wait", "--for=condition=Ready", "kpr/stopme", "-n",
                                 resources.namespace, "--timeout=3s"], env=testbed.env(), capture_output=True,
                                text=True, check=False)
        assert waited.returncode != 0
        resources.patch_spec(KPR, "stopme", {"stop": True})
        status = resources.wait_phase(KPR, "stopme", "Stopped", timeout=60)
        assert ongoing(bootstrap_servers, topic_name) == {}
        assert_replicas(kafka_admin, topic_name, {0: [2], 1: [2], 2: [3]})
        assert status["inFlight"] == []
        ready = resources.condition(KPR, "stopme", "Ready")
        assert ready is not None and ready["status"] == "False"


@pytest.mark.parametrize("policy", ["Cancel", "Orphan"])
def test_delete_while_running(kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str,
                              resources: Resources, policy: str) -> None:
    create_topic(kafka_admin, topic_name, 1, assignment=[[1]])
    fill(bootstrap_servers, topic_name, [0])
    name = f"delete-{policy.lower()}"
    with throttled(kafka_admin, topic_name):
        resources.create(KPR, name, {"partitions": spec_partitions(topic_name, {0: [2]}), "deletionPolicy": policy})
        wait_for(lambda: 0 in ongoing(bootstrap_servers, topic_name), 60, "the move to be in flight")
        resources.delete(KPR, name)
        wait_for(lambda: not resources.exists(KPR, name), 60, "the resource to be gone")
        if policy == "Cancel":
            assert ongoing(bootstrap_servers, topic_name) == {}
            assert_replicas(kafka_admin, topic_name, {0: [1]})
        else:
            assert ongoing(bootstrap_servers, topic_name)[0].target == (2,)
    if policy == "Orphan":
        wait_for(lambda: replicas_of(kafka_admin, topic_name) == {0: [2]}, 90, "the orphaned move to finish")


def test_conflict_between_two_resources_waits_for_the_older(kafka_admin: AdminClient, bootstrap_servers: str,
                                                           topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 1, assignment=[[1]])
    fill(bootstrap_servers, topic_name, [0])
    with throttled(kafka_admin, topic_name):
        resources.create(KPR, "first", {"partitions": spec_partitions(topic_name, {0: [2]})})
        wait_for(lambda: 0 in ongoing(bootstrap_servers, topic_name), 60, "first's move in flight")
        resources.create(KPR, "second", {"partitions": spec_partitions(topic_name, {0: [3]})})
        wait_for(lambda: resources.status(KPR, "second").get("conflicts"), 30, "second to report the conflict")
        status = resources.status(KPR, "second")
        assert status["phase"] == "Pending"
        assert status["conflicts"] == [{"topic": topic_name, "partition": 0,
                                        "holder": f"{resources.namespace}/first"}]
        stalled = resources.condition(KPR, "second", "Stalled")
        assert stalled is not None and stalled["status"] == "True" and stalled["reason"] == "Conflict"
        assert f"{resources.namespace}/first" in stalled["message"]
        resources.wait_event("second", "Conflict")
        time.sleep(3)
        assert ongoing(bootstrap_servers, topic_name)[0].target == (2,), "first's move must not be overridden"
    resources.wait_phase(KPR, "first", "Succeeded", timeout=120)
    resources.wait_phase(KPR, "second", "Succeeded", timeout=120)
    assert_replicas(kafka_admin, topic_name, {0: [3]})


def test_conflict_with_a_reassignment_kpo_did_not_start(kafka_admin: AdminClient, bootstrap_servers: str,
                                                        topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 1, assignment=[[1]])
    fill(bootstrap_servers, topic_name, [0])
    outsider = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        with throttled(kafka_admin, topic_name):
            tp = KpTopicPartition(topic_name, 0)
            assert outsider.alter_partition_reassignments({tp: [2]}) == {tp: None}
            resources.create(KPR, "latecomer", {"partitions": spec_partitions(topic_name, {0: [3]})})
            wait_for(lambda: resources.status(KPR, "latecomer").get("conflicts"), 30, "the external conflict")
            status = resources.status(KPR, "latecomer")
            assert status["conflicts"] == [{"topic": topic_name, "partition": 0, "holder": "external"}]
            assert status["phase"] == "Pending"
            time.sleep(3)
            assert ongoing(bootstrap_servers, topic_name)[0].target == (2,), "never override someone else's move"
            assert outsider.alter_partition_reassignments({tp: None}) == {tp: None}
        resources.wait_phase(KPR, "latecomer", "Succeeded", timeout=120)
        assert_replicas(kafka_admin, topic_name, {0: [3]})
    finally:
        outsider.close()


def test_sigkill_mid_flight_resumes_without_resubmitting(kafka_admin: AdminClient, bootstrap_servers: str,
                                                         topic_name: str, resources: Resources,
                                                         kpo_operator: OperatorProcess) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1], [2]])
    fill(bootstrap_servers, topic_name, [0, 1])
    try:
        with throttled(kafka_admin, topic_name):
            resources.create(KPR, "survivor", {"partitions": spec_partitions(topic_name, {0: [3], 1: [3]})})
            wait_for(lambda: len(resources.status(KPR, "survivor").get("inFlight", [])) == 2, 60,
                     "both moves recorded in flight")
            before = ongoing(bootstrap_servers, topic_name)
            kpo_operator.kill()
            time.sleep(2)
            assert ongoing(bootstrap_servers, topic_name) == before, "Kafka goes on without the operator"
            kpo_operator.start()
            time.sleep(6)  # several ticks of the restarted operator while the moves are still throttled
            log = kpo_operator.log_since_last_start()
            assert "submitting" not in log, f"the restarted operator re-submitted moves:\n{log[-3000:]}"
            assert resources.status(KPR, "survivor")["phase"] == "Executing"
    finally:
        if kpo_operator.proc is None or kpo_operator.proc.poll() is not None:
            kpo_operator.start()
    status = resources.wait_phase(KPR, "survivor", "Succeeded", timeout=120)
    assert status["progress"]["completed"] == 2
    assert_replicas(kafka_admin, topic_name, {0: [3], 1: [3]})
    transitions = [e.message for e in resources.events("survivor") if "->" in e.message]
    assert sum("Pending -> Executing" in m for m in transitions) == 1, transitions


def test_rollback_configmap_restores_the_original_placement(testbed: Testbed, kafka_admin: AdminClient,
                                                            bootstrap_servers: str, topic_name: str,
                                                            resources: Resources) -> None:
    original = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    create_topic(kafka_admin, topic_name, 3, assignment=[original[p] for p in range(3)])
    resources.create(KPR, "forward", {"partitions": spec_partitions(topic_name, {0: [3, 2], 1: [1, 3], 2: [2, 1]})})
    status = resources.wait_phase(KPR, "forward", "Succeeded", timeout=90)
    cm = resources.config_map(status["rollbackConfigMap"])
    assert cm is not None
    document = json.loads(cm["rollback.json"])
    assert document["version"] == 1
    assert {e["partition"]: e["replicas"] for e in document["partitions"]} == original

    # The same JSON, pasted into a new PartitionReassignment, puts everything back.
    entries = [{"topic": e["topic"], "partition": e["partition"], "replicas": e["replicas"]}
               for e in document["partitions"]]
    resources.create(KPR, "back", {"partitions": entries})
    resources.wait_phase(KPR, "back", "Succeeded", timeout=90)
    assert_replicas(kafka_admin, topic_name, original)
    # And kafka-reassign-partitions itself reads it as it is.
    verified = testbed.state.kafka.run_tool(
        "org.apache.kafka.tools.reassign.ReassignPartitionsCommand", "--bootstrap-server", bootstrap_servers,
        "--reassignment-json-file", _write(testbed, document), "--verify")
    assert verified.count("is completed") == 3, verified


def _write(testbed: Testbed, document: dict[str, Any]) -> str:
    path = testbed.state_dir / f"rollback-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(document))
    return str(path)


def test_kafka_refusal_surfaces_as_failed(kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str,
                                          resources: Resources) -> None:
    """The "limited" cluster connects over SASL/SCRAM (password from a Secret) as a user that may describe the
    cluster and its topics but not alter it: validation passes, Kafka refuses the move, and kpo says so."""
    create_topic(kafka_admin, topic_name, 1, assignment=[[1, 2]])
    with describe_only(kafka_admin, f"User:{LIMITED_USER}", topic_name):
        resources.create(KPR, "refused", {"clusterRef": "limited",
                                          "partitions": spec_partitions(topic_name, {0: [2, 3]})})
        status = resources.wait_phase(KPR, "refused", {"Failed", "Invalid", "Succeeded"}, timeout=90)
        assert status["phase"] == "Failed", status
        assert status["failures"] == [{"topic": topic_name, "partition": 0, "reason": "CLUSTER_AUTHORIZATION_FAILED",
                                       "message": status["failures"][0]["message"]}]
        assert "ALTER" in status["failures"][0]["message"]
        ready = resources.condition(KPR, "refused", "Ready")
        stalled = resources.condition(KPR, "refused", "Stalled")
        assert ready is not None and ready["status"] == "False" and ready["reason"] == "NotAuthorized"
        assert "CLUSTER_AUTHORIZATION_FAILED" in ready["message"]
        assert stalled is not None and stalled["status"] == "True"
        resources.wait_event("refused", "NotAuthorized")
        assert_replicas(kafka_admin, topic_name, {0: [1, 2]})
        assert ongoing(bootstrap_servers, topic_name) == {}


def test_log_dirs_are_honoured(testbed: Testbed, kafka_admin: AdminClient, bootstrap_servers: str,
                               topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1], [1]])
    fill(bootstrap_servers, topic_name, [0, 1], messages=20)
    adapter = kafka(bootstrap_servers)
    current = adapter.log_dirs([topic_name], adapter.brokers()).replica_dirs
    dirs1 = [str(d) for d in testbed.state.kafka.log_dirs(1)]
    dirs2 = [str(d) for d in testbed.state.kafka.log_dirs(2)]
    tp0, tp1 = TopicPartitionKey(topic_name, 0), TopicPartitionKey(topic_name, 1)
    # p0 stays on broker 1 but changes dir; p1 moves to broker 2, into a named dir.
    other_dir = next(d for d in dirs1 if d != current[(tp0, 1)])
    resources.create(KPR, "dirs", {"partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [1], "logDirs": [other_dir]},
        {"topic": topic_name, "partition": 1, "replicas": [2], "logDirs": [dirs2[1]]},
    ]})
    resources.wait_phase(KPR, "dirs", "Succeeded", timeout=120)
    report = adapter.log_dirs([topic_name], adapter.brokers())
    current, future = report.replica_dirs, report.future_dirs
    assert current[(tp0, 1)] == other_dir
    assert current[(tp1, 2)] == dirs2[1]
    assert future == {}
    assert_replicas(kafka_admin, topic_name, {0: [1], 1: [2]})


def test_killing_the_active_controller_mid_flight_is_survived(testbed: Testbed, kafka_admin: AdminClient,
                                                              bootstrap_servers: str, topic_name: str,
                                                              resources: Resources) -> None:
    """Transient Kafka errors (the controller gone, requests timing out) are retried, never reported as failure."""
    controller = testbed.active_controller()
    others = [b for b in (1, 2, 3) if b != controller]
    create_topic(kafka_admin, topic_name, 1, assignment=[[others[0]]])
    fill(bootstrap_servers, topic_name, [0])
    with throttled(kafka_admin, topic_name, rate=200_000):
        try:
            resources.create(KPR, "controller-loss", {"partitions": spec_partitions(topic_name, {0: [others[1]]})})
            wait_for(lambda: resources.status(KPR, "controller-loss").get("inFlight"), 60, "the move in flight")
            testbed.kill_node(controller)

            wait_for_new_controller(testbed, controller)
            status = resources.wait_phase(KPR, "controller-loss", {"Succeeded", "Failed"}, timeout=120)
        finally:
            testbed.start_node(controller)
    assert status["phase"] == "Succeeded", status
    assert_replicas(kafka_admin, topic_name, {0: [others[1]]})
