"""kpo on brokers older than KIP-827 (issue 30, "capacity unknown (older brokers)"): a cluster of this module's own on
Kafka 3.2 (``KAFKA_OLD_VERSION``), whose DescribeLogDirs (v3) reports no dir's total or usable bytes. RelieveCapacity
judges every dir by them, so kpo must refuse it before any job runs — Invalid, reason CapacityUnknown, naming the dirs
and the brokers, one Warning Event, nothing started on Kafka — while what needs no capacity still works there: an
explicit move ends Succeeded with the replicas Kafka lists and no throttle left. That last part found a bug: a 3.2
broker acknowledged the DELETE of its throttle rates and kept them, and kpo, trusting the acknowledgement, cleared
its journal (3 runs of 3); kpo now reads each entity back and removes again what Kafka still shows. Judged with
Kafka's view: DescribeLogDirs, DescribeTopics, ListPartitionReassignments, DescribeConfigs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kubernetes import client

from e2e.kafka_support import assert_replicas, broker_rate, create_topic, replicas_of, wait_for
from e2e.kube_support import Resources
from e2e.own_cluster_support import KPR, OldKafkaCluster, cluster_of_release, operator_for
from e2e.reassignment_support import fill
from kpo_testbed import Testbed

PREFIX = f"e2e-old-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def old_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OldKafkaCluster]:
    with cluster_of_release(tmp_path_factory.mktemp("kafka-old"), "KAFKA_OLD_VERSION", OldKafkaCluster) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def old_resources(kpo_crds: None, testbed: Testbed, api_client: client.ApiClient, old_kafka: OldKafkaCluster,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Resources]:
    with operator_for(api_client, testbed.state.kube.kubeconfig, old_kafka.bootstrap_servers, PREFIX,
                      tmp_path_factory.mktemp("old-operator")) as resources:
        yield resources


@pytest.fixture
def old_admin(old_kafka: OldKafkaCluster) -> Iterator[tuple[AdminClient, KafkaAdminClient]]:
    kp = KafkaAdminClient(bootstrap_servers=old_kafka.bootstrap_servers.split(","))
    try:
        yield AdminClient({"bootstrap.servers": old_kafka.bootstrap_servers}), kp
    finally:
        kp.close()


def test_relieve_capacity_on_brokers_that_report_no_capacity_is_refused_naming_the_dirs(
        old_kafka: OldKafkaCluster, old_resources: Resources, old_admin: tuple[AdminClient, KafkaAdminClient],
        topic_name: str) -> None:
    admin, kp = old_admin
    create_topic(admin, topic_name, 3, assignment=[[1], [2], [3]])
    fill(old_kafka.bootstrap_servers, topic_name, [0, 1, 2], messages=20)
    # Kafka's view first: the brokers answer DescribeLogDirs, with dirs but no capacity in them.
    answers = kp.describe_log_dirs([topic_name], brokers=[1, 2, 3])
    dirs = [d for answer in answers for d in answer["log_dirs"]]
    assert len(dirs) == 3 and not any("total_bytes" in d or "usable_bytes" in d for d in dirs), dirs

    old_resources.create(KPR, "relieve-old", {"plan": {"goal": "RelieveCapacity", "threshold": 0.8,
                                                       "topics": [topic_name]}})
    status = old_resources.wait_phase(KPR, "relieve-old", {"Invalid", "Planning", "Proposed", "Failed"}, timeout=60)
    assert status["phase"] == "Invalid", status
    ready = old_resources.condition(KPR, "relieve-old", "Ready")
    assert ready is not None and ready["reason"] == "CapacityUnknown", ready
    named = ", ".join(f"{old_kafka.log_dirs(b)[0]} of broker {b}" for b in (1, 2, 3))
    assert (f"log dir(s) {named} report no capacity (DescribeLogDirs total and usable bytes, KIP-827: Kafka 3.3 or "
            f"later; broker(s) [1, 2, 3])") in ready["message"], ready
    assert "goal RelieveCapacity cannot tell how full their dirs are" in ready["message"], ready
    warnings = [e.reason for e in old_resources.events("relieve-old") if e.type == "Warning"]
    assert warnings == ["CapacityUnknown"], warnings
    assert not status.get("proposal"), status
    # Nothing started on Kafka: no move, no throttle, the replicas where they were.
    assert not kp.list_partition_reassignments()
    assert all(broker_rate(admin, b) is None for b in (1, 2, 3))
    assert replicas_of(admin, topic_name) == {0: [1], 1: [2], 2: [3]}


def test_an_explicit_move_still_works_on_those_brokers(
        old_kafka: OldKafkaCluster, old_resources: Resources, old_admin: tuple[AdminClient, KafkaAdminClient],
        topic_name: str) -> None:
    admin, kp = old_admin
    create_topic(admin, topic_name, 1, assignment=[[1]])
    fill(old_kafka.bootstrap_servers, topic_name, [0], messages=50)
    # A 3.2 broker learns of a new topic some time after its controller (seconds on a loaded machine), and the
    # operator's look may ask any of them: the resource waits for a topic it does not see yet (WaitingForTopic, up to
    # 30 s) instead of being Invalid for good, so the test applies it at once, as a script or GitOps would.
    old_resources.create(KPR, "move-old", {"partitions": [{"topic": topic_name, "partition": 0, "replicas": [2, 3]}],
                                           "execution": {"throttle": 10_000_000}})
    status = old_resources.wait_phase(KPR, "move-old", {"Succeeded", "Failed", "Invalid"}, timeout=90)
    assert status["phase"] == "Succeeded", status
    assert_replicas(admin, topic_name, {0: [2, 3]})
    assert not kp.list_partition_reassignments()
    # The throttle goes right after the phase (the tick that ends the run takes it back).
    wait_for(lambda: not old_resources.status(KPR, "move-old").get("throttle"), 60, "the throttle taken back")
    assert {b: broker_rate(admin, b) for b in (1, 2, 3)} == {1: None, 2: None, 3: None}
