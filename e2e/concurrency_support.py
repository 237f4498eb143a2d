"""Hundreds of PartitionReassignments at once, judged from Kafka's view and the Kubernetes API only (issue 25).

Shared by the e2e suite (``e2e/test_concurrency.py``, sized for CI) and the bench (``bench/concurrency``, 500
resources). Nothing here looks inside the operator: the limits are checked on samples of Kafka's own
ListPartitionReassignments, the throttles on the brokers' and topics' configs, the phases and Events through the API
server, the memory on ``/proc``. The operator's Prometheus counters (``kpo_kafka_requests_total``,
``kpo_executor_passes_total``, ``kpo_kubernetes_requests_total``) are read when it exports them, and their figures
are left out (said so) when it does not.

The scenario: topics of 6 partitions, replication factor 2, placed by hand so that every broker leads a third of them
and is the follower of another third; each resource moves one partition's follower to the broker that holds no
replica of it (leader kept), under ``spec.execution.throttle``. So every broker sends a third of the bytes and
receives a third, and the bytes floor is ``resources / 3 x partition size / throttle``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from confluent_kafka import Producer, TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka.admin import KafkaAdminClient
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo.domain.estimate import refill_watcher, scheduler_run
from kpo.domain.fluid import floor, simulate
from kpo.domain.model import TopicPartition
from kpo.domain.refill import RefillPolicy
from kpo.domain.scheduling import Execution, Limits, Move, Order, Owner, SchedulerConfig

QUIET = logging.getLogger("e2e.concurrency.librdkafka")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False

GROUP, VERSION, PLURAL, KIND = "kpo.dev", "v1alpha1", "partitionreassignments", "PartitionReassignment"
BROKERS = (1, 2, 3)
# (leader, follower) of partition i is PAIRS[i % 6]: each broker leads a third and follows a third of the partitions.
PAIRS = ((1, 2), (2, 3), (3, 1), (1, 3), (2, 1), (3, 2))
PARTITIONS_PER_TOPIC = 6
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@dataclass(frozen=True)
class ExecutionLimits:
    """The operator's defaults (``kpo.config.ExecutionDefaults``), which the resources do not override."""

    max_moves: int = 50
    max_moves_per_broker: int = 5
    max_moves_per_broker_direction: int = 2


@dataclass(frozen=True)
class Scenario:
    resources: int = 200
    #: Bytes per partition: 3 messages of ~10 kB by default (~30 kB; the issue's bench used ~50 kB).
    message_bytes: int = 10_000
    messages: int = 3
    throttle: int = 20_480
    poll_interval: float = 2.0
    limits: ExecutionLimits = ExecutionLimits()
    apply_threads: int = 4
    #: Seconds between two ListPartitionReassignments samples.
    sample_interval: float = 0.25
    #: The bounds the checks use.
    max_ratio: float = 1.2
    max_first_move_seconds: float = 1.0
    max_rss_bytes: int = 250 * 2**20
    #: Seconds the throttles may take to go after the last Succeeded, and after the last resource is gone.
    throttle_grace: float = 10.0
    deletion_timeout: float = 90.0

    @property
    def topics(self) -> int:
        return math.ceil(self.resources / PARTITIONS_PER_TOPIC)


@dataclass(frozen=True)
class PlannedMove:
    name: str
    topic: str
    partition: int
    leader: int
    current: tuple[int, int]
    target: tuple[int, int]

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def receiver(self) -> int:
        return self.target[1]


def plan(prefix: str, scenario: Scenario) -> list[PlannedMove]:
    moves = []
    for i in range(scenario.resources):
        leader, follower = PAIRS[i % len(PAIRS)]
        third = next(b for b in BROKERS if b not in (leader, follower))
        topic = f"{prefix}-{i // PARTITIONS_PER_TOPIC:03d}"
        moves.append(PlannedMove(f"m-{i:04d}", topic, i % PARTITIONS_PER_TOPIC, leader, (leader, follower),
                                 (leader, third)))
    return moves


def topic_names(moves: Sequence[PlannedMove]) -> list[str]:
    return sorted({m.topic for m in moves})


