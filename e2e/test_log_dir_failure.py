"""A log dir that fails mid-move (issue 30): a cluster of this module's own, whose broker 1 has its second log dir on an
8 MiB tmpfs. A PartitionReassignment moves a 20 MB replica into that dir; the copy fills the file system, Kafka takes
the dir offline as it does a failed disk (KAFKA_STORAGE_ERROR in DescribeLogDirs), and kpo must end Failed with a
condition that names the dir, say so in one Event, and leave the replica where it was, online. The other way round,
on broker 2, a replica copied out of its small dir under a slow intra-broker throttle, whose source dir fills while
the copy runs (a producer's append fails): the replica cannot be read, the copy cannot end, and kpo must end Failed
naming the offline dir, with its throttle taken back. And a disk that fails as disks do in production, not by filling:
broker 3's second dir is ext4 on a loop device, which the kernel makes read-only (its ext4 error path) while a
replica is copied into it under the intra-broker throttle; kpo must end Failed naming the dir, the replica online in
its old dir, the throttle gone. A broker so left with one online dir refuses the disk plans that need another
(RebalanceDisks on it, RemoveDisks of its last or of its failed dir): Invalid, named, one Event, nothing started.
Judged with Kafka's view: DescribeLogDirs, DescribeTopics, DescribeConfigs, ListPartitionReassignments.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicCollection
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.structs import TopicPartitionReplica
from kubernetes import client

from e2e.conftest import QUIET
from e2e.kafka_support import broker_rate, create_topic, wait_for
from e2e.kube_support import Resources
from e2e.own_cluster_support import KPR, Disk, cluster_on_disks, fail_read_only, operator_for
from e2e.reassignment_support import fill
from kpo.domain.throttle import LOG_DIR_RATE
from kpo_testbed import Testbed
from kpo_testbed.kafka import KafkaCluster

PREFIX = f"e2e-disk-{uuid.uuid4().hex[:6]}"
SMALL = "8m"
STORAGE_ERROR = 56  # KAFKA_STORAGE_ERROR


@pytest.fixture(scope="module")
def small_disk_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """3 KRaft nodes on the bed's Kafka; the second log dir of brokers 1 and 2 is a tmpfs of 8 MiB, broker 3's an ext4
    disk of 64 MiB (one test each: a dir that failed stays offline)."""
    with cluster_on_disks(tmp_path_factory.mktemp("kafka-small-disk"),
                          lambda c: {c.log_dirs(1)[1]: Disk(SMALL), c.log_dirs(2)[1]: Disk(SMALL),
                                     c.log_dirs(3)[1]: Disk("64m", ext4=True)}) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def disk_resources(kpo_crds: None, testbed: Testbed, api_client: client.ApiClient,
                   small_disk_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Resources]:
    with operator_for(api_client, testbed.state.kube.kubeconfig, small_disk_cluster.bootstrap_servers, PREFIX,
                      tmp_path_factory.mktemp("disk-operator")) as resources:
        yield resources


DirReport = dict[str, tuple[int, list[tuple[int, int, bool]]]]


def broker_dirs(kp: KafkaAdminClient, topic: str, broker: int = 1) -> DirReport:
    """A broker's log dirs as DescribeLogDirs reports them: error code, and the topic's replicas (partition, size,
    future)."""
    return {d["log_dir"]: (int(d.get("error_code", 0)),
                           [(int(p["partition_index"]), int(p["partition_size"]), bool(p.get("is_future_key")))
                            for t in d.get("topics", []) if t["name"] == topic for p in t["partitions"]])
            for answer in kp.describe_log_dirs([topic], brokers=[broker]) for d in answer["log_dirs"]}


def settled_in(dirs: DirReport, log_dir: str) -> bool:
    """The topic's replica is in ``log_dir`` and no copy of it runs between the broker's dirs."""
    return (any(not future for _p, _size, future in dirs[log_dir][1])
            and not any(future for _error, replicas in dirs.values() for _p, _size, future in replicas))


@contextlib.contextmanager
def replica_in_dir(cluster: KafkaCluster, topic: str, broker: int, log_dir: str,
                   messages: int) -> Iterator[tuple[AdminClient, KafkaAdminClient]]:
    """A one-partition topic whose only replica is on ``broker`` in ``log_dir`` (Kafka puts a new replica in either dir:
    it is moved there before the data is written), filled with ``messages`` x 10 kB; and the two admin clients."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers.split(","))
    try:
        create_topic(admin, topic, 1, assignment=[[broker]])
        kp.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, broker): log_dir})
        # Settled: the replica itself in the dir, and no copy left (a future replica there is not enough: were the
        # resource created while the copy runs, kpo would find the replica still in the other dir).
        wait_for(lambda: settled_in(broker_dirs(kp, topic, broker), log_dir), 30, f"the replica settled in {log_dir}")
        fill(cluster.bootstrap_servers, topic, [0], messages=messages)
        yield admin, kp
    finally:
        kp.close()


