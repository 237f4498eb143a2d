"""Data and pacing for reassignment tests: partitions heavy enough, and throttled enough, to stay in flight."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from e2e.conftest import QUIET
from e2e.kafka_support import set_throttle
from kpo.domain.model import OngoingReassignment, TopicPartition
from kpo.kafka.client import ConnectionSettings, KafkaAdminAdapter

# ~1.5 MB per heavy partition; at 50 kB/s a move of it takes ~30 s, long enough to act on it mid-flight.
HEAVY_MESSAGES = 150
MESSAGE_BYTES = 10_000
SLOW_RATE = 50_000


def fill(bootstrap_servers: str, topic: str, partitions: list[int], messages: int = HEAVY_MESSAGES) -> None:
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "linger.ms": 20,
                         "logger": QUIET})
    payload = b"z" * MESSAGE_BYTES
    for p in partitions:
        for _ in range(messages):
            producer.produce(topic, value=payload, partition=p)
    assert producer.flush(60) == 0


@contextlib.contextmanager
def throttled(admin: AdminClient, topic: str, rate: int = SLOW_RATE) -> Iterator[None]:
    """A replication throttle on all brokers and all replicas of ``topic``, removed on exit."""
    set_throttle(admin, [1, 2, 3], topic, rate)
    try:
        yield
    finally:
        set_throttle(admin, [1, 2, 3], topic, None)


def kafka(bootstrap_servers: str) -> KafkaAdminAdapter:
    """kpo's own adapter, used by tests to read what Kafka says (ListPartitionReassignments, DescribeLogDirs)."""
    return KafkaAdminAdapter(ConnectionSettings(bootstrap_servers=bootstrap_servers))


def ongoing(bootstrap_servers: str, topic: str) -> dict[int, OngoingReassignment]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        raw = admin.list_partition_reassignments()
    finally:
        admin.close()
    return {tp.partition: OngoingReassignment(tuple(v["replicas"]), tuple(v["adding_replicas"]),
                                              tuple(v["removing_replicas"]))
            for tp, v in raw.items() if tp.topic == topic}


def spec_partitions(topic: str, targets: dict[int, list[int]]) -> list[dict[str, object]]:
    return [{"topic": topic, "partition": p, "replicas": r} for p, r in sorted(targets.items())]


__all__ = ["TopicPartition", "fill", "kafka", "ongoing", "spec_partitions", "throttled"]