def create_topics(admin: AdminClient, topics: Sequence[str]) -> None:
    assignment = [list(PAIRS[p % len(PAIRS)]) for p in range(PARTITIONS_PER_TOPIC)]
    new = [NewTopic(t, num_partitions=len(assignment), replica_assignment=assignment) for t in topics]
    for future in admin.create_topics(new, request_timeout=60).values():
        future.result(timeout=90)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        described = describe(admin, topics)
        if len(described) == len(topics) * PARTITIONS_PER_TOPIC and all(
                leader == replicas[0] and len(isr) == 2 for replicas, leader, isr in described.values()):
            return
        time.sleep(0.5)
    raise AssertionError("the test topics did not get their leaders and in-sync replicas within 60 s")


def describe(admin: AdminClient, topics: Sequence[str]) -> dict[tuple[str, int], tuple[list[int], int, list[int]]]:
    """(topic, partition) -> (replicas, leader, isr); topics Kafka does not know yet are left out."""
    found = {}
    for name, future in admin.describe_topics(TopicCollection(list(topics)), request_timeout=15).items():
        try:
            desc = future.result(timeout=20)
        except Exception:  # a topic just created may not be described yet
            continue
        for p in desc.partitions:
            found[(name, p.id)] = ([r.id for r in p.replicas], p.leader.id if p.leader else -1, [r.id for r in p.isr])
    return found


def produce(bootstrap_servers: str, moves: Sequence[PlannedMove], scenario: Scenario) -> None:
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "linger.ms": 20,
                         "compression.type": "none", "logger": QUIET})
    payload = os.urandom(scenario.message_bytes)
    for move in moves:
        for _ in range(scenario.messages):
            producer.produce(move.topic, value=payload, partition=move.partition)
        producer.poll(0)
    assert producer.flush(120) == 0, "not every message was delivered within 120 s"


def partition_sizes(bootstrap_servers: str, moves: Sequence[PlannedMove], fallback: int) -> dict[tuple[str, int], int]:
    """The leader replica's size of each partition (DescribeLogDirs), what a new replica copies."""
    from kpo.kafka.client import ConnectionSettings, KafkaAdminAdapter  # noqa: PLC0415

    adapter = KafkaAdminAdapter(ConnectionSettings(bootstrap_servers=bootstrap_servers))
    try:
        report = adapter.log_dirs(topic_names(moves), list(BROKERS))
    finally:
        adapter.close()
    return {m.key: report.sizes.get((TopicPartition(m.topic, m.partition), m.leader), fallback) for m in moves}


# ----------------------------------------------------------------------------------------------- the schedule floor

@dataclass(frozen=True)
class Floor:
    #: max over brokers of bytes in or out / throttle: no schedule beats it (kpo.domain.fluid.floor).
    bytes_seconds: float
    #: kpo's scheduler at these limits, this throttle and poll interval, with refill between polls at the operator's
    #: defaults, run through the fluid model as ``make bench-exec`` does: the schedule the limits allow.
    schedule_seconds: float


def schedule_floor(moves: Sequence[PlannedMove], sizes: dict[tuple[str, int], int], scenario: Scenario) -> Floor:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    limits = scenario.limits
    for_crs = Limits(max_moves=None, max_moves_per_broker=limits.max_moves_per_broker,
                     max_moves_per_broker_direction=limits.max_moves_per_broker_direction)
    config = SchedulerConfig(defaults=for_crs, max_moves=limits.max_moves)
    chains: list[list[Move]] = []
    executions: dict[Owner, Execution] = {}
    for i, m in enumerate(moves):
        owner = Owner(base + timedelta(milliseconds=i), "bench", m.name)
        executions[owner] = Execution(order=Order.AS_GIVEN, limits=Limits(), throttle=float(scenario.throttle))
        chains.append([Move(owner=owner, partition=TopicPartition(m.topic, m.partition), current=m.current,
                            target=m.target, size_bytes=sizes[m.key], leader=m.leader)])
    run = scheduler_run(chains, executions, config)
    policy = RefillPolicy(scenario.poll_interval)
    result = simulate(run.start, scenario.throttle, scenario.poll_interval,
                      refill_watcher(run, policy, scenario.throttle, 0.1), 0.1)
    return Floor(floor(run.sim_moves, scenario.throttle), result.makespan)


# --------------------------------------------------------------------------------------------- Kafka's view, sampled

@dataclass
class LimitSeen:
    in_flight: int = 0
    per_broker: int = 0
    into_broker: int = 0
    out_of_leader: int = 0
    violations: list[str] = field(default_factory=list)


