"""The movement lower bound of a scoped Rebalance on the real cluster (issue 26, item 6): a plan that must move bytes
to reach the band within its scope states a bound above zero, worked out again here from what Kafka reports
(DescribeLogDirs), and the bytes Kafka shows moved are no fewer.

The bed's brokers are in racks of their own. The topic's six partitions sit on ``[1, 3]`` (or ``[2, 3]``) and broker 3
is excluded: brokers 1 and 2 take part, so two racks and two replicas per partition. kpo used to take that for "every
partition holds a replica in every rack", sum one bound per rack, and state 0, though each ``[1, 3]`` may become
``[2, 3]``."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from e2e.kafka_support import create_topic, replicas_of
from e2e.kube_support import Resources
from e2e.reassignment_support import MESSAGE_BYTES, fill

KPR = "PartitionReassignment"
TOLERANCE = 0.1
pytestmark = pytest.mark.usefixtures("kpo_operator")


def replica_bytes(bootstrap_servers: str, brokers: list[int]) -> dict[tuple[str, int, int], int]:
    """(topic, partition, broker) -> bytes, every topic's replicas on ``brokers``, from DescribeLogDirs."""
    client = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    found: dict[tuple[str, int, int], int] = {}
    try:
        for broker in brokers:
            for answer in client.describe_log_dirs(None, brokers=[broker]):
                for log_dir in answer["log_dirs"]:
                    for topic in log_dir.get("topics", []):
                        for p in topic["partitions"]:
                            if not p.get("is_future_key"):
                                key = (topic["name"], int(p["partition_index"]), broker)
                                found[key] = found.get(key, 0) + int(p["partition_size"])
    finally:
        client.close()
    return found


def per_broker(sizes: dict[tuple[str, int, int], int], brokers: list[int]) -> dict[int, int]:
    return {b: sum(size for (_, _, on), size in sizes.items() if on == b) for b in brokers}


def test_a_rebalance_that_excludes_a_broker_states_a_true_lower_bound(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources) -> None:
    # The band is over every topic on brokers 1 and 2, which hold what the bed's earlier tests left (170 MB or more
    # each in a full run, less on a worker's own bed): the topic goes to the one holding less, with enough bytes that
    # it must shed about 8 MB. On the fuller one, its own imbalance could ask more than the whole topic can give.
    held = per_broker(replica_bytes(bootstrap_servers, [1, 2]), [1, 2])
    src, dst = (1, 2) if held[1] <= held[2] else (2, 1)
    create_topic(kafka_admin, topic_name, 6, assignment=[[src, 3]] * 6)
    needed = max(18_000_000,
                 int((8_000_000 + (1 + TOLERANCE) / 2 * held[dst]) / (1 - (1 + TOLERANCE) / 2) - held[src]))
    assert needed <= 300_000_000, f"brokers 1 and 2 hold too much for this test to unbalance them: {held}"
    fill(bootstrap_servers, topic_name, list(range(6)), messages=-(-needed // (6 * MESSAGE_BYTES)))
    before = replica_bytes(bootstrap_servers, [1, 2])
    load = per_broker(before, [1, 2])
    mean = (load[1] + load[2]) / 2
    # Brokers 1 and 2 take part: the receiver must end at least at the band's bottom, the sender at most at its top,
    # and only the topic's replicas on the sender may leave it.
    must_receive = max(0.0, (1 - TOLERANCE) * mean - load[dst])
    must_shed = max(0.0, load[src] - (1 + TOLERANCE) * mean)
    by_hand = max(must_receive, must_shed)
    assert by_hand > 5_000_000, f"the topic must unbalance brokers 1 and 2 enough: {load}"

    resources.create(KPR, "scoped", {
        "plan": {"goal": "Rebalance", "topics": [topic_name], "excludeBrokers": [3], "tolerance": TOLERANCE},
        "approval": {"mode": "Automatic"}})
    status = resources.wait_phase(KPR, "scoped", {"Succeeded", "Failed", "Invalid"}, timeout=600)
    assert status["phase"] == "Succeeded", status
    summary: dict[str, Any] = status["summary"]
    bound = summary["lowerBoundBytes"]
    print(f"brokers 1, 2 before: {load}; topic on {src}; by hand {by_hand:.0f} B; lowerBoundBytes {bound}; "
          f"bytesToMove {summary['bytesToMove']}")
    # kpo counts a partition's size once per replica, Kafka's log dirs each replica's own: a few kB apart.
    assert bound >= 0.95 * by_hand, (bound, by_hand, summary)

    after = replicas_of(kafka_admin, topic_name)
    assert all(3 in r for r in after.values()), f"broker 3 keeps its replicas: {after}"
    moved = sum(before.get((topic_name, p, src), 0) for p, r in after.items() if dst in r and src not in r)
    assert moved >= bound, f"Kafka shows {moved} bytes moved from broker {src} to {dst}, below the stated bound {bound}"
    assert summary["bandReached"], summary
