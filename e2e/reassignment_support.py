"""Data and pacing for reassignment tests: partitions heavy enough, and throttled enough, to stay in flight."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from e2e.conftest import QUIET
from e2e.kafka_support import broker_rate, set_throttle, wait_for
from e2e.kube_support import Resources
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


def rates_until_done(resources: Resources, kind: str, name: str, admin: AdminClient, broker: int, key: str,
                     what: str, timeout: float = 300, interval: float = 0.3) -> list[str | None]:
    """Wait for the resource to end (Succeeded, Failed, Invalid), reading ``broker``'s ``key`` from DescribeConfigs at
    every look: the values Kafka showed while the resource ran."""
    rates: list[str | None] = []

    def done() -> bool:
        rates.append(broker_rate(admin, broker, key))
        return resources.status(kind, name).get("phase") in {"Succeeded", "Failed", "Invalid"}

    wait_for(done, timeout, what, interval=interval)
    return rates


def kafka(bootstrap_servers: str) -> KafkaAdminAdapter:
    """kpo's own adapter, used by tests to read what Kafka says (ListPartitionReassignments, DescribeLogDirs)."""
    return KafkaAdminAdapter(ConnectionSettings(bootstrap_servers=bootstrap_servers))


def listed_moves(bootstrap_servers: str) -> dict[Any, Any]:
    """ListPartitionReassignments (kafka-python): every move in flight, as the controller lists them.

    Asked again, with a new client, for up to 30 s while a connection is refused: kafka-python sends the request that
    finds the controller to a node of its metadata, which lists a killed broker until the controller fences it (a CI
    run with a 12 s broker session saw ECONNREFUSED 8 s after a test had stopped the broker)."""
    def ask() -> dict[str, Any]:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=10_000)
        try:
            return {"moves": dict(admin.list_partition_reassignments())}
        finally:
            admin.close()

    return dict(wait_for(ask, 30, "ListPartitionReassignments from a live broker", interval=1)["moves"])


def ongoing(bootstrap_servers: str, topic: str) -> dict[int, OngoingReassignment]:
    """The topic's moves in flight (:func:`listed_moves`)."""
    return {tp.partition: OngoingReassignment(tuple(v["replicas"]), tuple(v["adding_replicas"]),
                                              tuple(v["removing_replicas"]))
            for tp, v in listed_moves(bootstrap_servers).items() if tp.topic == topic}


class KeyedProducer:
    """An idempotent acks=all producer writing numbered keyed messages on a thread until stopped."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "logger": QUIET})
        self.delivered: list[str] = []
        #: Where Kafka put each acknowledged value: (partition, offset), to say where a lost message was.
        self.placed: dict[str, tuple[int, int]] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            value = msg.value().decode()
            self.delivered.append(value)
            self.placed[value] = (msg.partition(), msg.offset())

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(self.topic, key=str(i).encode(), value=str(i).encode(),
                                  on_delivery=self._on_delivery)
            self.producer.poll(0)
            i += 1
            time.sleep(0.002)
        self.producer.flush(60)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[str]:
        """Stop, flush, and return the values Kafka acknowledged; fails on any delivery error."""
        self._stop.set()
        self._thread.join(90)
        assert not self._thread.is_alive(), "the producer did not flush in time"
        assert not self.errors, self.errors[:5]
        return self.delivered


def read_log(bootstrap_servers: str, topic: str, partitions: int) -> list[str]:
    """Every value in the topic, each partition read from its first offset to its high watermark.

    No consumer group, so no rebalance can replay anything: a value seen twice here is in Kafka's log twice.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False, "logger": QUIET})
    ends = {p: consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values: list[str] = []
    position = dict.fromkeys(range(partitions), 0)

    def drained() -> bool:
        for msg in consumer.consume(num_messages=1000, timeout=1.0):
            assert msg.error() is None, msg.error()
            values.append(msg.value().decode())
            position[msg.partition()] = msg.offset() + 1
        return all(position[p] >= ends[p] for p in range(partitions))

    wait_for(drained, 90, f"every partition of {topic} to be read to its high watermark")
    consumer.close()
    assert len(values) == sum(ends.values())
    return values


def spec_partitions(topic: str, targets: dict[int, list[int]]) -> list[dict[str, object]]:
    return [{"topic": topic, "partition": p, "replicas": r} for p, r in sorted(targets.items())]


__all__ = ["KeyedProducer", "TopicPartition", "fill", "kafka", "ongoing", "read_log", "spec_partitions", "throttled"]