class KafkaSampler:
    """ListPartitionReassignments every ``interval`` seconds, and DescribeTopics every second, on a thread.

    Keeps every sample of the test's partitions, the first time each partition was seen moving or at its target,
    and the last time any was seen moving."""

    def __init__(self, bootstrap_servers: str, admin: AdminClient, moves: Sequence[PlannedMove],
                 interval: float) -> None:
        self.kafka = KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=10_000)
        self.admin = admin
        self.moves = {m.key: m for m in moves}
        self.topics = topic_names(moves)
        self.interval = interval
        self.samples: list[tuple[float, dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]]] = []
        self.first_seen: dict[tuple[str, int], float] = {}
        self.at_target: dict[tuple[str, int], float] = {}
        self.last_moving: float | None = None
        self.errors: list[str] = []
        self.requests = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="kafka-sampler")

    def _run(self) -> None:
        next_describe = 0.0
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                raw = self.kafka.list_partition_reassignments()
            except Exception as exc:  # a sample lost is said, not fatal
                self.errors.append(f"{type(exc).__name__}: {exc}")
                raw = None
            self.requests += 1
            now = time.monotonic()
            if raw is not None:
                sample = {(tp.topic, tp.partition): (tuple(v["replicas"]), tuple(v["adding_replicas"]))
                          for tp, v in raw.items() if (tp.topic, tp.partition) in self.moves}
                self.samples.append((now, sample))
                for key in sample:
                    self.first_seen.setdefault(key, now)
                if sample:
                    self.last_moving = now
            if now >= next_describe:
                next_describe = now + 1.0
                with contextlib.suppress(Exception):
                    for key, (replicas, _, _) in describe(self.admin, self.topics).items():
                        move = self.moves.get(key)
                        if move is not None and tuple(replicas) == move.target:
                            self.at_target.setdefault(key, time.monotonic())
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - began)))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.kafka.close()

    def submitted(self, key: tuple[str, int]) -> float | None:
        """When the move was first seen in Kafka: listed as moving, or (a move too quick to be sampled) at its
        target in DescribeTopics."""
        seen = [t for t in (self.first_seen.get(key), self.at_target.get(key)) if t is not None]
        return min(seen) if seen else None

    def limits(self, limits: ExecutionLimits, origin: float = 0.0) -> LimitSeen:
        """The most seen at once, counted as kpo counts (``kpo.domain.scheduling``): the new replicas receive, the
        leader sends; a move touches its receivers and its leader. Violations are dated in seconds from ``origin``."""
        seen = LimitSeen()
        for at, sample in self.samples:
            touched: Counter[int] = Counter()
            into: Counter[int] = Counter()
            out: Counter[int] = Counter()
            for key, (_, adding) in sample.items():
                leader = self.moves[key].leader
                receivers = set(adding)
                into.update(receivers)
                out[leader] += len(receivers)
                touched.update(receivers | {leader} if receivers else set())
            figures = {"in flight": (len(sample), limits.max_moves),
                       "touching one broker": (max(touched.values(), default=0), limits.max_moves_per_broker),
                       "copying into one broker": (max(into.values(), default=0),
                                                   limits.max_moves_per_broker_direction),
                       "served by one leader": (max(out.values(), default=0), limits.max_moves_per_broker_direction)}
            seen.in_flight = max(seen.in_flight, figures["in flight"][0])
            seen.per_broker = max(seen.per_broker, figures["touching one broker"][0])
            seen.into_broker = max(seen.into_broker, figures["copying into one broker"][0])
            seen.out_of_leader = max(seen.out_of_leader, figures["served by one leader"][0])
            for what, (value, limit) in figures.items():
                if value > limit and len(seen.violations) < 20:
                    seen.violations.append(f"t={at - origin:.1f} s: {value} moves {what} (limit {limit})")
        return seen


def moving(kafka: KafkaAdminClient, moves: Sequence[PlannedMove]) -> set[tuple[str, int]]:
    keys = {m.key for m in moves}
    return {(tp.topic, tp.partition) for tp in kafka.list_partition_reassignments() if (tp.topic, tp.partition) in keys}


def throttle_residue(admin: AdminClient, topics: Sequence[str]) -> list[str]:
    """Every replication throttle rate on a broker and every throttled-replicas key (even empty) on the topics."""
    left = []
    for broker in BROKERS:
        resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
        entries = next(iter(admin.describe_configs([resource], request_timeout=15).values())).result(timeout=20)
        for key in RATE_KEYS:
            entry = entries.get(key)
            if entry is not None and not entry.is_default:
                left.append(f"broker {broker} {key}={entry.value}")
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    for i in range(0, len(resources), 50):
        for resource, future in admin.describe_configs(resources[i:i + 50], request_timeout=15).items():
            entries = future.result(timeout=20)
            for key in REPLICA_KEYS:
                entry = entries.get(key)
                if entry is not None and not entry.is_default:
                    left.append(f"topic {resource.name} {key}={entry.value!r}")
    return left


