"""The Kafka half of the test bed is real: data flows, and the admin RPCs kpo builds on answer as Kafka documents."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition

from e2e.conftest import QUIET
from e2e.kafka_support import create_topic, describe_topic, replicas_of, set_throttle, wait_for
from kpo_testbed import Testbed, UnhealthyTestbedError


def test_produce_and_consume_1000_messages(kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str) -> None:
    create_topic(kafka_admin, topic_name, partitions=6, replication_factor=3)
    described = describe_topic(kafka_admin, topic_name)
    assert len(described) == 6
    assert all(len(replicas) == 3 and sorted(isr) == sorted(replicas) for replicas, _, isr in described.values())

    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "enable.idempotence": True,
                         "logger": QUIET})
    sent = {f"message-{i}" for i in range(1000)}
    for value in sorted(sent):
        producer.produce(topic_name, key=value.encode(), value=value.encode())
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": topic_name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "logger": QUIET})
    consumer.subscribe([topic_name])
    received: list[str] = []
    partitions_seen: set[int] = set()

    def drain() -> bool:
        for msg in consumer.consume(num_messages=500, timeout=1.0):
            assert msg.error() is None, msg.error()
            received.append(msg.value().decode())
            partitions_seen.add(msg.partition())
        return len(received) >= 1000

    wait_for(drain, 60, "1,000 messages to be consumed")
    consumer.close()
    assert sorted(received) == sorted(sent)
    assert partitions_seen == set(range(6))


def test_reassignment_in_flight_done_and_cancelled(kafka_admin: AdminClient, bootstrap_servers: str,
                                                   topic_name: str) -> None:
    # Partition 0 carries data and a tight throttle, so its move stays in flight; partition 1 is empty and finishes.
    create_topic(kafka_admin, topic_name, partitions=2, assignment=[[1, 2], [1, 2]])
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "logger": QUIET,
                         "linger.ms": 20})
    payload = b"x" * 10_000
    for _ in range(200):
        producer.produce(topic_name, value=payload, partition=0)
    assert producer.flush(30) == 0
    set_throttle(kafka_admin, [1, 2, 3], topic_name, rate=10_000)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        tp0, tp1 = KpTopicPartition(topic_name, 0), KpTopicPartition(topic_name, 1)
        errors = admin.alter_partition_reassignments({tp0: [1, 3], tp1: [2, 3]})
        assert errors == {tp0: None, tp1: None}

        in_flight = wait_for(lambda: admin.list_partition_reassignments([tp0]).get(tp0), 30,
                             "partition 0 to show as reassigning")
        assert in_flight["adding_replicas"] == [3]
        assert in_flight["removing_replicas"] == [2]
        wait_for(lambda: replicas_of(kafka_admin, topic_name)[1] == [2, 3], 60, "partition 1 to reach [2, 3]")

        # KIP-455 cancellation: a None target cancels, and the partition returns to its original replicas.
        assert admin.alter_partition_reassignments({tp0: None}) == {tp0: None}
        wait_for(lambda: not admin.list_partition_reassignments([tp0]), 30, "the cancelled move to disappear")
        # The controller has it; a broker's metadata may still show the move's replicas [1, 3, 2] for a moment.
        wait_for(lambda: replicas_of(kafka_admin, topic_name)[0] == [1, 2], 30, "partition 0 back on [1, 2]")
    finally:
        set_throttle(kafka_admin, [1, 2, 3], topic_name, rate=None)
        admin.close()


def test_preferred_leader_election(testbed: Testbed, kafka_admin: AdminClient, topic_name: str) -> None:
    create_topic(kafka_admin, topic_name, partitions=3, assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    # Restarting node 1 moves partition 0's leadership away; with auto.leader.rebalance.enable=false it stays away.
    testbed.kill_node(1, graceful=True)
    try:
        # Metadata, which any live broker answers: librdkafka may send DescribeTopics to the stopped node and wait.
        wait_for(lambda: kafka_admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions[0].leader
                 not in (1, -1), 60, "leadership to leave node 1")
    finally:
        testbed.start_node(1)
    wait_for(lambda: 1 in describe_topic(kafka_admin, topic_name)[0][2], 60, "node 1 back in the ISR of partition 0")
    assert describe_topic(kafka_admin, topic_name)[0][1] != 1

    partitions = [TopicPartition(topic_name, p) for p in range(3)]
    result = kafka_admin.elect_leaders(ElectionType.PREFERRED, partitions).result(timeout=30)
    # ELECTION_NOT_NEEDED for the partitions already led by their preferred replica, success for partition 0.
    assert result[TopicPartition(topic_name, 0)] is None
    # The controller has elected; the broker answering DescribeTopics learns it from the metadata log a moment later.
    wait_for(lambda: {p: leader for p, (_, leader, _) in describe_topic(kafka_admin, topic_name).items()}
             == {0: 1, 1: 2, 2: 3}, 30, "every partition led by its preferred replica")


def test_describe_log_dirs_reports_both_dirs_of_each_node(testbed: Testbed, bootstrap_servers: str,
                                                          kafka_admin: AdminClient, topic_name: str) -> None:
    create_topic(kafka_admin, topic_name, partitions=4, replication_factor=3)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "logger": QUIET})
    for i in range(400):
        producer.produce(topic_name, value=b"y" * 1000, partition=i % 4)
    assert producer.flush(30) == 0
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        per_broker = admin.describe_log_dirs()
    finally:
        admin.close()
    assert len(per_broker) == 3
    for node in testbed.state.kafka.nodes:
        expected_dirs = {str(d) for d in testbed.state.kafka.log_dirs(node.node_id)}
        reported = [r for r in per_broker if r["broker"] == node.node_id] if "broker" in per_broker[0] else []
        assert reported, f"no DescribeLogDirs answer from node {node.node_id}: {per_broker!r}"
        dirs = {d["log_dir"]: d for d in reported[0]["log_dirs"]}
        assert set(dirs) == expected_dirs
        sizes = {
            p["partition_index"]: p["partition_size"]
            for d in dirs.values() for t in d["topics"] if t["name"] == topic_name for p in t["partitions"]
        }
        assert set(sizes) == {0, 1, 2, 3}
        assert all(size >= 100 * 1000 for size in sizes.values()), sizes


def test_an_unhealthy_bed_is_reported_and_never_wiped(testbed: Testbed, kafka_admin: AdminClient,
                                                      topic_name: str) -> None:
    """`make testbed-up` on a bed that is not healthy says what is wrong and stops: it removed every topic and
    Kubernetes object without a word before (issue 26, item 8). Only `make testbed-down` removes data."""
    create_topic(kafka_admin, topic_name, partitions=1, assignment=[[1, 2]])
    pids = {name: record.pid for name, record in testbed.state.processes.items()}
    testbed.kill_node(3)
    try:
        assert testbed.problems() == ["kafka-3 not started"]
        with pytest.raises(UnhealthyTestbedError, match=r"kafka-3 not started\. Nothing was removed"):
            Testbed.up(testbed.state_dir)
        assert (testbed.state_dir / "data").is_dir()
    finally:
        testbed.start_node(3)
    assert testbed.problems() == []
    again = Testbed.up(testbed.state_dir)
    assert {name: record.pid for name, record in again.state.processes.items() if name != "kafka-3"} == \
        {name: pid for name, pid in pids.items() if name != "kafka-3"}, "the same processes, not a new bed"
    assert topic_name in kafka_admin.list_topics(timeout=30).topics
