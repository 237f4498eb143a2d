"""A Kafka cluster of a test module's own, watched by an operator of its own: for what the shared test bed cannot
show (a newer Kafka, a log dir on a small file system that fills, or on a disk that fails). The operator watches a
namespace made for it, so it never meets the shared operator's resources.

Two kinds of disk, both root only: a tmpfs fills as a real disk does and reports its own capacity in DescribeLogDirs;
ext4 on a loop device, mounted ``errors=remount-ro`` as production disks are, is what a failing disk looks like to
Kafka: the kernel's ext4 error path (``/sys/fs/ext4/<dev>/trigger_fs_error``, the path an I/O or metadata error takes)
remounts it read-only under Kafka's open files, and every write then fails with EROFS. A plain ``remount,ro`` is
refused while Kafka holds files open for writing, and chmod does not stop root."""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Disk:
    """A file system of a log dir's own: a tmpfs of ``size`` (as mount(8) spells it: ``8m``), or, with ``ext4``, an ext4
    image of ``size`` on a loop device that :func:`fail_read_only` can fail."""

    size: str
    ext4: bool = False


def mount_disk(log_dir: Path, disk: Disk, images: Path) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    if not disk.ext4:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={disk.size}", "tmpfs", str(log_dir)], check=True)
        return
    image = images / f"{log_dir.parent.name}-{log_dir.name}.ext4"
    subprocess.run(["truncate", "-s", disk.size.upper(), str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop,errors=remount-ro", str(image), str(log_dir)], check=True)
    # Kafka would take mkfs's lost+found for a partition's dir it cannot parse.
    (log_dir / "lost+found").rmdir()


def fail_read_only(log_dir: Path) -> None:
    """Fails the ext4 disk under ``log_dir`` as a bad block does: the kernel logs an ext4 error and, as the mount says
    (``errors=remount-ro``), makes the file system read-only under the files Kafka holds open."""
    device = subprocess.run(["findmnt", "-n", "-o", "SOURCE", "--target", str(log_dir)], check=True,
                            capture_output=True, text=True).stdout.strip()
    Path(f"/sys/fs/ext4/{Path(device).name}/trigger_fs_error").write_text("kpo e2e: a failing disk\n")
    # Newer kernels flag it ``emergency_ro`` rather than ``ro`` in the options: a write is the check.
    try:
        (log_dir / "probe").write_bytes(b"")
    except OSError as refused:
        assert refused.errno == errno.EROFS, refused
    else:
        raise AssertionError(f"{log_dir} still takes writes after the ext4 error")


@contextmanager
def cluster_on_disks(root: Path, disks: Callable[[KafkaCluster], Mapping[Path, Disk]],
                     extra_properties: Mapping[str, str] | None = None) -> Iterator[KafkaCluster]:
    """3 KRaft nodes on the bed's Kafka under ``root``, with the log dirs ``disks`` names each on a disk of its own
    (root only)."""
    libs = cache_root() / f"kafka-{read_versions()['KAFKA_VERSION']}" / "libs"
    cluster = KafkaCluster.on_free_ports(root, libs)
    cluster.extra_properties.update(extra_properties or {})
    cluster.write_config()
    mounted: list[Path] = []
    records = []
    try:
        for log_dir, disk in disks(cluster).items():
            mount_disk(log_dir, disk, root)
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