def remove_broker_throttles(admin: AdminClient, keep: Sequence[str]) -> None:
    """Cleanup only: take back the broker rates the run left (not those that were there before it started)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry  # noqa: PLC0415

    for broker in BROKERS:
        ops = [ConfigEntry(k, "", incremental_operation=AlterConfigOpType.DELETE) for k in RATE_KEYS
               if not any(line.startswith(f"broker {broker} {k}=") for line in keep)]
        resource = ConfigResource(ConfigResource.Type.BROKER, str(broker), incremental_configs=ops)
        with contextlib.suppress(Exception):
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(timeout=30)


# ------------------------------------------------------------------------------------------------- Kubernetes's view

class Kube:
    """The test's own requests to the API server, counted (to subtract them from the API server's own counts)."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _count(self, verb: str, n: int = 1) -> None:
        with self._lock:
            self.requests[verb] += n

    def create(self, move: PlannedMove, throttle: int, cluster: str | None = None) -> float:
        spec: dict[str, Any] = {"partitions": [{"topic": move.topic, "partition": move.partition,
                                                "replicas": list(move.target)}],
                                "execution": {"throttle": throttle}}
        if cluster is not None:
            spec["clusterRef"] = cluster
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": move.name}, "spec": spec}
        self._count("POST")
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, body)
        return time.monotonic()

    def apply(self, moves: Sequence[PlannedMove], throttle: int, threads: int) -> dict[str, float]:
        """Create every resource, from a few threads as ``kubectl apply`` of a big file would; name -> created."""
        with ThreadPoolExecutor(threads) as pool:
            done = list(pool.map(lambda m: (m.name, self.create(m, throttle)), moves))
        return dict(done)

    def phases(self) -> dict[str, str | None]:
        self._count("LIST")
        listed: dict[str, Any] = self.custom.list_namespaced_custom_object(  # type: ignore[assignment]
            GROUP, VERSION, self.namespace, PLURAL)
        return {i["metadata"]["name"]: (i.get("status") or {}).get("phase") for i in listed["items"]}

    def succeeded_events(self) -> Counter[str]:
        """Events with reason Succeeded per resource (an Event repeated by the recorder counts as many times)."""
        self._count("LIST")
        events = self.core.list_namespaced_event(self.namespace, field_selector="reason=Succeeded").items
        counted: Counter[str] = Counter()
        for event in events:
            if event.involved_object.kind == KIND:
                counted[str(event.involved_object.name)] += max(1, event.count or 1)
        return counted

    def delete_all(self) -> None:
        self._count("DELETECOLLECTION")
        self.custom.delete_collection_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)

    def apiserver_requests(self) -> float | None:
        """Requests the API server has served for kpo's kinds, Events and ConfigMaps (watches left out; Leases too:
        kube-controller-manager and the API server renew theirs every few seconds, whatever kpo does)."""
        try:
            request = self.api.param_serialize("GET", "/metrics", auth_settings=["BearerToken"])
            response = self.api.call_api(*request, _request_timeout=20)
            text = (response.read() or b"").decode()
        except (ApiException, OSError):
            return None
        total = 0.0
        for line in text.splitlines():
            if not line.startswith("apiserver_request_total{"):
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            if labels.get("verb") == "WATCH":
                continue
            if labels.get("group") == GROUP or labels.get("resource") in ("events", "configmaps"):
                total += float(line.rsplit(" ", 1)[1])
        return total


def wait(check: Callable[[], bool], timeout: float, interval: float = 0.5) -> float | None:
    """Seconds until ``check`` held, or None if it did not within ``timeout``."""
    began = time.monotonic()
    while True:
        if check():
            return time.monotonic() - began
        if time.monotonic() - began > timeout:
            return None
        time.sleep(interval)


