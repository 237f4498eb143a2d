"""The real Kafka adapter: confluent-kafka for what librdkafka offers, kafka-python for what it lacks.

librdkafka has no AlterPartitionReassignments / ListPartitionReassignments (KIP-455) and no DescribeLogDirs, so those
three go through kafka-python; everything else (cluster and topic metadata, configs, leader elections, partition
creation) goes through confluent-kafka. One :class:`ConnectionSettings` feeds both, so TLS and SASL are configured
once. Errors come back as :class:`KafkaRefusal` values per partition, or as :class:`KafkaUnavailable` (retry) /
:class:`KafkaRequestRefused` (report) for a whole request.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import kafka.errors as kafka_errors
from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, TopicCollection, murmur2
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
)
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KpTopicPartition
from kafka.structs import TopicPartitionReplica

from kpo.domain.model import (
    Broker,
    KafkaRefusal,
    LogDirReport,
    OngoingReassignment,
    PartitionState,
    Replicas,
    TopicPartition,
    refusal,
)
from kpo.domain.throttle import ConfigChange
from kpo.kafka.admin import KafkaRequestRefused, KafkaUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class ConnectionSettings:
    """A Kafka connection with its credentials resolved (from Secrets) to literal values."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ca_pem: str | None = None
    cert_pem: str | None = None
    key_pem: str | None = None
    verify_hostname: bool = True
    timeout_seconds: float = 30.0

    def confluent(self) -> dict[str, str | int | float | bool]:
        conf: dict[str, str | int | float | bool] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
            "socket.timeout.ms": int(self.timeout_seconds * 1000),
        }
        if self.sasl_mechanism:
            conf.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.sasl_username or "",
                         "sasl.password": self.sasl_password or ""})
        if self.ca_pem:
            conf["ssl.ca.pem"] = self.ca_pem
        if self.cert_pem and self.key_pem:
            conf.update({"ssl.certificate.pem": self.cert_pem, "ssl.key.pem": self.key_pem})
        if not self.verify_hostname:
            conf["ssl.endpoint.identification.algorithm"] = "none"
        return conf

    def kafka_python(self, files_dir: str) -> dict[str, Any]:
        """kafka-python's keyword arguments; it reads TLS material from files, written 0600 to ``files_dir``."""
        kwargs: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "security_protocol": self.security_protocol,
            "request_timeout_ms": int(self.timeout_seconds * 1000),
            "client_id": "kpo",
        }
        if self.sasl_mechanism:
            kwargs.update({"sasl_mechanism": self.sasl_mechanism, "sasl_plain_username": self.sasl_username,
                           "sasl_plain_password": self.sasl_password})
        for name, pem, arg in (("ca.pem", self.ca_pem, "ssl_cafile"), ("cert.pem", self.cert_pem, "ssl_certfile"),
                               ("key.pem", self.key_pem, "ssl_keyfile")):
            if pem:
                path = os.path.join(files_dir, name)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as handle:
                    handle.write(pem)
                kwargs[arg] = path
        if self.security_protocol in ("SSL", "SASL_SSL"):
            kwargs["ssl_check_hostname"] = self.verify_hostname
        return kwargs


def _ck_refusal(error: KafkaError) -> KafkaRefusal:
    return KafkaRefusal(code=error.name(), message=error.str(), retriable=error.retriable() or refusal(
        error.name()).retriable)


def _kp_refusal(error: type[kafka_errors.KafkaError] | kafka_errors.KafkaError) -> KafkaRefusal:
    code = str(getattr(error, "message", type(error).__name__))
    # kafka-python spells error 39 INVALID_REPLICATION_ASSIGNMENT; Kafka's own name is INVALID_REPLICA_ASSIGNMENT.
    code = {"INVALID_REPLICATION_ASSIGNMENT": "INVALID_REPLICA_ASSIGNMENT"}.get(code, code)
    description = str(getattr(error, "description", "") or "")
    detail = str(error) if isinstance(error, kafka_errors.KafkaError) else ""
    # kafka-python's text carries the whole request; Kafka's own words are the part worth keeping.
    said = re.search(r"needs \w+ permission", detail) or re.search(r"error_message='([^']{1,200})", detail)
    message = description + (f" ({said.group(0).removeprefix('error_message=')})" if said else "")
    return KafkaRefusal(code=code, message=message,
                        retriable=bool(getattr(error, "retriable", False)) or refusal(code).retriable)


