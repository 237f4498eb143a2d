"""Auto-propose on broker changes on the real test bed (issue 16): a fourth Kafka broker joins the 3-node KRaft
cluster (a real broker process with fresh storage, registering with the real controllers), and kpo notices it by its
registration: a PartitionReassignment with an ``AddBrokers`` plan for broker 4 appears and waits at ``Proposed``
(nothing moves) until the proposal is approved, then fills broker 4. Before broker 4 joins, the 3-node cluster gets
no proposal at all. Then broker 4 is killed while it holds replicas and (``removeDeadAfterSeconds``) a
``RemoveBrokers`` proposal, under ``approval: Automatic``, moves them to the live brokers by itself.

An operator of its own watches one namespace, with ``autoPropose`` for the default cluster and a plan template that
keeps the proposals to this module's topics (the test bed is shared: other tests' topics stay where they are).
Broker 4 is stopped, unregistered and its data removed at the end, whatever happened.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient
from kubernetes import client

from e2e.kafka_support import create_topic, replicas_of, wait_for
from e2e.kube_support import Resources
from e2e.operator_support import OperatorProcess, operator_env, watched_namespace
from e2e.reassignment_support import fill
from kpo_testbed import Testbed

PREFIX = f"e2e-autoprop-{uuid.uuid4().hex[:6]}"
KPR = "PartitionReassignment"
NEW_BROKER = 4
PROPOSAL = f"auto-add-brokers-default-{NEW_BROKER}"
REMOVAL = f"auto-remove-brokers-default-{NEW_BROKER}"


def operator_for(testbed: Testbed, namespace: str, folder: Path, approval: str) -> OperatorProcess:
    config_path = folder / f"kpo-{approval}.yaml"
    config_path.write_text(yaml.safe_dump({
        "pollIntervalSeconds": 1,
        "balanceScore": {"intervalSeconds": 0},
        "clusters": {"default": {"bootstrapServers": testbed.state.kafka.bootstrap_servers}},
        "autoPropose": {"intervalSeconds": 1, "clusters": {"default": {
            "namespace": namespace, "approval": approval, "settleSeconds": 3, "removeDeadAfterSeconds": 5,
            "plan": {"topicPattern": f"{PREFIX}-.*"}}}},
    }))
    env = operator_env(testbed.state.kube.kubeconfig, testbed.state.kafka.bootstrap_servers,
                       {"KPO_CONFIG": str(config_path)})
    return OperatorProcess(env, folder / f"operator-{approval}.log", namespaces=[namespace])


@pytest.fixture(scope="module")
def scale_out(kpo_crds: None, testbed: Testbed, api_client: client.ApiClient, kafka_admin: AdminClient,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("auto-propose")
    with watched_namespace(api_client, PREFIX) as namespace:
        try:
            yield namespace, folder
        finally:
            delete_topics(kafka_admin)
            if testbed.state.kafka.node_dir(NEW_BROKER).exists():  # added, running or killed
                testbed.remove_broker(NEW_BROKER)


def broker_holds(admin: AdminClient, topic: str, broker: int) -> list[int]:
    return [p for p, replicas in replicas_of(admin, topic).items() if broker in replicas]


def proposal_spec(resources: Resources) -> dict[str, Any]:
    return dict(resources.get(KPR, PROPOSAL)["spec"])


def delete_proposals(resources: Resources) -> None:
    """Deleted while the operator runs, so its finalizer is let go (the namespace is deleted at the end)."""
    for name in (PROPOSAL, REMOVAL):
        if resources.exists(KPR, name):
            resources.delete(KPR, name)
            wait_for(lambda n=name: not resources.exists(KPR, n), 60, f"{name} to be deleted")


def delete_topics(admin: AdminClient) -> None:
    topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(PREFIX)]
    for future in (admin.delete_topics(topics).values() if topics else ()):
        future.result(timeout=30)
    wait_for(lambda: not [t for t in admin.list_topics(timeout=10).topics if t.startswith(PREFIX)], 30,
             "this module's topics to be deleted")


def test_a_new_broker_gets_a_proposal_that_waits_for_approval_then_fills_it(
        scale_out: tuple[str, Path], testbed: Testbed, api_client: client.ApiClient, kafka_admin: AdminClient,
        bootstrap_servers: str) -> None:
    namespace, folder = scale_out
    resources = Resources(api_client, namespace)
    topic = f"{PREFIX}-manual"
    create_topic(kafka_admin, topic, 6, replication_factor=2)
    fill(bootstrap_servers, topic, list(range(6)), messages=20)
    operator = operator_for(testbed, namespace, folder, "Manual")
    operator.start()
    try:
        # Three brokers that all hold replicas: nothing to propose (the settle time is 3 s, the interval 1 s).
        time.sleep(5)
        assert resources.custom.list_namespaced_custom_object(
            "kpo.dev", "v1alpha1", namespace, "partitionreassignments")["items"] == []

        testbed.add_broker(NEW_BROKER, rack="rack-d")
        registered = time.monotonic()  # add_broker returns once DescribeCluster lists the broker
        assert testbed.problems() == [], "a scale-out is not a broken bed (make testbed-up wiped it, issue 26 item 8)"
        before = replicas_of(kafka_admin, topic)
        wait_for(lambda: resources.exists(KPR, PROPOSAL), 60, f"the auto-proposal {PROPOSAL}", interval=0.2)
        # docs/api.md: within settleSeconds (3) + intervalSeconds (1) of the registration, plus a look's requests;
        # 10 s of room for a loaded CI machine.
        took = time.monotonic() - registered
        print(f"auto-proposal {took:.1f} s after the registration was seen (settle 3 s, interval 1 s)")
        assert took <= 3 + 1 + 10, took
        created = resources.get(KPR, PROPOSAL)
        assert created["metadata"]["labels"]["kpo.dev/auto-propose"] == "add-brokers"
        assert "4 (rack rack-d)" in created["metadata"]["annotations"]["kpo.dev/reason"]
        plan = created["spec"]["plan"]  # the CRD's defaults (tolerance, rackAware) filled in
        assert (plan["goal"], plan["brokers"], plan["topicPattern"]) == ("AddBrokers", [NEW_BROKER], f"{PREFIX}-.*")
        assert created["spec"]["approval"] == {"mode": "Manual"}
        events = wait_for(lambda: [e for e in resources.events(PROPOSAL) if e.reason == "AutoProposed"], 30,
                          "the AutoProposed event")
        assert len(events) == 1 and "waits at Proposed" in events[0].message

        status = resources.wait_phase(KPR, PROPOSAL, {"Proposed", "Failed", "Invalid"}, timeout=240)
        assert status["phase"] == "Proposed", status
        assert status["summary"]["replicaMoves"] >= 1
        time.sleep(3)
        assert replicas_of(kafka_admin, topic) == before, "nothing moves before the approval"
        assert broker_holds(kafka_admin, topic, NEW_BROKER) == []
        # Only one proposal, however many looks went by.
        listed = resources.custom.list_namespaced_custom_object("kpo.dev", "v1alpha1", namespace,
                                                                "partitionreassignments")["items"]
        assert [p["metadata"]["name"] for p in listed] == [PROPOSAL]

        resources.patch_spec(KPR, PROPOSAL, {"approval": {"proposalId": status["proposal"]["id"]}})
        status = resources.wait_phase(KPR, PROPOSAL, {"Succeeded", "Failed"}, timeout=240)
        assert status["phase"] == "Succeeded", status
        moved = broker_holds(kafka_admin, topic, NEW_BROKER)
        assert moved, "broker 4 holds replicas of the topic once the approved plan ran"
        assert all(len(r) == 2 for r in replicas_of(kafka_admin, topic).values())
        assert "Traceback" not in operator.log_text(), operator.log_tail()
    finally:
        delete_proposals(resources)
        operator.stop()


def test_with_automatic_approval_a_broker_gone_holding_replicas_is_drained_by_itself(
        scale_out: tuple[str, Path], testbed: Testbed, api_client: client.ApiClient, kafka_admin: AdminClient,
        bootstrap_servers: str) -> None:
    """Broker 4 holds replicas of a topic (placed there by hand, as the first test's approved plan did), then dies:
    5 s after it left the cluster (removeDeadAfterSeconds) a RemoveBrokers proposal appears and, under approval
    Automatic, moves its replicas to live brokers with nobody approving (Cruise Control's broker-failure
    self-healing)."""
    namespace, folder = scale_out
    resources = Resources(api_client, namespace)
    if f"kafka-{NEW_BROKER}" not in testbed.state.processes:
        testbed.add_broker(NEW_BROKER, rack="rack-d")
    topic = f"{PREFIX}-automatic"
    create_topic(kafka_admin, topic, 6, assignment=[[4, 2], [2, 3], [3, 4], [1, 3], [4, 1], [3, 2]])
    fill(bootstrap_servers, topic, list(range(6)), messages=20)
    operator = operator_for(testbed, namespace, folder, "Automatic")
    operator.start()
    try:
        wait_for(lambda: "auto-propose: watching" in operator.log_text(), 30, "the watcher to start")
        time.sleep(3)
        assert not resources.exists(KPR, PROPOSAL) and not resources.exists(KPR, REMOVAL), \
            "broker 4 holds replicas and is alive: nothing to propose"
        testbed.kill_node(NEW_BROKER)
        wait_for(lambda: resources.exists(KPR, REMOVAL), 90, f"the removal proposal {REMOVAL}")
        removal = resources.get(KPR, REMOVAL)
        assert removal["metadata"]["labels"]["kpo.dev/auto-propose"] == "remove-brokers"
        assert (removal["spec"]["plan"]["goal"], removal["spec"]["plan"]["brokers"]) == ("RemoveBrokers", [NEW_BROKER])
        assert removal["spec"]["approval"] == {"mode": "Automatic"}
        status = resources.wait_phase(KPR, REMOVAL, {"Succeeded", "Failed", "Invalid"}, timeout=300)
        assert status["phase"] == "Succeeded", status
        assert broker_holds(kafka_admin, topic, NEW_BROKER) == []
        assert all(len(r) == 2 and NEW_BROKER not in r for r in replicas_of(kafka_admin, topic).values())
        assert "Traceback" not in operator.log_text(), operator.log_tail()
    finally:
        delete_proposals(resources)
        operator.stop()