# ------------------------------------------------------------------------------------------------------- metrics

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def scrape_metrics(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """name -> [(labels, value)] from the operator's metrics endpoint; empty if it does not answer."""
    import urllib.request  # noqa: PLC0415

    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return found
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not line.startswith("#"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
            found.setdefault(match.group(1), []).append((labels, float(match.group(3))))
    return found


def metric_sum(metrics: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float | None:
    rows = metrics.get(name)
    if rows is None:
        return None
    return sum(v for found, v in rows if all(found.get(k) == want for k, want in labels.items()))


# ---------------------------------------------------------------------------------------------------- the report

@dataclass
class Report:
    resources: int
    partition_bytes: int = 0
    throttle: int = 0
    apply_seconds: float = 0.0
    wall_seconds: float | None = None
    kafka_seconds: float | None = None
    floor: Floor | None = None
    first_move_after_apply: float | None = None
    submit_p50: float | None = None
    submit_max: float | None = None
    never_seen: int = 0
    seen: LimitSeen = field(default_factory=LimitSeen)
    samples: int = 0
    sample_errors: int = 0
    not_succeeded: dict[str, str | None] = field(default_factory=dict)
    succeeded_events: dict[int, int] = field(default_factory=dict)
    events_not_one: list[str] = field(default_factory=list)
    moves_after_success: int = 0
    throttles_after_success: list[str] = field(default_factory=list)
    throttles_cleared_after: float | None = None
    deletion_seconds: float | None = None
    moves_after_deletion: int = 0
    throttles_after_deletion: list[str] = field(default_factory=list)
    throttles_before: list[str] = field(default_factory=list)
    rss_bytes: int | None = None
    api_requests_per_resource: float | None = None
    api_requests_source: str = ""
    kafka_requests_per_pass: float | None = None
    passes: float | None = None
    limits: ExecutionLimits = ExecutionLimits()
    scenario: Scenario = Scenario()
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        if self.wall_seconds is None or self.floor is None:
            return None
        return self.wall_seconds / self.floor.schedule_seconds

    def failures(self) -> list[str]:
        s, failed = self.scenario, []
        if self.seen.violations:
            more = "+" if len(self.seen.violations) >= 20 else ""
            failed.append(f"limits exceeded in {len(self.seen.violations)}{more} samples, first: "
                          + "; ".join(self.seen.violations[:3]))
        if self.not_succeeded:
            phases = Counter(str(p) for p in self.not_succeeded.values())
            failed.append(f"{len(self.not_succeeded)} resources did not reach Succeeded: {dict(phases)}")
        if self.events_not_one:
            failed.append(f"{len(self.events_not_one)} resources without exactly one Succeeded Event: "
                          f"{self.events_not_one[:5]}")
        if self.moves_after_success:
            failed.append(f"{self.moves_after_success} moves still listed after every resource Succeeded")
        if self.throttles_after_success:
            failed.append(f"throttles left after success: {residue_summary(self.throttles_after_success)}")
        if self.deletion_seconds is None:
            failed.append(f"the resources were not all gone {s.deletion_timeout:.0f} s after their deletion")
        if self.moves_after_deletion:
            failed.append(f"{self.moves_after_deletion} moves still listed after deletion")
        if self.rss_bytes is None:
            failed.append("the operator was not running at the end (no peak RSS to read)")
        if self.throttles_after_deletion:
            failed.append(f"throttles left after deletion: {residue_summary(self.throttles_after_deletion)}")
        return failed

    def beyond_bounds(self) -> list[str]:
        """The speed and memory figures outside the scenario's bounds: judged by the bench (``make
        bench-concurrency``), reported by the e2e suite, never failed there (a loaded machine moves them)."""
        s, failed = self.scenario, []
        if self.first_move_after_apply is None or self.first_move_after_apply > s.max_first_move_seconds:
            failed.append(f"first move seen {_s(self.first_move_after_apply)} after the apply finished "
                          f"(bound {s.max_first_move_seconds} s)")
        if self.ratio is None or self.ratio > s.max_ratio:
            failed.append(f"wall time {_s(self.wall_seconds)} is {_x(self.ratio)} the schedule floor "
                          f"{_s(self.floor.schedule_seconds if self.floor else None)} (bound {s.max_ratio} x)")
        if self.rss_bytes is not None and self.rss_bytes > s.max_rss_bytes:
            failed.append(f"operator peak RSS {self.rss_bytes / 2**20:.0f} MiB > {s.max_rss_bytes / 2**20:.0f} MiB")
        return failed

    def row(self) -> dict[str, str]:
        events = ", ".join(f"{n} x {c}" for n, c in sorted(self.succeeded_events.items())) or "none"
        fl = self.floor
        return {
            "resources": str(self.resources),
            "partition": f"{self.partition_bytes / 1000:.0f} kB",
            "throttle": f"{self.throttle} B/s",
            "wall (apply -> all Succeeded)": _s(self.wall_seconds),
            "last move ended in Kafka": _s(self.kafka_seconds),
            "schedule floor": _s(fl.schedule_seconds if fl else None),
            "bytes floor": _s(fl.bytes_seconds if fl else None),
            "ratio": _x(self.ratio),
            "max in flight": f"{self.seen.in_flight} ({self.limits.max_moves})",
            "max per broker": f"{self.seen.per_broker} ({self.limits.max_moves_per_broker})",
            "max into one broker": f"{self.seen.into_broker} ({self.limits.max_moves_per_broker_direction})",
            "max out of one leader": f"{self.seen.out_of_leader} ({self.limits.max_moves_per_broker_direction})",
            "apply": _s(self.apply_seconds),
            "first move after apply": _s(self.first_move_after_apply),
            "submit p50 / max": f"{_s(self.submit_p50)} / {_s(self.submit_max)}",
            "RSS peak": "n/a" if self.rss_bytes is None else f"{self.rss_bytes / 2**20:.0f} MiB",
            "API requests / resource": _f(self.api_requests_per_resource) + (
                f" ({self.api_requests_source})" if self.api_requests_source else ""),
            "Kafka requests / pass": _f(self.kafka_requests_per_pass),
            "Succeeded events per resource": events,
            "not Succeeded": str(len(self.not_succeeded)),
            "throttles left (success / deletion)": f"{len(self.throttles_after_success)} / "
                                                   f"{len(self.throttles_after_deletion)}",
            "moves left (success / deletion)": f"{self.moves_after_success} / {self.moves_after_deletion}",
            "deletion": _s(self.deletion_seconds),
        }

    def text(self) -> str:
        lines = [f"{k:>38}: {v}" for k, v in self.row().items()]
        for when, left in (("success", self.throttles_after_success), ("deletion", self.throttles_after_deletion)):
            if left:
                lines.append(f"throttles left after {when}: {residue_summary(left)}")
        if self.seen.violations:
            lines.append("first limit violations: " + "; ".join(self.seen.violations[:5]))
        if self.throttles_before:
            lines.append("throttles already there before the run: " + "; ".join(self.throttles_before))
        lines += self.notes
        return "\n".join(lines)


def residue_summary(left: Sequence[str]) -> str:
    rates = [line for line in left if line.startswith("broker ")]
    keys = [line for line in left if line.startswith("topic ")]
    empty = [line for line in keys if line.endswith("=''")]
    return (f"{len(rates)} broker throttle rate(s), {len(keys)} topic throttled-replicas key(s) ({len(empty)} empty);"
            f" e.g. {'; '.join([*rates[:2], *keys[:2]])}")


def _s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.1f} s"


def _x(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f} x"


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def markdown(rows: Sequence[dict[str, str]]) -> str:
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row[c] for c in header) + " |" for row in rows]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------ the run

