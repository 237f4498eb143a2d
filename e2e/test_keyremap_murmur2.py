"""The key-remap report against real keyed messages on the real cluster (issue 6, KIP-253).

First, which murmur2 is Kafka's: keys written by Kafka's own Java producer (ConsoleProducer, default partitioner:
``toPositive(Utils.murmur2(key)) % n``) and by librdkafka's ``murmur2_random`` partitioner land exactly where
``confluent_kafka.murmur2`` and kafka-python's ``murmur2`` say. Then the report itself: 10,000 keyed messages are
written to a 6-partition topic, a TopicPartitionCount grows it to 8 (guard overridden) or 12, the same keys are written
again, and where each key landed before and after is read back. The fraction of keys that changed partition must match
the report's exact figure within binomial tolerance, the operator's own sample of those same messages must give exactly
the measured fraction, every moved key must come from an old partition the report lists as feeding its new one, and the
exact figure must equal the brute-force count over the hash period.
"""

from __future__ import annotations

import math
import subprocess
import time
import uuid
from fractions import Fraction

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, murmur2
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kafka.partitioner.default import murmur2 as java_style_murmur2

from e2e.conftest import QUIET
from e2e.kafka_support import create_topic, describe_topic, wait_for
from e2e.kube_support import Resources
from kpo.domain.keyremap import remapped_fraction, remapped_fraction_by_count
from kpo_testbed import Testbed

KTPC = "TopicPartitionCount"
KEYS = 10_000
pytestmark = pytest.mark.usefixtures("kpo_operator")


def _kafka_python_partition(key: bytes, partitions: int) -> int:
    # Java's Utils.toPositive(Utils.murmur2(key)) % n, with kafka-python's port of Utils.murmur2.
    return (java_style_murmur2(key) & 0x7FFFFFFF) % partitions


def _produce(bootstrap_servers: str, topic: str, keys: list[bytes], tag: bytes, partitions: int) -> None:
    # librdkafka's default partitioner is consistent_random (CRC32); murmur2_random is the Java-compatible one.
    producer = Producer({"bootstrap.servers": bootstrap_servers, "partitioner": "murmur2_random", "acks": "all",
                         "linger.ms": 20, "logger": QUIET})
    # The partitioner hashes over the partition count the producer knows: make sure it knows the current one.
    wait_for(lambda: len(producer.list_topics(topic, timeout=10).topics[topic].partitions) == partitions, 30,
             f"the producer to see {partitions} partitions of {topic}")
    for key in keys:
        producer.produce(topic, key=key, value=tag)
        producer.poll(0)
    assert producer.flush(60) == 0


