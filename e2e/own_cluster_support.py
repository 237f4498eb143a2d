"""A Kafka cluster of a test module's own, watched by an operator of its own: for what the shared test bed cannot
show (a newer Kafka, a log dir on a small file system that fails). The operator watches a namespace made for it, so
it never meets the shared operator's resources."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from kubernetes import client

from e2e.kafka_support import wait_for
from e2e.kube_support import Resources
from e2e.operator_support import OperatorProcess, operator_env, watched_namespace

KPR = "PartitionReassignment"


@contextmanager
def operator_for(api_client: client.ApiClient, kubeconfig: Path, bootstrap_servers: str, prefix: str,
                 folder: Path) -> Iterator[Resources]:
    """An operator polling every second for the cluster at ``bootstrap_servers``, and the resources of its namespace;
    every PartitionReassignment left is deleted (and let go by the operator) before it stops."""
    with watched_namespace(api_client, prefix) as namespace:
        config = folder / "kpo.yaml"
        config.write_text(yaml.safe_dump({"pollIntervalSeconds": 1, "balanceScore": {"intervalSeconds": 0},
                                          "clusters": {"default": {"bootstrapServers": bootstrap_servers}}}))
        operator = OperatorProcess(operator_env(kubeconfig, bootstrap_servers, {"KPO_CONFIG": str(config)}),
                                   folder / "operator.log", namespaces=[namespace])
        operator.start()
        resources = Resources(api_client, namespace)

        def left() -> list[dict[str, object]]:
            found: list[dict[str, object]] = resources.custom.list_namespaced_custom_object(
                "kpo.dev", "v1alpha1", namespace, "partitionreassignments")["items"]
            return found

        try:
            yield resources
        finally:
            for item in left():
                resources.delete(KPR, str(item["metadata"]["name"]))  # type: ignore[index]
            wait_for(lambda: not left(), 60, "the reassignments to be deleted")
            operator.stop()