@dataclass
class Harness:
    """What a run needs: Kafka, the API server, and the operator under test (its pid for RSS, its metrics port)."""

    bootstrap_servers: str
    admin: AdminClient
    api: client.ApiClient
    namespace: str
    rss: Callable[[], int]
    metrics_port: int
    log: Callable[[str], None] = print


def run(h: Harness, scenario: Scenario, prefix: str) -> Report:
    """The whole scenario, cleanup included; every wait bounded. Checks are collected in the report, not raised."""
    report = Report(scenario.resources, throttle=scenario.throttle, limits=scenario.limits, scenario=scenario)
    moves = plan(prefix, scenario)
    topics = topic_names(moves)
    kube = Kube(h.api, h.namespace)
    report.throttles_before = throttle_residue(h.admin, [])
    try:
        began = time.monotonic()
        create_topics(h.admin, topics)
        produce(h.bootstrap_servers, moves, scenario)
        sizes = partition_sizes(h.bootstrap_servers, moves, scenario.messages * scenario.message_bytes)
        report.partition_bytes = int(statistics.median(sizes.values()))
        report.floor = schedule_floor(moves, sizes, scenario)
        h.log(f"{len(topics)} topics, {len(moves)} partitions of ~{report.partition_bytes} B ready in "
              f"{time.monotonic() - began:.1f} s; schedule floor {report.floor.schedule_seconds:.1f} s, "
              f"bytes floor {report.floor.bytes_seconds:.1f} s")
        apiserver_before = kube.apiserver_requests()
        _execute(h, scenario, moves, topics, kube, report)
        _delete(h, scenario, moves, topics, kube, report)
        with contextlib.suppress(AssertionError, OSError):
            report.rss_bytes = h.rss()
        _requests(h, scenario, kube, report, apiserver_before)
    finally:
        _cleanup(h, kube, topics, report)
    return report


