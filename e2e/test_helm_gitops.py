"""GitOps and kubectl habits on the real test bed: ``kubectl wait --for=condition=Ready`` for each kind, the Argo CD
health script on the statuses the operator really writes, and ``kubectl get kpo -A`` with its printer columns.

The Lua runs in Argo CD's own health-check VM (argo-cd's util/lua, built by ``testbed/provision.sh argocd``: see
e2e/argocd_support.py) on the object as the API server returns it.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

import kpo.__main__
from e2e.argocd_support import argocd_health
from e2e.helm_support import kubectl
from e2e.kafka_support import assert_replicas, create_topic, replicas_of
from e2e.kube_support import Resources, wait_until
from e2e.reassignment_support import fill, spec_partitions, throttled
from kpo_testbed import Testbed

pytestmark = pytest.mark.usefixtures("kpo_operator")

KPR = "PartitionReassignment"


def registered(package: str) -> bool:
    """Whether ``python -m kpo`` registers the handlers of ``kpo.resources.<package>``."""
    if importlib.util.find_spec(f"kpo.resources.{package}.handlers") is None:
        return False
    return f"{package}.register(" in inspect.getsource(kpo.__main__)


def wait_condition(testbed: Testbed, resource: str, namespace: str, condition: str, timeout: int = 120) -> None:
    waited = kubectl(testbed, "wait", f"--for=condition={condition}", resource, "-n", namespace,
                     f"--timeout={timeout}s", check=False)
    assert waited.returncode == 0, waited.stderr


def test_reassignment_wait_and_argocd_health_through_its_life(testbed: Testbed, kafka_admin: AdminClient,
                                                              bootstrap_servers: str, topic_name: str,
                                                              resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 1, assignment=[[1, 2]])
    fill(bootstrap_servers, topic_name, [0], messages=60)
    with throttled(kafka_admin, topic_name):
        resources.create(KPR, "moving", {"partitions": spec_partitions(topic_name, {0: [2, 3]})})
        resources.wait_phase(KPR, "moving", "Executing", timeout=60)
        assert argocd_health(resources.get(KPR, "moving"))[0] == "Progressing"
    wait_condition(testbed, "partitionreassignment/moving", resources.namespace, "Ready")
    obj = resources.get(KPR, "moving")
    assert obj["status"]["phase"] == "Succeeded"
    assert argocd_health(obj)[0] == "Healthy"
    assert_replicas(kafka_admin, topic_name, {0: [2, 3]})

    # Broker 9 does not exist: Invalid, Stalled, and Argo CD says Degraded with kpo's reason.
    resources.create(KPR, "impossible", {"partitions": spec_partitions(topic_name, {0: [3, 9]})})
    wait_condition(testbed, "kpr/impossible", resources.namespace, "Stalled", timeout=60)
    status, message = argocd_health(resources.get(KPR, "impossible"))
    assert status == "Degraded"
    assert message.startswith("Invalid: ") and "9" in message


@pytest.mark.skipif(not registered("preferred_leader_election"),
                    reason="PreferredLeaderElection handlers are not registered in python -m kpo yet")
def test_preferred_leader_election_wait_ready(testbed: Testbed, kafka_admin: AdminClient, topic_name: str,
                                              resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1, 2], [2, 3]])
    resources.create("PreferredLeaderElection", "leaders", {"topics": [topic_name]})
    wait_condition(testbed, "preferredleaderelection/leaders", resources.namespace, "Ready")
    assert argocd_health(resources.get("PreferredLeaderElection", "leaders"))[0] == "Healthy"


@pytest.mark.skipif(not registered("topic_partition_count"),
                    reason="TopicPartitionCount handlers are not registered in python -m kpo yet")
def test_topic_partition_count_wait_ready(testbed: Testbed, kafka_admin: AdminClient, topic_name: str,
                                          resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 2, replication_factor=2)
    resources.create("TopicPartitionCount", "grow", {"topic": topic_name, "partitions": 4})
    wait_condition(testbed, "topicpartitioncount/grow", resources.namespace, "Ready")
    assert argocd_health(resources.get("TopicPartitionCount", "grow"))[0] == "Healthy"
    assert len(replicas_of(kafka_admin, topic_name)) == 4


def test_kubectl_get_kpo_lists_every_kind_with_its_columns(testbed: Testbed, resources: Resources,
                                                           tmp_path: Path) -> None:
    resources.create(KPR, "listed-kpr", {"partitions": [{"topic": "absent", "partition": 0, "replicas": [1, 2]}]})
    resources.create("PreferredLeaderElection", "listed-kple", {"topics": ["absent"]})
    resources.create("TopicPartitionCount", "listed-ktpc", {"topic": "absent", "partitions": 6})
    # The category "kpo" lists the three kinds; -A adds the namespace column.
    listed = kubectl(testbed, "get", "kpo", "-A").stdout
    lines = [line for line in listed.splitlines() if line.strip()]
    headers = [line for line in lines if line.startswith("NAMESPACE")]
    assert len(headers) == 3, listed  # one table per kind, each with its own columns
    assert any("PHASE" in h and "PROGRESS" in h and "STRATEGY" in h and "AGE" in h for h in headers), listed
    assert any("PHASE" in h and "TYPE" in h and "ELECTED" in h for h in headers), listed
    assert any("TOPIC" in h and "PARTITIONS" in h and "CURRENT" in h for h in headers), listed
    names = {line.split()[1] for line in lines if line.startswith(resources.namespace)}
    assert {"partitionreassignment.kpo.dev/listed-kpr", "preferredleaderelection.kpo.dev/listed-kple",
            "topicpartitioncount.kpo.dev/listed-ktpc"} <= names, listed
    # Short names, and the Ready message as a wide column (priority 1).
    wide = kubectl(testbed, "get", "kpr,kple,ktpc", "-n", resources.namespace, "-o", "wide").stdout
    assert "MESSAGE" in wide and "listed-kpr" in wide and "listed-ktpc" in wide
    # Once reconciled the phase column is filled in (absent topic: Invalid, with the reason in MESSAGE).
    wait_until(lambda: resources.status(KPR, "listed-kpr").get("phase") == "Invalid", 60, "listed-kpr Invalid")
    row = kubectl(testbed, "get", "kpr", "listed-kpr", "-n", resources.namespace, "-o", "json").stdout
    assert json.loads(row)["status"]["phase"] == "Invalid"
    table = kubectl(testbed, "get", "kpr", "listed-kpr", "-n", resources.namespace).stdout
    assert "Invalid" in table.splitlines()[1]
