"""The operator runs as the chart's ServiceAccount — a TokenRequest token, not the admin — and that is enough.

The chart is installed with ``watchNamespaces: [<workload namespace>]`` and a SASL cluster whose password is in a
Secret the values name. The operator is then started exactly as the chart's Deployment would start it (command,
arguments, environment, rendered config), logged in with the ServiceAccount's token, and it carries a
PartitionReassignment to Succeeded, posts its Events, reads the named Secret to reach Kafka over SASL/SCRAM, and
removes its finalizer on deletion. The same token is refused (403) everything the operator has no business doing.

The chart goes into an API server of this test's own (next to the shared Kafka): no other operator — not the
session's, not another e2e session's on a shared test bed — can see its resources, so a success cannot come from an
admin-run operator.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
)
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.helm_support import (
    ChartOperator,
    ControlPlane,
    api_client_for,
    free_port,
    http_status,
    installed,
    kubectl,
    private_control_plane,
    service_account_kubeconfig,
)
from e2e.kafka_support import assert_replicas, create_topic, describe_only
from e2e.kube_support import GROUP, VERSION, Resources, wait_until
from e2e.reassignment_support import spec_partitions
from kpo_testbed import Testbed
from kpo_testbed.kafka import LIMITED_USER, SCRAM_MECHANISM

KPR = "PartitionReassignment"
CREDENTIALS = "kafka-kpo-credentials"


@pytest.fixture
def plane(testbed: Testbed, tmp_path: Path) -> Iterator[ControlPlane]:
    with private_control_plane(testbed, tmp_path / "kube") as started:
        yield started


def forbidden(call: Callable[[], Any]) -> bool:
    try:
        call()
    except ApiException as exc:
        return exc.status == 403
    return False


def test_operator_as_the_chart_service_account(testbed: Testbed, plane: ControlPlane, kafka_admin: AdminClient,
                                               topic_name: str, bootstrap_servers: str, tmp_path: Path) -> None:
    api_client, namespace, workload_namespace = plane.api, "kpo-system", "team-a"
    core = client.CoreV1Api(api_client)
    for name in (namespace, workload_namespace):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    password = testbed.state.kafka.passwords[LIMITED_USER]
    core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name=CREDENTIALS), string_data={"password": password}))
    core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name="unrelated"), string_data={"token": "not for kpo"}))
    values = {
        "watchNamespaces": [workload_namespace],
        "kafka": {"clusters": {
            "default": {"bootstrapServers": bootstrap_servers},
            "limited": {"bootstrapServers": testbed.state.kafka.sasl_bootstrap_servers,
                        "securityProtocol": "SASL_PLAINTEXT",
                        "sasl": {"mechanism": SCRAM_MECHANISM, "username": LIMITED_USER,
                                 "passwordSecret": {"name": CREDENTIALS, "key": "password"}}},
        }},
        "operator": {"pollIntervalSeconds": 1},
        "probes": {"port": free_port()},
        "metrics": {"port": free_port()},
    }
    with installed(testbed, namespace, values, tmp_path, kubeconfig=plane.kubeconfig) as release:
        kubectl(testbed, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s",
                kubeconfig=plane.kubeconfig)
        kubeconfig = service_account_kubeconfig(testbed, release, tmp_path / "sa.kubeconfig")
        sa = api_client_for(kubeconfig)
        sa_core, sa_apps, sa_custom = client.CoreV1Api(sa), client.AppsV1Api(sa), client.CustomObjectsApi(sa)

        # What the role allows: the named Secret, kpo resources and ConfigMaps in the watched namespace.
        assert sa_core.read_namespaced_secret(CREDENTIALS, namespace).data["password"]
        sa_custom.list_namespaced_custom_object(GROUP, VERSION, workload_namespace, "partitionreassignments")
        # What it does not: 403 from the real API server for each.
        refusals = {
            "read a Secret the values do not name": lambda: sa_core.read_namespaced_secret("unrelated", namespace),
            "list Secrets": lambda: sa_core.list_namespaced_secret(namespace),
            "list Secrets in the watched namespace": lambda: sa_core.list_namespaced_secret(workload_namespace),
            "list Deployments": lambda: sa_apps.list_namespaced_deployment(namespace),
            "patch its own Deployment": lambda: sa_apps.patch_namespaced_deployment(
                release.fullname, namespace, {"spec": {"replicas": 2}}),
            "delete its own Deployment": lambda: sa_apps.delete_namespaced_deployment(release.fullname, namespace),
            "create a ConfigMap outside the watched namespace": lambda: sa_core.create_namespaced_config_map(
                namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="x"))),
            "list kpo resources outside the watched namespace": lambda: sa_custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, "partitionreassignments"),
            "list kpo resources cluster-wide": lambda: sa_custom.list_cluster_custom_object(
                GROUP, VERSION, "partitionreassignments"),
            "list Pods": lambda: sa_core.list_namespaced_pod(workload_namespace),
            "create a Namespace": lambda: sa_core.create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=f"kpo-{uuid.uuid4().hex[:6]}"))),
        }
        allowed = [what for what, call in refusals.items() if not forbidden(call)]
        assert allowed == [], f"the chart's ServiceAccount may {allowed}"

        operator = ChartOperator(api_client, release, kubeconfig, tmp_path / "operator")
        assert operator.command[:3] == ["python", "-m", "kpo"]
        assert f"--namespace={workload_namespace}" in operator.command
        resources = Resources(api_client, workload_namespace)
        create_topic(kafka_admin, topic_name, 2, assignment=[[1, 2], [2, 3]])
        operator.start()
        try:
            # The Deployment's probe, asked of the process: Kopf's liveness endpoint answers.
            wait_until(lambda: http_status(operator.probe_port, operator.probe_path) == 200, 30,
                       "the liveness endpoint")
            resources.create(KPR, "as-sa", {"partitions": spec_partitions(topic_name, {0: [2, 3], 1: [3, 1]})})
            waited = kubectl(testbed, "wait", "--for=condition=Ready", "kpr/as-sa", "-n", workload_namespace,
                             "--timeout=120s", check=False, kubeconfig=plane.kubeconfig)
            assert waited.returncode == 0, f"{waited.stderr}\n{operator.log_text()[-4000:]}"
            assert resources.status(KPR, "as-sa")["phase"] == "Succeeded"
            assert_replicas(kafka_admin, topic_name, {0: [2, 3], 1: [3, 1]})
            assert resources.config_map("as-sa-rollback") is not None  # a ConfigMap it owns, created as the SA
            resources.wait_event("as-sa", "Succeeded")  # Events posted with the ServiceAccount's token

            _refused_over_sasl(kafka_admin, topic_name, resources)

            # Deletion: the finalizer is removed by the ServiceAccount's operator.
            resources.delete(KPR, "as-sa")
            wait_until(lambda: not resources.exists(KPR, "as-sa"), 60, "as-sa to be deleted")
            log = operator.log_text()
            assert "Forbidden" not in log and "Not enough permissions" not in log, log[-4000:]
        finally:
            operator.stop()


def _refused_over_sasl(kafka_admin: AdminClient, topic_name: str, resources: Resources) -> None:
    """The "limited" cluster's password comes from the named Secret: reaching Kafka's authorizer proves the
    ServiceAccount read it (a 403 on the Secret would leave the resource without any phase)."""
    with describe_only(kafka_admin, f"User:{LIMITED_USER}", topic_name):
        resources.create(KPR, "over-sasl", {"clusterRef": "limited",
                                            "partitions": spec_partitions(topic_name, {0: [1, 2]})})
        status = resources.wait_phase(KPR, "over-sasl", {"Failed", "Invalid", "Succeeded"}, timeout=60)
        assert status["phase"] == "Failed", status
        assert status["failures"][0]["reason"] == "CLUSTER_AUTHORIZATION_FAILED"
        resources.delete(KPR, "over-sasl")
        wait_until(lambda: not resources.exists(KPR, "over-sasl"), 60, "over-sasl to be deleted")