def _execute(h: Harness, scenario: Scenario, moves: Sequence[PlannedMove], topics: Sequence[str], kube: Kube,
             report: Report) -> None:
    sampler = KafkaSampler(h.bootstrap_servers, h.admin, moves, scenario.sample_interval)
    sampler.start()
    try:
        t0 = time.monotonic()
        created = kube.apply(moves, scenario.throttle, scenario.apply_threads)
        applied = time.monotonic()
        report.apply_seconds = applied - t0
        h.log(f"applied {len(moves)} resources in {report.apply_seconds:.1f} s")
        assert report.floor is not None
        # Generous, so a slow run is measured rather than cut short; bounded, so a stuck one ends.
        timeout = max(2.5 * report.floor.schedule_seconds, report.floor.schedule_seconds + 120)
        succeeded_at: dict[str, float] = {}
        phases: dict[str, str | None] = {}

        def all_succeeded() -> bool:
            nonlocal phases
            phases = kube.phases()
            now = time.monotonic()
            for name, phase in phases.items():
                if phase == "Succeeded":
                    succeeded_at.setdefault(name, now)
            return len(succeeded_at) == len(moves)

        last_report = [time.monotonic()]

        def progress() -> bool:
            done = all_succeeded()
            if time.monotonic() - last_report[0] > 30:
                last_report[0] = time.monotonic()
                h.log(f"t={time.monotonic() - t0:.0f} s: {len(succeeded_at)} Succeeded, "
                      f"{Counter(str(p) for p in phases.values())}")
            return done

        wait(progress, timeout, interval=1.0)
        report.not_succeeded = {m.name: phases.get(m.name) for m in moves if m.name not in succeeded_at}
        if succeeded_at:
            report.wall_seconds = max(succeeded_at.values()) - t0
        # Let the sampler see the last moves end (or not) before it stops.
        time.sleep(2 * scenario.sample_interval + 1.0)
    finally:
        sampler.stop()
    _judge_samples(report, sampler, moves, created, t0, applied)
    _after_success(h, scenario, moves, topics, kube, report, max(succeeded_at.values(), default=time.monotonic()))


def _judge_samples(report: Report, sampler: KafkaSampler, moves: Sequence[PlannedMove], created: dict[str, float],
                   t0: float, applied: float) -> None:
    report.samples = len(sampler.samples)
    report.sample_errors = len(sampler.errors)
    report.seen = sampler.limits(report.limits, t0)
    if sampler.last_moving is not None:
        report.kafka_seconds = sampler.last_moving - t0
    submitted = {m.name: sampler.submitted(m.key) for m in moves}
    seen = {name: t for name, t in submitted.items() if t is not None}
    report.never_seen = len(moves) - len(seen)
    if seen:
        report.first_move_after_apply = min(seen.values()) - applied
        latencies = sorted(seen[name] - created[name] for name in seen)
        report.submit_p50 = statistics.median(latencies)
        report.submit_max = latencies[-1]


def _after_success(h: Harness, scenario: Scenario, moves: Sequence[PlannedMove], topics: Sequence[str], kube: Kube,
                   report: Report, last_success: float) -> None:
    # The throttles of a finished reassignment go when its last move ends: allow a grace, then they must be gone.
    cleared = wait(lambda: not throttle_residue(h.admin, topics), scenario.throttle_grace + 2)
    report.throttles_cleared_after = None if cleared is None else time.monotonic() - last_success
    report.throttles_after_success = throttle_residue(h.admin, topics)
    kafka = KafkaAdminClient(bootstrap_servers=h.bootstrap_servers)
    try:
        report.moves_after_success = len(moving(kafka, moves))
    finally:
        kafka.close()
    # A stale tick posts its Event late: count after the settle time, then count what was posted.
    time.sleep(max(0.0, last_success + scenario.throttle_grace - time.monotonic()))
    counted = kube.succeeded_events()
    report.succeeded_events = dict(Counter(counted.get(m.name, 0) for m in moves))
    report.events_not_one = [f"{m.name}: {counted.get(m.name, 0)}" for m in moves if counted.get(m.name, 0) != 1]


