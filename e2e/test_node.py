"""What a user's ``helm install`` does, on the test bed's real node: the chart's Deployment runs the operator image
built from the Dockerfile as a pod (under the chart's ServiceAccount, its token projected by the kubelet, probed by
the kubelet on Kopf's /healthz), and that pod carries PartitionReassignments to Succeeded on the test bed's Kafka —
also when the pod is deleted mid-flight and the Deployment replaces it.

The namespace enforces the restricted Pod Security profile, and the pod is on the node's pod network: it reaches the
API server at the "kubernetes" Service's address and Kafka at its PODS listener, both forwarded by the node to
loopback where the test bed listens. The chart's values are a user's: image, Kafka address, namespace, poll interval.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kubernetes import client

from e2e.helm_support import RESTRICTED, Release, installed_on_node, kubectl
from e2e.kafka_support import assert_replicas, broker_rate, create_topic, topic_list
from e2e.kube_support import Resources, wait_until
from e2e.reassignment_support import fill, spec_partitions
from kpo_testbed import Testbed
from kpo_testbed.node import NODE_NAME, NodeImages

KPR = "PartitionReassignment"
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
OPERATOR_UID = 10001


@dataclass
class ChartOperator:
    release: Release
    resources: Resources
    core: client.CoreV1Api

    def pods(self) -> list[client.V1Pod]:
        selector = f"app.kubernetes.io/instance={self.release.name}"
        return list(self.core.list_namespaced_pod(self.release.namespace, label_selector=selector).items)

    def ready_pod(self, timeout: float = 180, other_than: str = "") -> client.V1Pod:
        def ready() -> client.V1Pod | None:
            for pod in self.pods():
                if pod.metadata.name == other_than or pod.metadata.deletion_timestamp:
                    continue
                conditions = {c.type: c.status for c in pod.status.conditions or []}
                if conditions.get("Ready") == "True":
                    return pod
            return None

        return wait_until(ready, timeout, "the operator pod to be Ready")


@pytest.fixture(scope="module")
def chart_operator(testbed: Testbed, node_images: NodeImages, kpo_crds: None, api_client: client.ApiClient,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartOperator]:
    values = {
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        # One pod, so "the" operator pod is the one acting; two replicas are e2e/test_leader_election.py's.
        "replicaCount": 1,
    }
    with installed_on_node(testbed, node_images.operator, api_client, tmp_path_factory.mktemp("chart-operator"),
                           values) as (release, namespace):
        yield ChartOperator(release, Resources(api_client, namespace), client.CoreV1Api(api_client))


def _slow_topic(admin: AdminClient, bootstrap_servers: str, topic: str) -> dict[int, list[int]]:
    """A topic of four ~0.6 MB partitions, all moved: under a 100 kB/s throttle each move lasts seconds."""
    originals = {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [1, 2]}
    create_topic(admin, topic, len(originals), assignment=[originals[p] for p in sorted(originals)])
    fill(bootstrap_servers, topic, sorted(originals), messages=60)
    return {0: [3, 1], 1: [1, 2], 2: [2, 3], 3: [3, 2]}


def test_helm_install_runs_the_operator_pod_that_carries_a_reassignment(
        chart_operator: ChartOperator, testbed: Testbed, kafka_admin: AdminClient, topic_name: str) -> None:
    pod = chart_operator.ready_pod()
    spec = pod.spec
    assert spec.node_name == NODE_NAME
    assert spec.service_account_name == chart_operator.release.fullname
    # The kubelet projected the ServiceAccount token (the kube-api-access volume) and the operator used it: it is
    # Ready, and Ready is Kopf's /healthz answering the kubelet's probe.
    assert any(v.projected is not None and any(s.service_account_token for s in v.projected.sources)
               for v in spec.volumes)
    container = spec.containers[0]
    assert container.image == NodeImages.built().operator
    assert container.liveness_probe.http_get.path == "/healthz"
    assert container.security_context.read_only_root_filesystem is True
    assert container.security_context.allow_privilege_escalation is False
    assert spec.security_context.run_as_non_root is True and spec.security_context.run_as_user == OPERATOR_UID
    # The image's user really runs it: the operator's process on this host belongs to uid 10001.
    assert any(b"-m\x00kpo" in cmdline for cmdline in _processes_of(OPERATOR_UID))

    targets = {0: [3, 1], 1: [1, 3]}
    create_topic(kafka_admin, topic_name, 2, assignment=[[1, 2], [2, 3]])
    chart_operator.resources.create(KPR, "moved", {"partitions": spec_partitions(topic_name, targets)})
    status = chart_operator.resources.wait_phase(KPR, "moved", {"Succeeded", "Failed", "Invalid"}, timeout=180)
    assert status["phase"] == "Succeeded", status
    assert_replicas(kafka_admin, topic_name, targets)
    # Probed all along and never restarted.
    pod = chart_operator.core.read_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
    assert pod.status.container_statuses[0].restart_count == 0
    # The kubelet itself probed the container's liveness on Kopf's /healthz, and it answered (the kubelet's own prober
    # metrics, read through the API server's node proxy).
    wait_until(lambda: _liveness_successes(testbed, pod) > 0, 30, "a successful liveness probe by the kubelet")
    # What a user reads first when something is off: the pod's log, through the API server and the kubelet.
    logs = kubectl(testbed, "-n", pod.metadata.namespace, "logs", pod.metadata.name).stdout
    assert f"{pod.metadata.namespace}/moved" in logs, logs[-2000:]


def test_the_chart_pod_is_admitted_under_restricted_pod_security(chart_operator: ChartOperator,
                                                                  testbed: Testbed) -> None:
    """The namespace enforces the restricted profile, so the pod exists only because it complies; and admission does
    refuse here: a pod that asks for the host network is turned away in the same namespace."""
    namespace = chart_operator.release.namespace
    labels = chart_operator.core.read_namespace(namespace).metadata.labels
    assert {k: labels.get(k) for k in RESTRICTED} == RESTRICTED
    pod = chart_operator.ready_pod()
    assert not pod.spec.host_network and pod.status.pod_ip != pod.status.host_ip
    refused = kubectl(testbed, "-n", namespace, "run", "host-network", "--image", pod.spec.containers[0].image,
                      "--restart=Never", "--overrides", '{"spec": {"hostNetwork": true}}', check=False)
    assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr, refused.stderr


def test_deleting_the_operator_pod_mid_flight_is_survived_through_the_deployment(
        chart_operator: ChartOperator, testbed: Testbed, kafka_admin: AdminClient, topic_name: str) -> None:
    first = chart_operator.ready_pod()
    targets = _slow_topic(kafka_admin, testbed.state.kafka.bootstrap_servers, topic_name)
    spec = {"partitions": spec_partitions(topic_name, targets),
            "execution": {"throttle": 100_000, "maxMovesPerBrokerDirection": len(targets)}}
    resources = chart_operator.resources
    resources.create(KPR, "survives", spec)
    wait_until(lambda: resources.status(KPR, "survives").get("inFlight"), 60, "moves in flight")
    kubectl(testbed, "-n", chart_operator.release.namespace, "delete", "pod", first.metadata.name, "--wait=false")
    second = chart_operator.ready_pod(other_than=first.metadata.name)
    assert second.metadata.name != first.metadata.name
    assert second.metadata.owner_references[0].kind == "ReplicaSet"
    status = resources.wait_phase(KPR, "survives", {"Succeeded", "Failed", "Invalid"}, timeout=240)
    assert status["phase"] == "Succeeded", status
    assert_replicas(kafka_admin, topic_name, targets)
    # The new pod finished what the old one started, and cleaned up after it: no throttle left anywhere.
    assert _throttles_left(kafka_admin, topic_name) == []


def _throttles_left(admin: AdminClient, topic: str) -> list[str]:
    left = [f"broker {b} {k}" for b in (1, 2, 3) for k in THROTTLE_KEYS if broker_rate(admin, b, k)]
    return left + [k for k in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
                   if topic_list(admin, topic, k)]


def _liveness_successes(testbed: Testbed, pod: client.V1Pod) -> int:
    metrics = kubectl(testbed, "get", "--raw", f"/api/v1/nodes/{NODE_NAME}/proxy/metrics/probes").stdout
    total = 0
    for line in metrics.splitlines():
        if (line.startswith("prober_probe_total{") and 'probe_type="Liveness"' in line
                and f'pod="{pod.metadata.name}"' in line and 'result="successful"' in line):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def _processes_of(uid: int) -> list[bytes]:
    """The command lines of this host's processes that run as ``uid``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and proc.stat().st_uid == uid:
                found.append((proc / "cmdline").read_bytes())
        except OSError:
            continue  # gone meanwhile
    return found