def failed_naming_the_dir(resources: Resources, name: str, message: str) -> dict[str, Any]:
    """The resource ended Failed for an offline log dir: Ready's reason LogDirOffline with ``message`` in it, the
    partition failed with KAFKA_STORAGE_ERROR, one LogDirOffline Event; returns the status."""
    status = resources.wait_phase(KPR, name, {"Failed", "Succeeded", "Invalid"}, timeout=90)
    assert status["phase"] == "Failed", status
    ready = resources.condition(KPR, name, "Ready")
    assert ready is not None and ready["reason"] == "LogDirOffline", ready
    assert message in ready["message"], ready
    assert [f["reason"] for f in status["failures"]] == ["KAFKA_STORAGE_ERROR"]
    events = resources.wait_event(name, "LogDirOffline")
    assert len(events) == 1, [(e.reason, e.message) for e in resources.events(name)]
    return status


def test_a_target_dir_that_fails_mid_move_fails_the_resource_naming_the_dir(
        small_disk_cluster: KafkaCluster, disk_resources: Resources, topic_name: str) -> None:
    big, small = (str(d) for d in small_disk_cluster.log_dirs(1))
    # 20 MB in the big dir: more than the small one holds.
    with replica_in_dir(small_disk_cluster, topic_name, 1, big, messages=2000) as (admin, kp):
        disk_resources.create(KPR, "to-small", {"partitions": [
            {"topic": topic_name, "partition": 0, "replicas": [1], "logDirs": [small]}]})
        failed_naming_the_dir(disk_resources, "to-small",
                              f"log dir {small} of broker 1 is offline; the replica stays in {big}")
        # Kafka's view: the small dir offline, the replica whole in the big one, the partition led by broker 1.
        dirs = broker_dirs(kp, topic_name)
        assert dirs[small][0] == STORAGE_ERROR
        assert dirs[big] == (0, [(0, dirs[big][1][0][1], False)]) and dirs[big][1][0][1] >= 20_000_000
        described: Any = admin.describe_topics(TopicCollection([topic_name]))[topic_name].result(timeout=30)
        assert described.partitions[0].leader.id == 1


def fill_up(folder: str) -> None:
    """Writes a file into ``folder``'s file system until it is full (ENOSPC)."""
    block = b"\0" * (1 << 20)
    with contextlib.suppress(OSError), open(f"{folder}/filler", "wb", buffering=0) as out:
        while True:
            out.write(block)


