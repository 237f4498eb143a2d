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
from kafka.protocol.admin import AlterPartitionReassignmentsRequest
from kafka.structs import TopicPartition as KpTopicPartition
from kafka.structs import TopicPartitionReplica

from kpo.domain import access
from kpo.domain.model import (
    Broker,
    DirCapacity,
    KafkaRefusal,
    LogDirReport,
    OngoingReassignment,
    PartitionState,
    Replicas,
    TopicPartition,
    refusal,
)
from kpo.domain.throttle import ConfigChange
from kpo.kafka import tls_files
from kpo.kafka.admin import KafkaAuthenticationFailed, KafkaRequestRefused, KafkaUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")


class RepeatedLibrdkafkaLines(logging.Filter):
    """librdkafka logs every failed connection attempt (ten a second to a dead bootstrap node, from each new client):
    let each distinct line through once per ``window`` seconds, however many clients repeat it. The client's name
    (``rdkafka#producer-7``) and the milliseconds in a line do not make it distinct; what failed, and where, does."""

    _VARYING = re.compile(r"rdkafka#\S+|\d+ms")

    def __init__(self, window: float = 600.0, clock: Callable[[], float] = time.monotonic,
                 remembered: int = 256) -> None:
        super().__init__()
        self._window, self._clock, self._remembered = window, clock, remembered
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = self._VARYING.sub("", record.getMessage())
        with self._lock:
            now = self._clock()
            if now - self._last.get(key, float("-inf")) < self._window:
                return False
            if len(self._last) >= self._remembered:
                self._last = {k: t for k, t in self._last.items() if now - t < self._window}
            self._last[key] = now
            return True


#: The logger librdkafka writes to (each adapter hands it to its client), filtered once here.
LIBRDKAFKA_LOG = logging.getLogger("kpo.librdkafka")
LIBRDKAFKA_LOG.addFilter(RepeatedLibrdkafkaLines())
# One refused connection, then a fresh client with fresh metadata; a third try would be the next tick's.
_CONTROLLER_ATTEMPTS = 2
# The timeout of DescribeCluster and DescribeTopics, and how long the metadata's broker list stands in after
# DescribeCluster timed out (see brokers()).
_DESCRIBE_CLUSTER_TIMEOUT = 2.0
_DESCRIBE_CLUSTER_PAUSE = 15.0


# librdkafka sends admin requests to the node its metadata names as controller (in KRaft: any live broker, picked by
# the broker that answered). Its default refreshes that metadata every 5 minutes, so after that node dies every
# request waits out its whole timeout on it ("Timed out waiting for controller") until the refresh: refresh often,
# and give up a connection attempt to a dead node quickly, retrying it at a bounded pace.
ROUTE_AROUND_DEAD_NODES: dict[str, str | int | float | bool] = {
    "topic.metadata.refresh.interval.ms": 2_000,
    "socket.connection.setup.timeout.ms": 3_000,
    "reconnect.backoff.ms": 200,
    "reconnect.backoff.max.ms": 2_000,
}

_REASSIGNABLE_TOPIC = AlterPartitionReassignmentsRequest.ReassignableTopic
_REASSIGNABLE_PARTITION = _REASSIGNABLE_TOPIC.ReassignablePartition


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

    @property
    def principal(self) -> str:
        """The principal Kafka's authorizer sees, as ACLs name it (without SASL: whatever the listener maps to)."""
        return f"User:{self.sasl_username}" if self.sasl_mechanism else "the connection's principal"

    def confluent(self) -> dict[str, str | int | float | bool]:
        conf: dict[str, str | int | float | bool] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
            "socket.timeout.ms": int(self.timeout_seconds * 1000),
            **ROUTE_AROUND_DEAD_NODES,
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
            # Bounded like librdkafka's (above): a fresh client gives up on a dead bootstrap node within the request
            # timeout, retries a node at most every 2 s, and its broker list is never older than 10 s.
            "bootstrap_timeout_ms": int(self.timeout_seconds * 1000),
            "reconnect_backoff_max_ms": 2_000,
            "metadata_max_age_ms": 10_000,
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


