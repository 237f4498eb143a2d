"""KIP-1066 cordons while a RemoveBrokers plan drains brokers (issue 16), on a real Kafka 4.3 cluster.

The shared test bed runs Kafka 4.1 (metadata.version 4.1-IV1), where cordons do not exist; kpo drains there without
them and says so (``e2e/test_planning.py``). This module starts a 3-node KRaft cluster of its own on the newest Kafka
kpo supports (``KAFKA_LATEST_VERSION``, 4.3.1, metadata.version 4.3-IV0), with an operator of its own for it:

- the drained broker is cordoned from the start of the execution: ``cordoned.log.dirs=*`` on the broker, both its
  log directories reported cordoned by DescribeLogDirs, and a topic created mid-drain gets no replica on it; it stays
  cordoned after the drain succeeded and is uncordoned when the resource is deleted;
- a stop mid-drain takes the cordon back at once, restoring the value the broker had before (one of its two
  directories cordoned by hand), which a later deletion leaves alone.

The drains are slowed by a replication throttle while the test looks (the moves copy 2 MB at 50 kB/s).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka import KafkaAdminClient
from kubernetes import client

from e2e.kafka_support import create_topic, replicas_of, wait_for
from e2e.kube_support import Resources
from e2e.own_cluster_support import cluster_of_release, operator_for
from e2e.reassignment_support import fill, throttled
from kpo_testbed import Testbed
from kpo_testbed.kafka import KafkaCluster

PREFIX = f"e2e-cordon-{uuid.uuid4().hex[:6]}"
KPR = "PartitionReassignment"
CORDON = "cordoned.log.dirs"


@pytest.fixture(scope="module")
def kafka_43(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """A 3-node KRaft cluster on Kafka 4.3, formatted at its latest production metadata.version."""
    with cluster_of_release(tmp_path_factory.mktemp("kafka-43"), "KAFKA_LATEST_VERSION", KafkaCluster) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def admin_43(kafka_43: KafkaCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_43.bootstrap_servers})


@pytest.fixture(scope="module")
def resources_43(kpo_crds: None, testbed: Testbed, api_client: client.ApiClient, kafka_43: KafkaCluster,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[Resources]:
    with operator_for(api_client, testbed.state.kube.kubeconfig, kafka_43.bootstrap_servers, PREFIX,
                      tmp_path_factory.mktemp("cordon-operator")) as resources:
        yield resources


def cordoned(admin: AdminClient, broker: int) -> str | None:
    """The broker's dynamic ``cordoned.log.dirs`` (None: not set)."""
    resource = ConfigResource(ResourceType.BROKER, str(broker))
    entry = admin.describe_configs([resource])[resource].result(30).get(CORDON)
    return entry.value if entry is not None and entry.source == 2 else None  # 2: DYNAMIC_BROKER_CONFIG


def dirs_cordoned(kafka: KafkaCluster, broker: int) -> dict[str, bool]:
    """What DescribeLogDirs (v5, KIP-1066) says of each of the broker's log directories."""
    kp = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers.split(","))
    try:
        answers = kp.describe_log_dirs(None, brokers=[broker])
    finally:
        kp.close()
    return {d["log_dir"]: bool(d.get("is_cordoned")) for a in answers for d in a["log_dirs"]}


def set_cordon(admin: AdminClient, broker: int, value: str | None) -> None:
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.BROKER, str(broker),
                              incremental_configs=[ConfigEntry(CORDON, value or "", incremental_operation=op)])
    admin.incremental_alter_configs([resource])[resource].result(30)


def drain(resources: Resources, name: str, broker: int, topic: str) -> dict[str, Any]:
    """The drain's status once its first execution tick has run (the approval itself only starts the phase)."""
    resources.create(KPR, name, {"plan": {"goal": "RemoveBrokers", "brokers": [broker], "topics": [topic]},
                                 "approval": {"mode": "Automatic"}})
    resources.wait_phase(KPR, name, {"Executing", "Succeeded", "Failed", "Invalid"}, timeout=240)
    return dict(wait_for(lambda: (s := resources.status(KPR, name)).get("inFlight") and s, 30,
                         f"{name}'s moves in flight"))