def try_to_produce(cluster: KafkaCluster, topic: str) -> None:
    """One message to ``topic``'s partition 0, acknowledged or not: a write that makes a broker meet its failed disk."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1",
                         "message.timeout.ms": 10_000, "logger": QUIET})
    producer.produce(topic, value=b"z" * 10_000, partition=0)
    producer.flush(15)


def test_a_source_dir_that_fails_mid_copy_fails_the_resource_naming_the_dir_and_takes_its_throttle_back(
        small_disk_cluster: KafkaCluster, disk_resources: Resources, topic_name: str) -> None:
    cluster = small_disk_cluster
    big, small = (str(d) for d in cluster.log_dirs(2))
    # 3 MB in the small dir: a copy of 30 s at 100 KiB/s.
    with replica_in_dir(cluster, topic_name, 2, small, messages=300) as (admin, kp):
        disk_resources.create(KPR, "from-small", {"partitions": [
            {"topic": topic_name, "partition": 0, "replicas": [2], "logDirs": [big]}],
            "execution": {"logDirThrottle": 102_400}})
        try:
            wait_for(lambda: any(future for _p, _size, future in broker_dirs(kp, topic_name, 2)[big][1]), 60,
                     "the copy into the big dir under way (a future replica there)")
        except AssertionError as missed:
            raise AssertionError(f"{missed}; the resource: {disk_resources.status(KPR, 'from-small')}") from None
        assert broker_rate(admin, 2, LOG_DIR_RATE) == "102400"

        # The source's file system fills; the next append to the replica fails, and Kafka takes the dir offline.
        fill_up(small)
        try_to_produce(cluster, topic_name)
        wait_for(lambda: broker_dirs(kp, topic_name, 2)[small][0] == STORAGE_ERROR, 60, "the small dir offline")

        failed_naming_the_dir(disk_resources, "from-small",
                              f"the replica on broker 2 is in an offline log dir ({small})")
        # Kafka's view: no replica of the partition in an online dir of broker 2, and the throttle gone.
        dirs = broker_dirs(kp, topic_name, 2)
        assert not [r for r in dirs[big][1] if not r[2]], dirs
        wait_for(lambda: broker_rate(admin, 2, LOG_DIR_RATE) is None, 30, "the intra-broker throttle taken back")


def test_a_disk_the_kernel_makes_read_only_mid_copy_fails_the_resource_naming_the_dir_and_takes_its_throttle_back(
        small_disk_cluster: KafkaCluster, disk_resources: Resources, topic_name: str) -> None:
    cluster = small_disk_cluster
    old, failing = cluster.log_dirs(3)
    # 3 MB in the old dir: a copy of 30 s at 100 KiB/s into the ext4 disk.
    with replica_in_dir(cluster, topic_name, 3, str(old), messages=300) as (admin, kp):
        disk_resources.create(KPR, "to-failing", {"partitions": [
            {"topic": topic_name, "partition": 0, "replicas": [3], "logDirs": [str(failing)]}],
            "execution": {"logDirThrottle": 102_400}})
        try:
            wait_for(lambda: any(size > 0 and future
                                 for _p, size, future in broker_dirs(kp, topic_name, 3)[str(failing)][1]), 60,
                     "the copy into the ext4 dir under way (a future replica there with bytes)")
        except AssertionError as missed:
            raise AssertionError(f"{missed}; the resource: {disk_resources.status(KPR, 'to-failing')}") from None
        assert broker_rate(admin, 3, LOG_DIR_RATE) == "102400"

        fail_read_only(failing)
        wait_for(lambda: broker_dirs(kp, topic_name, 3)[str(failing)][0] == STORAGE_ERROR, 60,
                 "Kafka taking the read-only dir offline")

        failed_naming_the_dir(disk_resources, "to-failing",
                              f"log dir {failing} of broker 3 is offline; the replica stays in {old}")
        # Kafka's view: the replica whole and online in its old dir, led by broker 3, and the throttle gone.
        dirs = broker_dirs(kp, topic_name, 3)
        assert dirs[str(old)] == (0, [(0, dirs[str(old)][1][0][1], False)]) and dirs[str(old)][1][0][1] >= 3_000_000
        described: Any = admin.describe_topics(TopicCollection([topic_name]))[topic_name].result(timeout=30)
        assert described.partitions[0].leader.id == 3
        wait_for(lambda: broker_rate(admin, 3, LOG_DIR_RATE) is None, 30, "the intra-broker throttle taken back")


def ext4_dir_offline(cluster: KafkaCluster, kp: KafkaAdminClient, topic: str) -> tuple[str, str]:
    """Broker 3's ext4 dir offline (the test above leaves it so; run alone, a replica is put there and the disk failed
    under it), and its other dir: ``(online, offline)``."""
    online, failing = (str(d) for d in cluster.log_dirs(3))
    if broker_dirs(kp, topic, 3)[failing][0] != STORAGE_ERROR:
        with replica_in_dir(cluster, f"{topic}-on-ext4", 3, failing, messages=10):
            fail_read_only(Path(failing))
            try_to_produce(cluster, f"{topic}-on-ext4")
            wait_for(lambda: broker_dirs(kp, topic, 3)[failing][0] == STORAGE_ERROR, 60, "the ext4 dir offline")
    return online, failing


def test_a_broker_left_with_one_online_dir_is_refused_for_every_disk_plan_that_needs_another(
        small_disk_cluster: KafkaCluster, disk_resources: Resources, topic_name: str) -> None:
    cluster = small_disk_cluster
    with replica_in_dir(cluster, topic_name, 3, str(cluster.log_dirs(3)[0]), messages=10) as (admin, kp):
        online, offline = ext4_dir_offline(cluster, kp, topic_name)
        refused = {
            "balance-one-dir": ({"goal": "RebalanceDisks", "brokers": [3]}, "OneLogDir",
                                f"broker(s) 3 ({online}) have one online log dir: nothing to balance between"),
            "empty-last-dir": ({"goal": "RemoveDisks", "disks": [{"broker": 3, "logDir": online}]}, "NoLogDirLeft",
                               f"disks names every online log dir of broker 3 ({online})"),
            "empty-failed-dir": ({"goal": "RemoveDisks", "disks": [{"broker": 3, "logDir": offline}]},
                                 "LogDirOffline", f"log dir {offline} of broker 3 is offline: Kafka cannot read"),
        }
        for name, (plan, _reason, _message) in refused.items():
            disk_resources.create(KPR, name, {"plan": {**plan, "topics": [topic_name]},
                                              "execution": {"logDirThrottle": 102_400}})
        for name, (_plan, reason, message) in refused.items():
            status = disk_resources.wait_phase(KPR, name, {"Invalid", "Planning", "Proposed"}, timeout=60)
            assert status["phase"] == "Invalid", (name, status)
            ready = disk_resources.condition(KPR, name, "Ready")
            assert ready is not None and ready["reason"] == reason and message in ready["message"], (name, ready)
            wait_for(lambda n=name, r=reason: [e.reason for e in disk_resources.events(n) if e.type == "Warning"]
                     == [r], 20, f"one Warning Event for {name}")
        # Kafka's view: nothing started, nothing throttled, the replica where it was.
        assert not kp.list_partition_reassignments(), "no reassignment under way"
        assert broker_rate(admin, 3, LOG_DIR_RATE) is None
        assert settled_in(broker_dirs(kp, topic_name, 3), online)