def capacity_of(broker: int, log_dirs: Sequence[Mapping[str, Any]]) -> dict[tuple[int, str], DirCapacity]:
    """The capacity each online dir reports (DescribeLogDirs v4+, KIP-827); -1, or nothing, from an older broker."""
    return {(broker, d["log_dir"]): DirCapacity(int(d["total_bytes"]), int(d["usable_bytes"]))
            for d in log_dirs
            if d.get("error_code", 0) == 0 and int(d.get("total_bytes", -1)) > 0
            and int(d.get("usable_bytes", -1)) >= 0}


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


def _alter_reassignments_request(targets: Mapping[TopicPartition, Replicas | None], allow_rf_change: bool, *,
                                 timeout_ms: int) -> Any:
    """AlterPartitionReassignmentsRequest with KIP-860's AllowReplicationFactorChange, from kafka-python's own
    protocol class (its schema declares versions 0-1). The version is negotiated with the broker: a broker before
    4.1 gets version 0, which has no such field, and kpo's own check of the replication factor is then the only one.
    """
    by_topic: dict[str, list[Any]] = {}
    for tp, replicas in sorted(targets.items()):
        by_topic.setdefault(tp.topic, []).append(_REASSIGNABLE_PARTITION(
            partition_index=tp.partition, replicas=list(replicas) if replicas is not None else None))
    return AlterPartitionReassignmentsRequest(
        timeout_ms=timeout_ms, allow_replication_factor_change=allow_rf_change,
        topics=[_REASSIGNABLE_TOPIC(name=name, partitions=parts) for name, parts in by_topic.items()])


