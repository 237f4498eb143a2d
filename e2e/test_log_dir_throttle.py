"""The intra-broker throttle on the real cluster (issue 30, item 3): ``execution.logDirThrottle`` sets
``replica.alter.log.dirs.io.max.bytes.per.second`` on the brokers that copy a replica between their own log dirs
while they copy, follows a changed rate, leaves a rate the user set alone, and is gone when the resource succeeds.
Judged with Kafka's own ConfigCommand and DescribeLogDirs, not with kpo's status alone."""

from __future__ import annotations

import re
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from e2e.kafka_support import create_topic, wait_for
from e2e.kube_support import Resources
from e2e.reassignment_support import fill, kafka
from kpo.domain.model import LogDirReport, TopicPartition
from kpo.domain.throttle import LOG_DIR_RATE
from kpo_testbed import Testbed

KPR = "PartitionReassignment"
SLOW = 102_400  # 100 KiB/s: ~6 MB take a minute, so the copy is seen in flight
SLOWER = 81_920  # a changed rate, still slow enough for the copy to be seen in flight under it
FAST = 52_428_800
USERS_RATE = "7340032"

pytestmark = pytest.mark.usefixtures("kpo_operator")


def configs_of(testbed: Testbed, bootstrap_servers: str, broker: int) -> dict[str, str]:
    """A broker's dynamic configs as kafka-configs.sh --describe prints them."""
    out = testbed.state.kafka.run_tool("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap_servers,
                                       "--describe", "--entity-type", "brokers", "--entity-name", str(broker))
    return dict(re.findall(r"^\s+([a-z.]+)=(\S*) sensitive=", out, flags=re.MULTILINE))


def users_rate(testbed: Testbed, bootstrap_servers: str, broker: int, value: str | None) -> None:
    change = ["--add-config", f"{LOG_DIR_RATE}={value}"] if value else ["--delete-config", LOG_DIR_RATE]
    testbed.state.kafka.run_tool("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap_servers, "--alter",
                                 "--entity-type", "brokers", "--entity-name", str(broker), *change)


def test_a_log_dir_move_runs_under_the_intra_broker_throttle_and_leaves_no_rate_behind(
        testbed: Testbed, kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str,
        resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1], [2]])
    fill(bootstrap_servers, topic_name, [0, 1], messages=600)
    adapter = kafka(bootstrap_servers)
    current = adapter.log_dirs([topic_name], [1, 2]).replica_dirs
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    other = {b: next(str(d) for d in testbed.state.kafka.log_dirs(b) if str(d) != current[(tp, b)])
             for tp, b in ((tp0, 1), (tp1, 2))}
    users_rate(testbed, bootstrap_servers, 2, USERS_RATE)
    try:
        resources.create(KPR, "dirs", {"partitions": [
            {"topic": topic_name, "partition": 0, "replicas": [1], "logDirs": [other[1]]},
            {"topic": topic_name, "partition": 1, "replicas": [2], "logDirs": [other[2]]},
        ], "execution": {"logDirThrottle": SLOW}})
        wait_for(lambda: (tp0, 1) in adapter.log_dirs([topic_name], [1]).future_dirs, 60,
                 "broker 1 copying orders-0 into its other dir")
        # While broker 1 copies: kpo's rate on broker 1, the user's on broker 2 as it was.
        assert configs_of(testbed, bootstrap_servers, 1).get(LOG_DIR_RATE) == str(SLOW)
        assert configs_of(testbed, bootstrap_servers, 2).get(LOG_DIR_RATE) == USERS_RATE
        # The copy as the status shows it, against DescribeLogDirs: the replica's bytes, some of them copied.
        def copying() -> dict[str, Any] | None:
            entries = resources.status(KPR, "dirs").get("progress", {}).get("logDirs") or []
            return next((e for e in entries if e["broker"] == 1 and e["copying"] == 1), None)

        entry = wait_for(copying, 30, "status.progress.logDirs showing broker 1's copy")
        assert entry["logDir"] == other[1] and entry["partitions"] == 1
        assert entry["bytesToMove"] == adapter.log_dirs([topic_name], [1]).sizes[(tp0, 1)]
        assert 0 <= entry["bytesCopied"] < entry["bytesToMove"]
        status = resources.status(KPR, "dirs")
        assert status["phase"] == "Executing"
        assert (status["throttle"]["logDirRate"], status["throttle"]["logDirBrokers"]) == (SLOW, [1])
        # A changed rate is followed on the broker while the copy runs, not when it ends; 6 MB unthrottled would have
        # been copied long before.
        resources.patch_spec(KPR, "dirs", {"execution": {"logDirThrottle": SLOWER}})
        wait_for(lambda: configs_of(testbed, bootstrap_servers, 1).get(LOG_DIR_RATE) == str(SLOWER), 60,
                 "broker 1 at the new rate")
        assert (tp0, 1) in adapter.log_dirs([topic_name], [1]).future_dirs, "still copying: throttled"
        resources.patch_spec(KPR, "dirs", {"execution": {"logDirThrottle": FAST}})
        resources.wait_phase(KPR, "dirs", "Succeeded", timeout=120)
        report = adapter.log_dirs([topic_name], [1, 2])
        assert (report.replica_dirs[(tp0, 1)], report.replica_dirs[(tp1, 2)]) == (other[1], other[2])
        assert report.future_dirs == {}
        assert LOG_DIR_RATE not in configs_of(testbed, bootstrap_servers, 1), "kpo's rate taken back"
        assert configs_of(testbed, bootstrap_servers, 2).get(LOG_DIR_RATE) == USERS_RATE, "the user's kept"
        assert "throttle" not in resources.status(KPR, "dirs")
    finally:
        users_rate(testbed, bootstrap_servers, 2, None)