def _delete(h: Harness, scenario: Scenario, moves: Sequence[PlannedMove], topics: Sequence[str], kube: Kube,
            report: Report) -> None:
    kube.delete_all()
    report.deletion_seconds = wait(lambda: not kube.phases(), scenario.deletion_timeout, interval=1.0)
    h.log(f"deleting {len(moves)} resources took {_s(report.deletion_seconds)}")
    if report.deletion_seconds is not None:
        wait(lambda: not throttle_residue(h.admin, topics), scenario.throttle_grace)
    report.throttles_after_deletion = throttle_residue(h.admin, topics)
    kafka = KafkaAdminClient(bootstrap_servers=h.bootstrap_servers)
    try:
        report.moves_after_deletion = len(moving(kafka, moves))
    finally:
        kafka.close()


def _requests(h: Harness, scenario: Scenario, kube: Kube, report: Report, apiserver_before: float | None) -> None:
    metrics = scrape_metrics(h.metrics_port)
    kube_requests = metric_sum(metrics, "kpo_kubernetes_requests_total")
    if kube_requests is not None:
        report.api_requests_per_resource = kube_requests / scenario.resources
        report.api_requests_source = "kpo_kubernetes_requests_total"
    else:
        after = kube.apiserver_requests()
        if after is not None and apiserver_before is not None:
            own = sum(kube.requests.values())  # /metrics itself is a non-resource request: not in the sum
            report.api_requests_per_resource = max(0.0, after - apiserver_before - own) / scenario.resources
            report.api_requests_source = "API server's count"
    kafka_requests = metric_sum(metrics, "kpo_kafka_requests_total", cluster="default")
    passes = metric_sum(metrics, "kpo_executor_passes_total", cluster="default")
    report.passes = passes
    if kafka_requests is not None and passes:
        report.kafka_requests_per_pass = kafka_requests / passes
    else:
        report.notes.append("Kafka requests per pass: the operator exports no kpo_kafka_requests_total / "
                            "kpo_executor_passes_total")


def _cleanup(h: Harness, kube: Kube, topics: Sequence[str], report: Report) -> None:
    """Whatever the run left: resources (finalizers dropped after a bounded wait), broker rates, topics."""
    with contextlib.suppress(ApiException):
        if kube.phases():
            kube.delete_all()
            if wait(lambda: not kube.phases(), 60, interval=1.0) is None:
                for name in kube.phases():
                    with contextlib.suppress(ApiException):
                        kube.custom.patch_namespaced_custom_object(GROUP, VERSION, kube.namespace, PLURAL, name,
                                                                   {"metadata": {"finalizers": None}})
    remove_broker_throttles(h.admin, report.throttles_before)
    with contextlib.suppress(Exception):
        for future in h.admin.delete_topics(list(topics), request_timeout=60).values():
            future.result(timeout=90)


# ------------------------------------------------------------------------------------------- unusable clusters

@contextlib.contextmanager
def unusable_endpoints() -> Iterator[dict[str, str]]:
    """Three Kafka clusters that cannot be used, all on 127.0.0.1:

    - ``refused``: a port bound but not listening, so every connection is refused at once;
    - ``silent``: a listener that accepts connections and never reads or answers a byte;
    - ``blackhole``: a listener whose accept queue is full, so the kernel drops every new SYN and a connection
      attempt hangs until the client's timeout, as with an unroutable address.
    """
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(0)
    filler = socket.create_connection(blackhole.getsockname(), timeout=2)  # the one connection the queue takes
    held: list[socket.socket] = []
    stop = threading.Event()

    def hold() -> None:
        silent.settimeout(0.5)
        while not stop.is_set():
            try:
                conn, _ = silent.accept()
            except OSError:
                continue
            held.append(conn)
            while len(held) > 512:
                held.pop(0).close()

    holder = threading.Thread(target=hold, daemon=True, name="silent-listener")
    holder.start()
    try:
        yield {name: f"127.0.0.1:{sock.getsockname()[1]}"
               for name, sock in (("refused", refused), ("silent", silent), ("blackhole", blackhole))}
    finally:
        stop.set()
        holder.join(5)
        for sock in (*held, filler, refused, silent, blackhole):
            sock.close()