class KafkaAdminAdapter:
    """Implements :class:`kpo.kafka.admin.KafkaAdmin` for one cluster. Thread-safe: calls are serialised.

    The first call checks the login: librdkafka does not fail an admin request whose broker refused the credentials,
    it times out while reconnecting in the background (several logins a second), so the check watches librdkafka's
    error callback. A refused login closes both clients at once and turns the adapter into a refusal that answers
    every later call without touching the network (``login_refused``), until the operator replaces it once the
    cluster's backoff step has passed. ``on_login_refused`` (returns what to add to the message, e.g. when the next
    attempt is) and ``on_login`` tell the operator, which keeps that backoff.
    """

    def __init__(self, settings: ConnectionSettings, *, on_login_refused: Callable[[], str] | None = None,
                 on_login: Callable[[], None] | None = None) -> None:
        self.settings = settings
        quiet = LIBRDKAFKA_LOG
        self._auth_errors: list[KafkaError] = []
        conf: dict[str, Any] = {**settings.confluent(), "error_cb": self._on_error}
        self._ck: AdminClient | None = AdminClient(conf, logger=quiet)
        self._files = tls_files.private_dir()
        self._kp: KafkaAdminClient | None = None
        self._lock = threading.RLock()
        self._login_checked = False
        self._refused_login: str | None = None
        self._on_login_refused = on_login_refused
        self._on_login = on_login
        self._unreachable_said: set[int] = set()
        #: DescribeCluster timed out waiting for a dead "controller": the metadata answers until this monotonic time.
        self._describe_cluster_after = 0.0
        self._racks: dict[int, str | None] = {}

    # ---------------------------------------------------------------------------------------- login

    def _on_error(self, error: KafkaError) -> None:
        # Called from poll(), in the polling thread. Other errors (a broker down) reach the calls themselves.
        if access.is_authentication(error.name()):
            self._auth_errors.append(error)

    @property
    def login_refused(self) -> bool:
        return self._refused_login is not None

    @property
    def _admin(self) -> AdminClient:
        with self._lock:
            self._check_login()
            assert self._ck is not None
            return self._ck

    def _check_login(self) -> None:
        """Raise the refusal of an adapter whose login Kafka refused; on first use, find out whether it does."""
        if self._refused_login is not None:
            raise KafkaAuthenticationFailed(self._refused_login)
        if self._ck is None:
            raise KafkaUnavailable("the Kafka connection was closed")
        if self._login_checked:
            return
        future = self._ck.describe_cluster(request_timeout=self.settings.timeout_seconds)
        deadline = time.monotonic() + self.settings.timeout_seconds
        while not future.done() and not self._auth_errors and time.monotonic() < deadline:
            self._ck.poll(0.1)
        self._ck.poll(0)
        if self._auth_errors:
            self._refuse_login(self._auth_errors[0].str())
        # Any other outcome (Kafka unreachable, slow) is for the calls to report; the login is not checked again,
        # but a refusal that shows up later is still found by refused_login_meanwhile.
        self._login_checked = True
        if future.done() and future.exception() is None and self._on_login is not None:
            self._on_login()

    def _refuse_login(self, detail: str) -> None:
        self._drop_clients()
        message = access.login_refused_message(self.settings.sasl_mechanism, self.settings.sasl_username,
                                               self.settings.bootstrap_servers, detail)
        if self._on_login_refused is not None:
            message += self._on_login_refused()
        self._refused_login = message
        log.warning("%s", message)
        raise KafkaAuthenticationFailed(message)

    def refused_login_meanwhile(self) -> bool:
        """Whether Kafka has refused this adapter's login, also after the first check (credentials changed on the
        brokers); such an adapter stops connecting at once."""
        with self._lock:
            if self._refused_login is None and self._ck is not None:
                self._ck.poll(0)
                if self._auth_errors:
                    with contextlib.suppress(KafkaAuthenticationFailed):
                        self._refuse_login(self._auth_errors[0].str())
            return self._refused_login is not None

    def _drop_clients(self) -> None:
        # Without a reference librdkafka's handle is destroyed, which ends its background reconnects.
        self._reset_kafka_python()
        self._ck = None

    # -------------------------------------------------------------------------------------- plumbing

    @contextlib.contextmanager
    def _kafka_python(self, request: access.Request | None = None) -> Iterator[KafkaAdminClient]:
        with self._lock:
            self._check_login()  # a refused login must not start kafka-python's own reconnects
            if self._kp is None:
                try:
                    self._kp = KafkaAdminClient(**self.settings.kafka_python(self._files.name))
                except kafka_errors.SaslAuthenticationFailedError as exc:
                    self._refuse_login(str(exc))
                except kafka_errors.KafkaError as exc:
                    raise KafkaUnavailable(f"cannot connect to Kafka at {self.settings.bootstrap_servers}: "
                                           f"{exc}") from exc
            try:
                yield self._kp
            except kafka_errors.SaslAuthenticationFailedError as exc:
                self._refuse_login(str(exc))
            except kafka_errors.KafkaError as exc:
                found = _kp_refusal(exc)
                # UnknownBrokerIdError is kafka-python's own: its metadata lost a broker that restarted. A new client
                # reads fresh metadata, so it is a reason to reconnect, never a refusal to report.
                unreachable = (kafka_errors.KafkaConnectionError, kafka_errors.MetadataEmptyBrokerList,
                               kafka_errors.KafkaTimeoutError, kafka_errors.UnknownBrokerIdError)
                if found.retriable or isinstance(exc, unreachable):
                    self._reset_kafka_python()
                    raise KafkaUnavailable(str(found)) from exc
                raise KafkaRequestRefused(self._named(found, request)) from exc

    def _named(self, refusal: KafkaRefusal, request: access.Request | None) -> KafkaRefusal:
        return refusal if request is None else access.named(refusal, request, self.settings.principal)

    def _reset_kafka_python(self) -> None:
        if self._kp is not None:
            with contextlib.suppress(Exception):
                self._kp.close()
        self._kp = None

    def _result(self, future: Future[T], request: access.Request | None = None) -> T:
        try:
            return future.result(timeout=self.settings.timeout_seconds + 5)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None:
                raise KafkaUnavailable(str(exc)) from exc
            found = _ck_refusal(error)
            if found.retriable:
                raise KafkaUnavailable(str(found)) from exc
            raise KafkaRequestRefused(self._named(found, request)) from exc
        except TimeoutError as exc:
            raise KafkaUnavailable(f"Kafka did not answer within {self.settings.timeout_seconds}s") from exc

    def _call(self, fn: Callable[[], T]) -> T:
        with self._lock:
            return fn()

    # ------------------------------------------------------------------------------------- metadata

    def brokers(self) -> dict[int, Broker]:
        """The live brokers (DescribeCluster), with their racks.

        librdkafka sends DescribeCluster to the node its metadata names as controller, which in KRaft is any live
        broker; a broker that just died stays named for seconds (until it is fenced and the metadata refreshed), and
        each request to it waited out the whole timeout, holding every other call of this adapter and every tick of
        the cluster with it (a stall was reported 15-25 s after a SIGKILL instead of stallAfterSeconds). So the
        request gets a short timeout; when it times out, the metadata's broker list (which librdkafka reads from any
        live broker) answers instead, with the racks DescribeCluster gave last, for ``_DESCRIBE_CLUSTER_PAUSE`` —
        unless it names a broker whose rack is not known yet."""
        if time.monotonic() >= self._describe_cluster_after:
            try:
                result = self._call(lambda: self._result(self._admin.describe_cluster(
                    request_timeout=min(self.settings.timeout_seconds, _DESCRIBE_CLUSTER_TIMEOUT)),
                    access.describe_cluster()))
            except KafkaUnavailable as exc:
                if "TIMED_OUT" not in str(exc):
                    raise
                self._describe_cluster_after = time.monotonic() + _DESCRIBE_CLUSTER_PAUSE
            else:
                return self._described(result.nodes)
        try:
            metadata = self._call(lambda: self._admin.list_topics(timeout=self.settings.timeout_seconds))
        except KafkaException as exc:
            raise KafkaUnavailable(str(exc)) from exc
        if not set(metadata.brokers) <= set(self._racks):
            # A broker whose rack DescribeCluster never gave (the first call, or a new broker): no rack is not a
            # rack, so ask DescribeCluster itself, with its whole timeout.
            self._describe_cluster_after = 0.0
            return self._described(self._call(lambda: self._result(self._admin.describe_cluster(
                request_timeout=self.settings.timeout_seconds), access.describe_cluster())).nodes)
        return {b.id: Broker(id=b.id, rack=self._racks[b.id], host=str(b.host), port=int(b.port))
                for b in metadata.brokers.values()}

    def _described(self, nodes: Sequence[Any]) -> dict[int, Broker]:
        """DescribeCluster's brokers; their racks are kept for when the metadata has to answer instead."""
        self._racks = {n.id: n.rack or None for n in nodes}
        return {n.id: Broker(id=n.id, rack=n.rack or None, host=n.host, port=n.port) for n in nodes}

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
            futures = self._admin.describe_topics(TopicCollection(sorted(set(topics))), request_timeout=min(
                self.settings.timeout_seconds, _DESCRIBE_CLUSTER_TIMEOUT))
            for name, future in futures.items():
                try:
                    description = self._result(future, access.describe_topic(name))
                except KafkaRequestRefused as exc:
                    if exc.refusal.code == "UNKNOWN_TOPIC_OR_PART":
                        continue
                    raise
                except KafkaUnavailable as exc:
                    # Sent to a node that just died (see brokers()): the metadata of a live broker says the same.
                    if "TIMED_OUT" not in str(exc):
                        raise
                    return self._topics_from_metadata(topics)
                for p in description.partitions:
                    out[TopicPartition(name, p.id)] = PartitionState(
                        replicas=tuple(r.id for r in p.replicas),
                        leader=p.leader.id if p.leader is not None else -1,
                        isr=tuple(r.id for r in p.isr),
                    )
        return out

    def _topics_from_metadata(self, topics: Collection[str]) -> dict[TopicPartition, PartitionState]:
        """DescribeTopics' answer read from a Metadata response instead (unknown topics left out)."""
        try:
            metadata = self._call(lambda: self._admin.list_topics(timeout=self.settings.timeout_seconds))
        except KafkaException as exc:
            raise KafkaUnavailable(str(exc)) from exc
        out: dict[TopicPartition, PartitionState] = {}
        for name in sorted(set(topics) & set(metadata.topics)):
            topic = metadata.topics[name]
            if topic.error is not None:
                refusal = _ck_refusal(topic.error)
                if refusal.code == "UNKNOWN_TOPIC_OR_PART":
                    continue
                raise KafkaUnavailable(str(refusal)) if refusal.retriable else KafkaRequestRefused(
                    self._named(refusal, access.describe_topic(name)))
            for p in topic.partitions.values():
                out[TopicPartition(name, p.id)] = PartitionState(replicas=tuple(p.replicas), leader=p.leader,
                                                                 isr=tuple(p.isrs))
        return out

    def topic_configs(self, topics: Collection[str], names: Collection[str]) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        with self._lock:
            for topic in sorted(set(topics)):
                futures = self._admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)],
                                                       request_timeout=self.settings.timeout_seconds)
                for future in futures.values():
                    try:
                        entries = self._result(future, access.describe_topic_configs(topic))
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
                    entries = self._result(future, access.describe_broker_configs(str(broker)))
                    out[broker] = {k: str(v.value) for k, v in entries.items()
                                   if k in names and v.value is not None and not v.is_default
                                   and v.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value}
        return out

    def metadata_level(self) -> int | None:
        # librdkafka does not expose the finalized features; kafka-python reads them from ApiVersions v3+.
        with self._kafka_python(access.describe_cluster()) as kp:
            features = kp.describe_features()
        finalized = (features.get("metadata.version") or {}).get("finalized")
        return int(finalized[1]) if finalized else None

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
                    self._result(future, access.alter_configs(resource, name))

    # ------------------------------------------------------------------------------- reassignments

    def _to_controller(self, call: Callable[[KafkaAdminClient], T], request: access.Request) -> T:
        """A KIP-455 request, which kafka-python sends to the node its metadata named as controller (in KRaft: any
        live broker, picked by the broker that answered). Until a dead node is fenced it may still be named, and the
        connection is refused: a fresh client reads fresh metadata and names another, so try again at once."""
        for attempt in range(_CONTROLLER_ATTEMPTS):
            try:
                with self._kafka_python(request) as kp:
                    return call(kp)
            except KafkaUnavailable as exc:
                if attempt + 1 == _CONTROLLER_ATTEMPTS or not isinstance(exc.__cause__,
                                                                          kafka_errors.KafkaConnectionError):
                    raise
        raise AssertionError("unreachable")

    def list_reassignments(self, partitions: Collection[TopicPartition] | None = None
                           ) -> dict[TopicPartition, OngoingReassignment]:
        asked = None if partitions is None else [KpTopicPartition(tp.topic, tp.partition) for tp in partitions]
        if asked == []:
            return {}
        raw = self._to_controller(lambda kp: kp.list_partition_reassignments(
            asked, timeout_ms=int(self.settings.timeout_seconds * 1000)), access.list_reassignments())
        return {
            TopicPartition(tp.topic, tp.partition): OngoingReassignment(
                replicas=tuple(v["replicas"]), adding=tuple(v["adding_replicas"]),
                removing=tuple(v["removing_replicas"]))
            for tp, v in raw.items()
        }

    def alter_reassignments(self, targets: Mapping[TopicPartition, Replicas | None], *,
                            allow_replication_factor_change: bool = False
                            ) -> dict[TopicPartition, KafkaRefusal | None]:
        if not targets:
            return {}
        request = _alter_reassignments_request(targets, allow_replication_factor_change,
                                               timeout_ms=int(self.settings.timeout_seconds * 1000))
        # kafka-python's alter_partition_reassignments() has no way to set AllowReplicationFactorChange (its default,
        # true, is what it sends). The request is its own protocol class, sent the way that method sends it: to the
        # controller, retried once on NOT_CONTROLLER, the top-level error raised. Sent again only when the connection
        # failed: the same targets (or cancellations) twice are harmless.
        response = self._to_controller(lambda kp: kp._manager.run(
            kp._send_request_to_controller, request, lambda r: (kafka_errors.for_code(r.error_code),)),
            access.alter_reassignments())
        answers: dict[TopicPartition, KafkaRefusal | None] = {}
        for topic in response.responses:
            for partition in topic.partitions:
                code = kafka_errors.for_code(partition.error_code)
                found = None if code is kafka_errors.NoError else _kp_refusal(code)
                if found is not None and partition.error_message:
                    found = KafkaRefusal(found.code, partition.error_message, found.retriable)
                if found is not None:
                    found = self._named(found, access.alter_reassignments())
                answers[TopicPartition(topic.name, partition.partition_index)] = found
        return {tp: answers.get(tp, KafkaRefusal("UNKNOWN", "Kafka did not answer for this partition",
                                                 retriable=True)) for tp in targets}

    def log_dirs(self, topics: Collection[str], brokers: Collection[int]) -> LogDirReport:
        if not topics:
            return LogDirReport()
        per_broker = []
        unreachable: set[int] = set()
        with self._kafka_python(access.describe_log_dirs()) as kp:
            # One broker at a time, and only those the caller's DescribeCluster found live: kafka-python's own
            # metadata may still name a broker that died (its refresh keeps trying that node), and each request to it
            # would wait out the whole timeout. One that died since is left out — its replicas are not there to
            # measure — instead of failing the whole tick.
            for broker in sorted(brokers):
                try:
                    per_broker.extend(kp.describe_log_dirs(sorted(set(topics)), brokers=[broker]))
                except (kafka_errors.KafkaConnectionError, kafka_errors.NodeNotReadyError,
                        kafka_errors.KafkaTimeoutError, kafka_errors.UnknownBrokerIdError):
                    unreachable.add(broker)
        # Said when it changes, not on every tick; a broker not asked (Kafka no longer lists it) keeps its state.
        asked = set(brokers)
        if lost := unreachable - self._unreachable_said:
            log.info("DescribeLogDirs: broker(s) %s cannot be reached; their replicas are left out", sorted(lost))
        if back := (self._unreachable_said & asked) - unreachable:
            log.info("DescribeLogDirs: broker(s) %s answer again", sorted(back))
        self._unreachable_said = (self._unreachable_said - asked) | unreachable
        report = LogDirReport(unreachable=frozenset(unreachable))
        for answer in per_broker:
            broker = int(answer["broker"])
            report.broker_dirs[broker] = frozenset(d["log_dir"] for d in answer["log_dirs"]
                                                   if d.get("error_code", 0) == 0)
            if offline := frozenset(d["log_dir"] for d in answer["log_dirs"] if d.get("error_code", 0) != 0):
                report.offline_dirs[broker] = offline
            report.capacity.update(capacity_of(broker, answer["log_dirs"]))
            for log_dir in answer["log_dirs"]:
                for topic in log_dir.get("topics", []):
                    for p in topic["partitions"]:
                        key = (TopicPartition(topic["name"], int(p["partition_index"])), broker)
                        if p.get("is_future_key"):
                            # A log-dir move in progress: the current replica is counted in its own dir.
                            report.future_dirs[key] = log_dir["log_dir"]
                            report.future_sizes[key] = int(p["partition_size"])
                            continue
                        report.replica_dirs[key] = log_dir["log_dir"]
                        report.sizes[key] = max(report.sizes.get(key, 0), int(p["partition_size"]))
        return report

    def dir_capacity(self, brokers: Collection[int]) -> dict[tuple[int, str], DirCapacity]:
        capacity: dict[tuple[int, str], DirCapacity] = {}
        with self._kafka_python(access.describe_log_dirs()) as kp:
            for broker in sorted(brokers):
                try:
                    # An empty topic list asks for the dirs alone (null would list every partition of the broker).
                    answers = kp.describe_log_dirs([], brokers=[broker])
                except (kafka_errors.KafkaConnectionError, kafka_errors.NodeNotReadyError,
                        kafka_errors.KafkaTimeoutError, kafka_errors.UnknownBrokerIdError):
                    continue  # not there to measure: left out, as log_dirs does
                for answer in answers:
                    capacity.update(capacity_of(int(answer["broker"]), answer["log_dirs"]))
        return capacity

    def alter_replica_log_dirs(self, moves: Mapping[tuple[TopicPartition, int], str]
                               ) -> dict[tuple[TopicPartition, int], KafkaRefusal | None]:
        if not moves:
            return {}
        request = {TopicPartitionReplica(tp.topic, tp.partition, broker): path for (tp, broker), path in moves.items()}
        with self._kafka_python(access.alter_log_dirs()) as kp:
            raw = kp.alter_replica_log_dirs(request)
        answers: dict[tuple[TopicPartition, int], KafkaRefusal | None] = {}
        for replica, error in raw.items():
            key = (TopicPartition(replica.topic, replica.partition), replica.broker_id)
            ok = error is None or error is kafka_errors.NoError or isinstance(error, kafka_errors.NoError)
            answers[key] = None if ok else self._named(_kp_refusal(error), access.alter_log_dirs())
        return answers

    # ------------------------------------------------------------------------------------ leaders

    def elect_leaders(self, partitions: Sequence[TopicPartition] | None, unclean: bool = False
                      ) -> dict[TopicPartition, KafkaRefusal | None]:
        kind = ElectionType.UNCLEAN if unclean else ElectionType.PREFERRED
        asked = None if partitions is None else [CkTopicPartition(tp.topic, tp.partition) for tp in partitions]
        # No request_timeout: confluent-kafka 2.16's elect_leaders fails with a SystemError on any keyword argument.
        # socket.timeout.ms bounds the request and _result bounds the wait.
        result = self._call(lambda: self._result(self._admin.elect_leaders(kind, asked), access.elect_leaders()))
        return {TopicPartition(tp.topic, tp.partition): (
                    None if err is None else self._named(_ck_refusal(err), access.elect_leaders()))
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
                self._result(futures[topic], access.create_partitions(topic))
            except KafkaRequestRefused as exc:
                return exc.refusal
        return None

    def sample_key_partitions(self, topic: str, limit: int, partition_counts: Sequence[int]
                              ) -> dict[tuple[bool, ...], int]:
        self._admin  # noqa: B018 - the login check: a refused login must not start a consumer's reconnects
        # No subscription, so no consumer group is joined and no offset is committed: the sampler only reads.
        consumer = Consumer({**self.settings.confluent(), "group.id": "kpo-key-sampler", "enable.auto.commit": False,
                             "enable.partition.eof": True}, logger=logging.getLogger("kpo.librdkafka"))
        counts: Counter[tuple[bool, ...]] = Counter()
        first, *others = partition_counts
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
                        raise KafkaUnavailable(str(found)) if found.retriable else KafkaRequestRefused(
                            self._named(found, access.read_topic(topic)))
                    if offset + 1 >= ends.get(partition, (0, 0))[1]:
                        ends.pop(partition, None)
                    key = message.key()
                    if key is None or sampled >= limit:
                        continue
                    before = murmur2(key, first)
                    counts[tuple(murmur2(key, n) != before for n in others)] += 1
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
            raise KafkaUnavailable(str(found)) if found.retriable else KafkaRequestRefused(
                self._named(found, access.read_topic(topic)))
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
            self._drop_clients()
            self._files.cleanup()