class KafkaAdminAdapter:
    """Implements :class:`kpo.kafka.admin.KafkaAdmin` for one cluster. Thread-safe: calls are serialised."""

    def __init__(self, settings: ConnectionSettings) -> None:
        self.settings = settings
        quiet = logging.getLogger("kpo.librdkafka")
        self._admin = AdminClient(settings.confluent(), logger=quiet)
        self._files = tempfile.TemporaryDirectory(prefix="kpo-kafka-")
        self._kp: KafkaAdminClient | None = None
        self._lock = threading.RLock()

    # -------------------------------------------------------------------------------------- plumbing

    @contextlib.contextmanager
    def _kafka_python(self) -> Iterator[KafkaAdminClient]:
        with self._lock:
            if self._kp is None:
                try:
                    self._kp = KafkaAdminClient(**self.settings.kafka_python(self._files.name))
                except kafka_errors.KafkaError as exc:
                    raise KafkaUnavailable(f"cannot connect to Kafka at {self.settings.bootstrap_servers}: "
                                           f"{exc}") from exc
            try:
                yield self._kp
            except kafka_errors.KafkaError as exc:
                found = _kp_refusal(exc)
                # UnknownBrokerIdError is kafka-python's own: its metadata lost a broker that restarted. A new client
                # reads fresh metadata, so it is a reason to reconnect, never a refusal to report.
                unreachable = (kafka_errors.KafkaConnectionError, kafka_errors.MetadataEmptyBrokerList,
                               kafka_errors.KafkaTimeoutError, kafka_errors.UnknownBrokerIdError)
                if found.retriable or isinstance(exc, unreachable):
                    self._reset_kafka_python()
                    raise KafkaUnavailable(str(found)) from exc
                raise KafkaRequestRefused(found) from exc

    def _reset_kafka_python(self) -> None:
        if self._kp is not None:
            with contextlib.suppress(Exception):
                self._kp.close()
        self._kp = None

    def _result(self, future: Future[T]) -> T:
        try:
            return future.result(timeout=self.settings.timeout_seconds + 5)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None:
                raise KafkaUnavailable(str(exc)) from exc
            found = _ck_refusal(error)
            if found.retriable:
                raise KafkaUnavailable(str(found)) from exc
            raise KafkaRequestRefused(found) from exc
        except TimeoutError as exc:
            raise KafkaUnavailable(f"Kafka did not answer within {self.settings.timeout_seconds}s") from exc

    def _call(self, fn: Callable[[], T]) -> T:
        with self._lock:
            return fn()

    # ------------------------------------------------------------------------------------- metadata

    def brokers(self) -> dict[int, Broker]:
        result = self._call(lambda: self._result(
            self._admin.describe_cluster(request_timeout=self.settings.timeout_seconds)))
        return {n.id: Broker(id=n.id, rack=n.rack or None, host=n.host, port=n.port) for n in result.nodes}

    def topic_names(self) -> set[str]:
        try:
            metadata = self._call(lambda: self._admin.list_topics(timeout=self.settings.timeout_seconds))
        except KafkaException as exc:
            raise KafkaUnavailable(str(exc)) from exc
        return set(metadata.topics)

    def describe_topics(self, topics: Collection[str]) -> dict[TopicPartition, PartitionState]:
        if not topics:
            return {}
        out: dict[TopicPartition, PartitionState] = {}
        with self._lock:
            futures = self._admin.describe_topics(TopicCollection(sorted(set(topics))),
                                                  request_timeout=self.settings.timeout_seconds)
            for name, future in futures.items():
                try:
                    description = self._result(future)
                except KafkaRequestRefused as exc:
                    if exc.refusal.code == "UNKNOWN_TOPIC_OR_PART":
                        continue
                    raise
                for p in description.partitions:
                    out[TopicPartition(name, p.id)] = PartitionState(
                        replicas=tuple(r.id for r in p.replicas),
                        leader=p.leader.id if p.leader is not None else -1,
                        isr=tuple(r.id for r in p.isr),
                    )
        return out

    def topic_configs(self, topics: Collection[str], names: Collection[str]) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        with self._lock:
            for topic in sorted(set(topics)):
                futures = self._admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)],
                                                       request_timeout=self.settings.timeout_seconds)
                for future in futures.values():
                    try:
                        entries = self._result(future)
                    except KafkaRequestRefused as exc:
                        if exc.refusal.code == "UNKNOWN_TOPIC_OR_PART":
                            break
                        raise
                    out[topic] = {k: str(v.value) for k, v in entries.items() if k in names}
        return out

    def broker_configs(self, brokers: Collection[int], names: Collection[str]) -> dict[int, dict[str, str]]:
        out: dict[int, dict[str, str]] = {}
        with self._lock:
            # librdkafka sends a BROKER resource to that broker, so it takes one per request.
            for broker in sorted(set(brokers)):
                futures = self._admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, str(broker))],
                                                       request_timeout=self.settings.timeout_seconds)
                for future in futures.values():
                    entries = self._result(future)
                    out[broker] = {k: str(v.value) for k, v in entries.items()
                                   if k in names and v.value is not None and not v.is_default
                                   and v.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value}
        return out

    def alter_configs(self, changes: Sequence[ConfigChange]) -> None:
        grouped: dict[tuple[str, str], list[ConfigEntry]] = {}
        for change in changes:
            grouped.setdefault((change.resource, change.name), []).append(ConfigEntry(
                change.key, change.value, incremental_operation=getattr(AlterConfigOpType, change.op)))
        with self._lock:
            for (resource, name), entries in grouped.items():
                kind = ConfigResource.Type.BROKER if resource == "broker" else ConfigResource.Type.TOPIC
                futures = self._admin.incremental_alter_configs([ConfigResource(kind, name,
                                                                                incremental_configs=entries)])
                for future in futures.values():
                    self._result(future)

    # ------------------------------------------------------------------------------- reassignments

    def list_reassignments(self, partitions: Collection[TopicPartition] | None = None
                           ) -> dict[TopicPartition, OngoingReassignment]:
        with self._kafka_python() as kp:
            asked = None if partitions is None else [KpTopicPartition(tp.topic, tp.partition) for tp in partitions]
            if asked == []:
                return {}
            raw = kp.list_partition_reassignments(asked, timeout_ms=int(self.settings.timeout_seconds * 1000))
        return {
            TopicPartition(tp.topic, tp.partition): OngoingReassignment(
                replicas=tuple(v["replicas"]), adding=tuple(v["adding_replicas"]),
                removing=tuple(v["removing_replicas"]))
            for tp, v in raw.items()
        }

    def alter_reassignments(self, targets: Mapping[TopicPartition, Replicas | None]
                            ) -> dict[TopicPartition, KafkaRefusal | None]:
        if not targets:
            return {}
        request = {KpTopicPartition(tp.topic, tp.partition): (list(r) if r is not None else None)
                   for tp, r in targets.items()}
        with self._kafka_python() as kp:
            raw = kp.alter_partition_reassignments(request, timeout_ms=int(self.settings.timeout_seconds * 1000))
        answers: dict[TopicPartition, KafkaRefusal | None] = {}
        for tp in targets:
            error = raw.get(KpTopicPartition(tp.topic, tp.partition), "missing")
            if error == "missing":
                answers[tp] = KafkaRefusal("UNKNOWN", "Kafka did not answer for this partition", retriable=True)
            else:
                answers[tp] = None if error is None else _kp_refusal(error)
        return answers

    def log_dirs(self, topics: Collection[str]) -> LogDirReport:
        report = LogDirReport()
        if not topics:
            return report
        with self._kafka_python() as kp:
            per_broker = kp.describe_log_dirs(sorted(set(topics)))
        for answer in per_broker:
            broker = int(answer["broker"])
            report.broker_dirs[broker] = frozenset(d["log_dir"] for d in answer["log_dirs"]
                                                   if d.get("error_code", 0) == 0)
            for log_dir in answer["log_dirs"]:
                for topic in log_dir.get("topics", []):
                    for p in topic["partitions"]:
                        key = (TopicPartition(topic["name"], int(p["partition_index"])), broker)
                        if p.get("is_future_key"):
                            # A log-dir move in progress: the current replica is counted in its own dir.
                            report.future_dirs[key] = log_dir["log_dir"]
                            continue
                        report.replica_dirs[key] = log_dir["log_dir"]
                        report.sizes[key] = max(report.sizes.get(key, 0), int(p["partition_size"]))
        return report

    def alter_replica_log_dirs(self, moves: Mapping[tuple[TopicPartition, int], str]
                               ) -> dict[tuple[TopicPartition, int], KafkaRefusal | None]:
        if not moves:
            return {}
        request = {TopicPartitionReplica(tp.topic, tp.partition, broker): path for (tp, broker), path in moves.items()}
        with self._kafka_python() as kp:
            raw = kp.alter_replica_log_dirs(request)
        answers: dict[tuple[TopicPartition, int], KafkaRefusal | None] = {}
        for replica, error in raw.items():
            key = (TopicPartition(replica.topic, replica.partition), replica.broker_id)
            ok = error is None or error is kafka_errors.NoError or isinstance(error, kafka_errors.NoError)
            answers[key] = None if ok else _kp_refusal(error)
        return answers

    # ------------------------------------------------------------------------------------ leaders

    def elect_leaders(self, partitions: Sequence[TopicPartition] | None, unclean: bool = False
                      ) -> dict[TopicPartition, KafkaRefusal | None]:
        kind = ElectionType.UNCLEAN if unclean else ElectionType.PREFERRED
        asked = None if partitions is None else [CkTopicPartition(tp.topic, tp.partition) for tp in partitions]
        # No request_timeout: confluent-kafka 2.16's elect_leaders fails with a SystemError on any keyword argument.
        # socket.timeout.ms bounds the request and _result bounds the wait.
        result = self._call(lambda: self._result(self._admin.elect_leaders(kind, asked)))
        return {TopicPartition(tp.topic, tp.partition): (None if err is None else _ck_refusal(err))
                for tp, err in result.items()}

    # ---------------------------------------------------------------------------------- partitions

    def create_partitions(self, topic: str, total: int, assignment: Sequence[Replicas] | None = None
                          ) -> KafkaRefusal | None:
        replicas = [list(r) for r in assignment] if assignment else None
        growth = NewPartitions(topic, total, replica_assignment=replicas) if replicas else NewPartitions(topic, total)
        with self._lock:
            futures = self._admin.create_partitions([growth], request_timeout=self.settings.timeout_seconds,
                                                    operation_timeout=self.settings.timeout_seconds)
            try:
                self._result(futures[topic])
            except KafkaRequestRefused as exc:
                return exc.refusal
        return None

    def sample_key_partitions(self, topic: str, limit: int, partition_counts: Sequence[int]
                              ) -> dict[tuple[int, ...], int]:
        # No subscription, so no consumer group is joined and no offset is committed: the sampler only reads.
        consumer = Consumer({**self.settings.confluent(), "group.id": "kpo-key-sampler", "enable.auto.commit": False,
                             "enable.partition.eof": True}, logger=logging.getLogger("kpo.librdkafka"))
        counts: Counter[tuple[int, ...]] = Counter()
        try:
            ends = self._sample_ranges(consumer, topic, limit)
            consumer.assign([CkTopicPartition(topic, p, start) for p, (start, _) in ends.items()])
            # A sample is a report, not a guarantee: stop after a bounded time and report what was read.
            deadline = time.monotonic() + 2 * self.settings.timeout_seconds
            sampled = 0
            while ends and sampled < limit and time.monotonic() < deadline:
                for message in consumer.consume(num_messages=1000, timeout=1.0):
                    error, partition, offset = message.error(), message.partition() or 0, message.offset() or 0
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            ends.pop(partition, None)
                            continue
                        found = _ck_refusal(error)
                        raise KafkaUnavailable(str(found)) if found.retriable else KafkaRequestRefused(found)
                    if offset + 1 >= ends.get(partition, (0, 0))[1]:
                        ends.pop(partition, None)
                    key = message.key()
                    if key is None or sampled >= limit:
                        continue
                    counts[tuple(murmur2(key, n) for n in partition_counts)] += 1
                    sampled += 1
        except KafkaException as exc:
            raise KafkaUnavailable(str(exc)) from exc
        finally:
            consumer.close()
        return dict(counts)

    def _sample_ranges(self, consumer: Consumer, topic: str, limit: int) -> dict[int, tuple[int, int]]:
        """partition -> (first offset to read, high watermark): the newest ``limit / partitions`` records of each."""
        metadata = consumer.list_topics(topic, timeout=self.settings.timeout_seconds)
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            error = described.error if described is not None else KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
            found = _ck_refusal(error)
            raise KafkaUnavailable(str(found)) if found.retriable else KafkaRequestRefused(found)
        partitions = sorted(described.partitions)
        share = -(-limit // max(1, len(partitions)))
        ranges: dict[int, tuple[int, int]] = {}
        for p in partitions:
            low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, p),
                                                       timeout=self.settings.timeout_seconds)
            if high > low:
                ranges[p] = (max(low, high - share), high)
        return ranges

    def close(self) -> None:
        with self._lock:
            self._reset_kafka_python()
            self._files.cleanup()
