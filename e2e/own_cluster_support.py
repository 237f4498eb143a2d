"""A Kafka cluster of a test module's own, watched by an operator of its own: for what the shared test bed cannot
show (a newer Kafka, a log dir on a small file system that fails). The operator watches a namespace made for it, so
it never meets the shared operator's resources."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import yaml
from kubernetes import client

from e2e.kafka_support import wait_for
from e2e.kube_support import Resources
from e2e.operator_support import OperatorProcess, operator_env, watched_namespace
from kpo_testbed import procs
from kpo_testbed.kafka import KafkaCluster
from kpo_testbed.paths import cache_root, read_versions

KPR = "PartitionReassignment"


@contextmanager
def tmpfs_cluster(root: Path, mounts: Callable[[KafkaCluster], Mapping[Path, str]],
                  extra_properties: Mapping[str, str] | None = None) -> Iterator[KafkaCluster]:
    """3 KRaft nodes on the bed's Kafka under ``root``, with the log dirs ``mounts`` names each on a tmpfs of the size
    it gives (root only): a disk that fills as a real one does, and reports its own capacity in DescribeLogDirs."""
    libs = cache_root() / f"kafka-{read_versions()['KAFKA_VERSION']}" / "libs"
    cluster = KafkaCluster.on_free_ports(root, libs)
    cluster.extra_properties.update(extra_properties or {})
    cluster.write_config()
    mounted: list[Path] = []
    records = []
    try:
        for log_dir, size in mounts(cluster).items():
            log_dir.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(log_dir)], check=True)
            mounted.append(log_dir)
        cluster.format_storage()
        records = [cluster.start_node(n.node_id) for n in cluster.nodes]
        cluster.wait_healthy()
        yield cluster
    finally:
        procs.stop_all(records)
        for log_dir in mounted:
            subprocess.run(["umount", "-l", str(log_dir)], check=False)


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