def test_log_dir_moves_count_against_max_moves_as_kafka_shows_them(
        testbed: Testbed, kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str,
        resources: Resources) -> None:
    """Three replicas of broker 1 to its other dir under ``maxMoves: 1``: DescribeLogDirs, sampled throughout, never
    shows broker 1 copying more than one of them at once (a future replica each), and shows every copy at some point;
    all three end in the dir named."""
    partitions = [0, 1, 2]
    create_topic(kafka_admin, topic_name, len(partitions), assignment=[[1] for _ in partitions])
    # 3 MB each: Kafka's quota measures its rate over at least ten 1 s windows, so a copy that starts after a quiet
    # spell may pass ~10 s worth of the rate (2 MB here) at disk speed. With 1.5 MB a whole copy once finished between
    # two samples (a CI run saw two of the three).
    fill(bootstrap_servers, topic_name, partitions, messages=300)
    adapter = kafka(bootstrap_servers)
    current = adapter.log_dirs([topic_name], [1]).replica_dirs
    tps = [TopicPartition(topic_name, p) for p in partitions]
    other = {tp: next(str(d) for d in testbed.state.kafka.log_dirs(1) if str(d) != current[(tp, 1)]) for tp in tps}
    resources.create(KPR, "one-copy-at-a-time", {"partitions": [
        {"topic": topic_name, "partition": tp.partition, "replicas": [1], "logDirs": [other[tp]]} for tp in tps
    ], "execution": {"logDirThrottle": 2 * SLOW, "maxMoves": 1}})
    samples: list[set[TopicPartition]] = []

    def finished() -> bool:
        report = adapter.log_dirs([topic_name], [1])
        samples.append({tp for tp, _broker in report.future_dirs})
        return all(report.replica_dirs.get((tp, 1)) == other[tp] for tp in tps) and not report.future_dirs

    wait_for(finished, 180, "every replica in the dir named", interval=0.3)
    over = [sorted(tp.partition for tp in s) for s in samples if len(s) > 1]
    assert not over, f"{len(over)} of {len(samples)} samples show more than one copy at once (partitions): {over[:3]}"
    seen = set().union(*samples)
    assert seen == set(tps), f"copies seen under way: {sorted(map(str, seen))} (too fast to sample?)"
    resources.wait_phase(KPR, "one-copy-at-a-time", "Succeeded", timeout=60)
    assert LOG_DIR_RATE not in configs_of(testbed, bootstrap_servers, 1)


@pytest.mark.parametrize("ending", ["stop", "delete"])
def test_a_stopped_or_deleted_resource_cancels_its_copy_between_log_dirs(
        testbed: Testbed, kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str,
        resources: Resources, ending: str) -> None:
    """Mid-copy under a slow intra-broker rate, ``stop: true`` (or deletion) cancels the copy: DescribeLogDirs shows no
    future replica and the replica still in its dir, and the rate is gone from the broker (a copy left running would
    go on unthrottled)."""
    create_topic(kafka_admin, topic_name, 1, assignment=[[1]])
    fill(bootstrap_servers, topic_name, [0], messages=300)
    adapter = kafka(bootstrap_servers)
    tp = TopicPartition(topic_name, 0)
    current = adapter.log_dirs([topic_name], [1]).replica_dirs[(tp, 1)]
    other = next(str(d) for d in testbed.state.kafka.log_dirs(1) if str(d) != current)
    resources.create(KPR, "halted", {"partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [1], "logDirs": [other]}],
        "execution": {"logDirThrottle": SLOW}})
    wait_for(lambda: (tp, 1) in adapter.log_dirs([topic_name], [1]).future_dirs, 60, "broker 1 copying the replica")
    if ending == "stop":
        resources.patch_spec(KPR, "halted", {"stop": True})
        status = resources.wait_phase(KPR, "halted", {"Stopped", "Failed"}, timeout=60)
        assert status["phase"] == "Stopped", status
        assert "throttle" not in status
    else:
        resources.delete(KPR, "halted")
        wait_for(lambda: not resources.exists(KPR, "halted"), 60, "the finalizer to let go")
    def settled() -> list[LogDirReport]:
        report = adapter.log_dirs([topic_name], [1])
        return [] if report.future_dirs else [report]

    report = wait_for(settled, 30, "no future replica")[0]
    assert report.replica_dirs[(tp, 1)] == current, "the replica stays in its dir"
    assert LOG_DIR_RATE not in configs_of(testbed, bootstrap_servers, 1)
