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
from typing import TypeVar

import yaml
from kubernetes import client

from e2e.kafka_support import wait_for
from e2e.kube_support import Resources
from e2e.operator_support import OperatorProcess, operator_env, watched_namespace
from kpo_testbed import procs
from kpo_testbed.kafka import KafkaCluster, KafkaNode
from kpo_testbed.paths import cache_root, read_versions

KPR = "PartitionReassignment"


class OldKafkaCluster(KafkaCluster):
    """3 KRaft nodes on a Kafka older than the bed's (``KAFKA_OLD_VERSION``, 3.2): one log dir a node (KRaft has JBOD
    only from 3.7, KIP-858), no SASL listener (SCRAM in KRaft only from 3.5: ``format --add-scram`` does not exist),
    and log4j 1's own configuration (Kafka 3 does not read the bed's log4j2 file)."""

    def log_dirs(self, node_id: int) -> list[Path]:
        return [self.node_dir(node_id) / "data-a"]

    def properties(self, node: KafkaNode) -> dict[str, str]:
        props = {k: v for k, v in super().properties(node).items()
                 if not k.startswith(("sasl.", "listener.name.sasl_plaintext.", "share.coordinator."))}
        for key in ("listeners", "advertised.listeners"):
            props[key] = ",".join(e for e in props[key].split(",") if not e.startswith("SASL_PLAINTEXT://"))
        return props

    def write_config(self) -> None:
        super().write_config()
        (self.root / "log4j.properties").write_text(LOG4J1)

    def java(self, main_class: str, *args: str, heap: str = "-Xms64m -Xmx256m") -> list[str]:
        argv = super().java(main_class, *args, heap=heap)
        argv.insert(1, f"-Dlog4j.configuration=file:{self.root / 'log4j.properties'}")
        return argv

    def format_storage(self) -> str:
        cluster_id = self.run_tool("kafka.tools.StorageTool", "random-uuid").strip().splitlines()[-1]
        for node in self.nodes:
            self.run_tool("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c",
                          str(self.node_dir(node.node_id) / "server.properties"), "--ignore-formatted")
        return cluster_id


LOG4J1 = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.request.logger=WARN
"""


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


C = TypeVar("C", bound=KafkaCluster)


@contextmanager
def cluster_of_release(root: Path, version_key: str, kind: type[C]) -> Iterator[C]:
    """3 KRaft nodes of ``kind`` under ``root`` on the Kafka release ``versions.env`` names by ``version_key``
    (provisioned beside the bed's by ``make provision``)."""
    version = read_versions()[version_key]
    libs = cache_root() / f"kafka-{version}" / "libs"
    assert (libs / f"kafka_2.13-{version}.jar").is_file(), f"Kafka {version} is not provisioned: make provision"
    cluster = kind.on_free_ports(root, libs)
    cluster.write_config()
    cluster.format_storage()
    records = [cluster.start_node(n.node_id) for n in cluster.nodes]
    try:
        cluster.wait_healthy()
        yield cluster
    finally:
        procs.stop_all(records)


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