def test_a_drained_broker_is_cordoned_until_the_resource_is_deleted(kafka_43: KafkaCluster, admin_43: AdminClient,
                                                                     resources_43: Resources) -> None:
    topic, newcomer = f"{PREFIX}-orders", f"{PREFIX}-newcomer"
    create_topic(admin_43, topic, 4, assignment=[[3, 1], [1, 3], [3, 2], [2, 3]])
    fill(kafka_43.bootstrap_servers, topic, [0, 1, 2, 3])
    with throttled(admin_43, topic):
        status = drain(resources_43, "drain-3", 3, topic)
        assert status["phase"] == "Executing", status
        assert status["cordon"] == {"brokers": [{"broker": 3, "previous": ""}]}
        assert cordoned(admin_43, 3) == "*"
        assert set(dirs_cordoned(kafka_43, 3).values()) == {True}, "Kafka itself reports both directories cordoned"
        assert any(3 in r for r in replicas_of(admin_43, topic).values()), "the drain is still running"
        create_topic(admin_43, newcomer, 12, replication_factor=1)
        assert all(r != [3] for r in replicas_of(admin_43, newcomer).values()), "nothing new lands on broker 3"
    status = resources_43.wait_phase(KPR, "drain-3", {"Succeeded", "Failed"}, timeout=180)
    assert status["phase"] == "Succeeded", status
    assert all(3 not in r for r in replicas_of(admin_43, topic).values())
    assert cordoned(admin_43, 3) == "*", "kept after success: the broker is about to go"
    assert status["cordon"]["brokers"] == [{"broker": 3, "previous": ""}]
    resources_43.wait_event("drain-3", "Cordoned")

    resources_43.delete(KPR, "drain-3")
    wait_for(lambda: not resources_43.exists(KPR, "drain-3"), 60, "the drain to be deleted")
    assert cordoned(admin_43, 3) is None
    assert set(dirs_cordoned(kafka_43, 3).values()) == {False}


def test_a_stop_uncordons_at_once_restoring_what_the_broker_had(kafka_43: KafkaCluster, admin_43: AdminClient,
                                                                resources_43: Resources) -> None:
    topic = f"{PREFIX}-stopped"
    own_dir = str(kafka_43.log_dirs(2)[0])
    set_cordon(admin_43, 2, own_dir)  # someone cordoned one of broker 2's two directories by hand
    try:
        create_topic(admin_43, topic, 2, assignment=[[2, 1], [2, 3]])
        fill(kafka_43.bootstrap_servers, topic, [0, 1])
        with throttled(admin_43, topic):
            status = drain(resources_43, "drain-2", 2, topic)
            assert status["phase"] == "Executing", status
            assert status["cordon"] == {"brokers": [{"broker": 2, "previous": own_dir}]}
            assert cordoned(admin_43, 2) == "*"
            resources_43.patch_spec(KPR, "drain-2", {"stop": True})
            status = resources_43.wait_phase(KPR, "drain-2", {"Stopped"}, timeout=120)
        assert cordoned(admin_43, 2) == own_dir, "the value from before the drain, exactly"
        assert dirs_cordoned(kafka_43, 2) == {own_dir: True, str(kafka_43.log_dirs(2)[1]): False}
        assert "cordon" not in status
        resources_43.wait_event("drain-2", "Uncordoned")
        resources_43.delete(KPR, "drain-2")
        wait_for(lambda: not resources_43.exists(KPR, "drain-2"), 60, "the drain to be deleted")
        assert cordoned(admin_43, 2) == own_dir, "not kpo's to take back"
    finally:
        set_cordon(admin_43, 2, None)