def _landings(bootstrap_servers: str, topic: str, partitions: int) -> list[tuple[bytes, int, bytes]]:
    """(key, partition, value) of every message, each partition read from its start to its high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"{topic}-landings",
                         "enable.auto.commit": False, "logger": QUIET})
    try:
        ends = {p: consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        found: list[tuple[bytes, int, bytes]] = []
        position = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + 90
        while any(position[p] < ends[p] for p in range(partitions)):
            assert time.monotonic() < deadline, f"could not read {topic} to its end: {position} of {ends}"
            for message in consumer.consume(num_messages=1000, timeout=1.0):
                assert message.error() is None, message.error()
                found.append((message.key(), message.partition(), message.value()))
                position[message.partition()] = message.offset() + 1
        assert len(found) == sum(ends.values())
        return found
    finally:
        consumer.close()


def test_the_murmur2_kpo_uses_is_javas_partitioner(testbed: Testbed, kafka_admin: AdminClient,
                                                   bootstrap_servers: str, topic_name: str) -> None:
    partitions = 7
    create_topic(kafka_admin, topic_name, partitions, replication_factor=1)
    keys = [f"user-{i}-{uuid.uuid4().hex[: i % 13]}".encode() for i in range(1000)] + [b"", b"x", b"\xff\x00\x80"]
    java_producer = testbed.state.kafka.java("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server",
                                             bootstrap_servers, "--topic", topic_name, "--property",
                                             "parse.key=true", "--property", "key.separator=\t")
    text_keys = [k for k in keys if k and b"\t" not in k and b"\n" not in k and k.isascii()]
    lines = "".join(f"{k.decode()}\tjava\n" for k in text_keys)
    written = subprocess.run(java_producer, input=lines, capture_output=True, text=True, timeout=120, check=False)
    assert written.returncode == 0, written.stderr[-3000:]
    _produce(bootstrap_servers, topic_name, keys, b"librdkafka", partitions)

    landed = _landings(bootstrap_servers, topic_name, partitions)
    by_producer = {b"java": 0, b"librdkafka": 0}
    for key, partition, producer in landed:
        by_producer[producer] += 1
        assert partition == murmur2(key, partitions), (producer, key)
        assert partition == _kafka_python_partition(key, partitions), (producer, key)
    assert by_producer == {b"java": len(text_keys), b"librdkafka": len(keys)}
    assert len({p for _, p, _ in landed}) == partitions


@pytest.mark.parametrize(("new_partitions", "policy"), [(12, "RequireMultiple"), (8, "Allow")])
def test_the_report_matches_where_real_keys_land(kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str,
                                                 resources: Resources, new_partitions: int, policy: str) -> None:
    old_partitions = 6
    create_topic(kafka_admin, topic_name, old_partitions, replication_factor=2)
    keys = [f"customer-{i}".encode() for i in range(KEYS)]
    _produce(bootstrap_servers, topic_name, keys, b"before", old_partitions)

    name = f"grow-to-{new_partitions}"
    # sampleMessages above the topic's size: the operator's sample is then exactly the 10,000 messages above.
    resources.create(KTPC, name, {"topic": topic_name, "partitions": new_partitions,
                                  "keyOrdering": {"policy": policy, "sampleMessages": 2 * KEYS}})
    status = resources.wait_phase(KTPC, name, {"Succeeded", "Failed", "Invalid"}, timeout=90)
    assert status["phase"] == "Succeeded", status
    wait_for(lambda: len(describe_topic(kafka_admin, topic_name)) == new_partitions, 30, "the new partitions")
    _produce(bootstrap_servers, topic_name, keys, b"after", new_partitions)

    before: dict[bytes, int] = {}
    after: dict[bytes, int] = {}
    for key, partition, phase in _landings(bootstrap_servers, topic_name, new_partitions):
        (before if phase == b"before" else after)[key] = partition
    assert len(before) == len(after) == KEYS
    assert all(before[k] == murmur2(k, old_partitions) and after[k] == murmur2(k, new_partitions) for k in keys)
    moved = [k for k in keys if before[k] != after[k]]
    measured = Fraction(len(moved), KEYS)

    remap = status["keyRemap"]
    assert (remap["fromPartitions"], remap["toPartitions"]) == (old_partitions, new_partitions)
    exact = Fraction(remap["movedKeySpace"])
    assert exact == remapped_fraction_by_count(old_partitions, new_partitions), "brute force over lcm(N, M) hashes"
    assert exact == remapped_fraction(old_partitions, new_partitions)
    assert float(remap["movedFraction"]) == pytest.approx(float(exact), abs=1e-9)
    tolerance = 4 * math.sqrt(float(exact) * (1 - float(exact)) / KEYS)
    assert abs(float(measured) - float(exact)) <= tolerance, (float(measured), float(exact), tolerance)

    # The operator sampled the same 10,000 messages before growing: its prediction is the measurement, exactly.
    assert remap["sampledMessages"] == KEYS
    assert Fraction(remap["sampledMovedFraction"]) == measured

    fed_by = {s["partition"]: set(s["fedBy"]) for s in remap["sources"]}
    for key in moved:
        assert before[key] in fed_by[after[key]], (key, before[key], after[key])
    if new_partitions % old_partitions == 0:
        assert all(len(feeders) == 1 for feeders in fed_by.values()), "M = kN: one old partition feeds each new one"
