"""Prometheus metrics: what a Kafka platform engineer alerts on and graphs while kpo moves data.

Two kinds of numbers live here. Counters and the latency histogram (bytes moved, Kafka and Kubernetes API errors,
reconcile latency, phase transitions) only ever grow, so they are recorded as things happen. Gauges that describe the
state of every custom resource (resources per kind and phase, moves in flight in total and per broker, throttles
active) are not kept as mutable gauges: a custom collector sums per-resource records at scrape time, which keeps the
totals exact across many resources without any bookkeeping that could drift after a crash.

- ``kpo_resources`` counts every live resource by kind and phase: its phase comes from every watch event of the
  resource (the shell's ``<kind>_event`` handler; the listing at start-up too) and from every tick, and the resource
  leaves the count only when it is deleted. A resource at rest (a finished election, a Succeeded reassignment) has no
  timer and so no ticks: counting it by its ticks dropped it after ``stale_after`` (800 live resources, the gauge at 0).
- The move and throttle gauges sum the :class:`Snapshot` each tick leaves. Only a resource that ticks can have moves
  in flight or throttles of its own, so a snapshot whose ticks stopped (at rest, deleted, no longer watched) drops out
  after ``stale_after``.

The operator holds no state of its own, so neither do its metrics: after a restart the watch's listing rebuilds the
resource count at once, and the first tick of every resource that ticks (every ``pollIntervalSeconds``) the rest.

Handlers record through :func:`reconcile`, a context manager around one tick of one resource::

    with metrics.reconcile(PARTITION_REASSIGNMENT, uid, status=status, patch=patch, cluster=cluster) as scope:
        ...  # the tick: reads status, writes patch.status
        scope.settle(originals, events=outcome.events)  # optional: per-broker moves, Kafka refusals seen

It times the tick, counts the exception that escapes it (Kafka or Kubernetes API error), and, on the way out, reads
the phase, the moves in flight and ``progress.bytesMoved`` from the status the tick is about to write (or the status
it left alone). Kinds with no moves use the same call; their snapshot simply has none.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import ValidationError

from kpo.api import InFlightMove, PartitionReassignmentStatus, Progress, ResourceKind, StatusBase
from kpo.domain.balance_score import BalanceScore, broker_used_ratio
from kpo.domain.conditions import Event
from kpo.domain.model import Replicas, TopicPartition
from kpo.kafka.admin import KafkaRequestRefused, KafkaUnavailable

log = logging.getLogger(__name__)

#: kpo's own registry (plus the process and platform collectors), so the operator exposes exactly these families.
REGISTRY = CollectorRegistry()

RECONCILE_SECONDS = Histogram(
    "kpo_reconcile_duration_seconds", "Time one reconcile tick of one resource took, Kafka and API calls included.",
    ["kind"], registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0))
BYTES_MOVED = Counter(
    "kpo_bytes_moved", "Replica bytes copied by moves kpo started (from each resource's status.progress.bytesMoved).",
    ["kind", "cluster"], registry=REGISTRY)
KAFKA_ERRORS = Counter(
    "kpo_kafka_errors", "Kafka errors seen while reconciling: unreachable cluster, refused requests and moves.",
    ["kind", "cluster", "reason"], registry=REGISTRY)
KUBERNETES_ERRORS = Counter(
    "kpo_kubernetes_api_errors", "Kubernetes API calls made by kpo's own code that failed, by HTTP status.",
    ["kind", "code"], registry=REGISTRY)
TRANSITIONS = Counter(
    "kpo_phase_transitions", "Resources entering a phase (alert on Failed and Invalid).",
    ["kind", "phase"], registry=REGISTRY)
# The reason tells a planning failure (PlanningFailed) from a refusal by Kafka or a stalled move cancelled, which
# the phase alone does not: deploy/prometheus/kpo-execution-alerts.yaml alerts on planning failures with it.
FAILURES = Counter(
    "kpo_resource_failures", "Resources entering phase Failed or Invalid, by the reason of their Ready condition.",
    ["kind", "reason"], registry=REGISTRY)
FAILED_PHASES = frozenset({"Failed", "Invalid"})
#: Phases in which a resource of any kind has ended its run (a PartitionReassignment's terminal phases).
ENDED_PHASES = frozenset({"Succeeded", "Failed", "Invalid", "Stopped", "Reverted"})

REFILL_PASSES = Counter(
    "kpo_refill_passes", "Passes a tick made between polls because a move of its own had ended (refill between polls).",
    ["kind", "cluster"], registry=REGISTRY)
MOVES_STARTED_BETWEEN_POLLS = Counter(
    "kpo_moves_started_between_polls", "Moves Kafka accepted from passes made between polls (refill between polls).",
    ["kind", "cluster"], registry=REGISTRY)

KAFKA_REQUESTS = Counter(
    "kpo_kafka_requests", "Kafka requests kpo sent, by cluster and request (a DescribeLogDirs or DescribeConfigs per "
    "broker counts once).", ["cluster", "request"], registry=REGISTRY)
EXECUTOR_PASSES = Counter(
    "kpo_executor_passes", "Looks at a cluster taken by its executor, each shared by every tick that asked meanwhile.",
    ["cluster"], registry=REGISTRY)
KUBERNETES_REQUESTS = Counter(
    "kpo_kubernetes_requests", "Kubernetes API requests made by kpo's own code (not Kopf's watches, patches and "
    "Events), by HTTP verb.", ["verb"], registry=REGISTRY)


def kafka_request(cluster: str, request: str) -> None:
    KAFKA_REQUESTS.labels(cluster, request).inc()


def executor_pass(cluster: str) -> None:
    EXECUTOR_PASSES.labels(cluster).inc()


def kubernetes_request(verb: str) -> None:
    KUBERNETES_REQUESTS.labels(verb).inc()


KAFKA_EVENT_REASONS = frozenset({"KafkaUnavailable", "KafkaRefused", "NotAuthorized", "AuthenticationFailed"})


@dataclass(frozen=True)
class Snapshot:
    """What one resource looked like at its last reconcile."""

    kind: str
    cluster: str
    phase: str
    moves_in_flight: int = 0
    # Broker id -> moves of this resource that keep that broker busy (it gets a new replica or drops one).
    broker_moves: Mapping[int, int] = field(default_factory=dict)
    # Brokers on which this resource has set a replication throttle rate.
    throttled_brokers: frozenset[int] = frozenset()
    # Whether the resource has any throttle in place: rates, or only throttled-replica entries (when someone else
    # had already set a broker's rate, kpo adds its replicas to the throttle but leaves that rate alone).
    holds_throttle: bool = False
    # Moves in flight flagged stalled (in status.stalledMoves and status.inFlight, not cancelled): no byte copied, or
    # no closer to their leader, for stallAfterSeconds.
    stalled_moves: int = 0
    seen: float = 0.0


class ResourceStates(Collector):
    """The per-resource records, and the gauges summed from them at scrape time: every live resource's kind and
    phase (kept until :meth:`forget`), and the snapshots of those that tick (dropped once stale)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, stale_after: float = 300.0) -> None:
        self._clock = clock
        self.stale_after = stale_after
        self._lock = threading.Lock()
        self._snapshots: dict[str, Snapshot] = {}
        # uid -> (kind, phase) of every resource a watch event or a tick showed, until its deletion.
        self._phases: dict[str, tuple[str, str]] = {}
        self._clusters: set[str] = set()

    def known_clusters(self, names: Iterable[str]) -> None:
        """Clusters to report zeros for, so a dashboard shows 0 rather than no data when nothing moves."""
        with self._lock:
            self._clusters.update(names)

    def put(self, uid: str, snapshot: Snapshot) -> None:
        with self._lock:
            self._snapshots[uid] = Snapshot(**{**snapshot.__dict__, "seen": self._clock()})
            self._phases[uid] = (snapshot.kind, snapshot.phase)

    def watched(self, uid: str, kind: str, phase: str) -> None:
        """A watch event showed the resource in ``phase``: it counts there until its deletion, ticking or not."""
        with self._lock:
            self._phases[uid] = (kind, phase)

    def get(self, uid: str) -> Snapshot | None:
        with self._lock:
            return self._snapshots.get(uid)

    def forget(self, uid: str) -> None:
        with self._lock:
            self._snapshots.pop(uid, None)
            self._phases.pop(uid, None)

    def current(self) -> list[Snapshot]:
        now = self._clock()
        with self._lock:
            for uid in [u for u, s in self._snapshots.items() if now - s.seen > self.stale_after]:
                del self._snapshots[uid]
            return list(self._snapshots.values())

    def clear(self) -> None:
        with self._lock:
            self._snapshots.clear()
            self._phases.clear()
            self._clusters.clear()

    def collect(self) -> Iterator[Metric]:
        snapshots = self.current()
        with self._lock:
            clusters = set(self._clusters) | {s.cluster for s in snapshots}
            phases = Tally(self._phases.values())
        resources = GaugeMetricFamily("kpo_resources", "kpo custom resources by kind and phase.",
                                      labels=["kind", "phase"])
        for (kind, phase), count in sorted(phases.items()):
            resources.add_metric([kind, phase], count)
        in_flight = GaugeMetricFamily("kpo_moves_in_flight", "Partition moves kpo started that Kafka still runs.",
                                      labels=["cluster"])
        per_broker = GaugeMetricFamily("kpo_broker_moves_in_flight",
                                       "Moves in flight that keep a broker busy (it gains or drops a replica).",
                                       labels=["cluster", "broker"])
        throttles = GaugeMetricFamily("kpo_throttles_active",
                                      "Brokers on which kpo has a replication throttle rate set.", labels=["cluster"])
        throttling = GaugeMetricFamily("kpo_throttled_resources",
                                       "Resources with a replication throttle in place (rates or throttled replicas).",
                                       labels=["cluster"])
        stalled = GaugeMetricFamily("kpo_stalled_moves", "Moves in flight that copied no byte, or came no closer "
                                    "to their leader, for their resource's execution.stallAfterSeconds "
                                    "(status.stalledMoves).", labels=["cluster"])
        left_over = GaugeMetricFamily("kpo_ended_resources_holding_throttle",
                                      "Resources whose run has ended (Succeeded, Failed, Invalid, Stopped, Reverted) "
                                      "with a throttle still on the cluster (ThrottleCleanupPending).",
                                      labels=["cluster"])
        for cluster in sorted(clusters):
            mine = [s for s in snapshots if s.cluster == cluster]
            in_flight.add_metric([cluster], sum(s.moves_in_flight for s in mine))
            brokers: Tally[int] = Tally()
            for s in mine:
                brokers.update(s.broker_moves)
            for broker, count in sorted(brokers.items()):
                per_broker.add_metric([cluster, str(broker)], count)
            throttles.add_metric([cluster], len(frozenset().union(*(s.throttled_brokers for s in mine))))
            throttling.add_metric([cluster], sum(1 for s in mine if s.holds_throttle))
            stalled.add_metric([cluster], sum(s.stalled_moves for s in mine))
            left_over.add_metric([cluster], sum(1 for s in mine if s.holds_throttle and s.phase in ENDED_PHASES))
        yield from (resources, in_flight, per_broker, throttles, throttling, stalled, left_over)


STATES = ResourceStates()
REGISTRY.register(STATES)


#: The ``kpo_cluster_*`` balance gauges: name suffix, help, and how to read it from a score.
_BALANCE_GAUGES: tuple[tuple[str, str, Callable[[BalanceScore], float]], ...] = (
    ("broker_bytes_max_over_mean", "Bytes on the fullest live broker over the mean of the live brokers "
     "(DescribeLogDirs, internal topics left out).", lambda s: s.bytes.max_over_mean),
    ("broker_bytes_min_over_mean", "Bytes on the emptiest live broker over the mean of the live brokers.",
     lambda s: s.bytes.min_over_mean),
    ("replicas_max_over_mean", "Replicas on the busiest live broker over the mean (DescribeTopics).",
     lambda s: s.replicas.max_over_mean),
    ("replicas_min_over_mean", "Replicas on the least busy live broker over the mean.",
     lambda s: s.replicas.min_over_mean),
    ("leaders_max_over_mean", "Partition leaders on the busiest live broker over the mean.",
     lambda s: s.leaders.max_over_mean),
    ("leaders_min_over_mean", "Partition leaders on the least busy live broker over the mean.",
     lambda s: s.leaders.min_over_mean),
    ("rack_spread_violations", "Partitions whose replicas sit in fewer racks than min(replicas, racks of live "
     "brokers) (the planner's rack-violation rule).", lambda s: s.rack_violations),
    ("balance_brokers", "Live brokers the balance score is over.", lambda s: s.brokers),
    ("balance_partitions", "Partitions the balance score counted (internal topics left out).",
     lambda s: s.partitions),
)


class ClusterBalances(Collector):
    """The last balance sample of each Kafka cluster (:mod:`kpo.background.balance_sampler`), per-broker numbers
    only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scores: dict[str, tuple[BalanceScore, float]] = {}
        self._up: dict[str, bool] = {}

    def sampled(self, cluster: str, score: BalanceScore, at: float) -> None:
        with self._lock:
            self._scores[cluster] = (score, at)
            self._up[cluster] = True

    def failed(self, cluster: str) -> None:
        with self._lock:
            self._up[cluster] = False

    def clear(self) -> None:
        with self._lock:
            self._scores.clear()
            self._up.clear()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            scores, up = dict(self._scores), dict(self._up)
        families = []
        for suffix, text, read in _BALANCE_GAUGES:
            family = GaugeMetricFamily(f"kpo_cluster_{suffix}", text, labels=["cluster"])
            for cluster, (score, _) in sorted(scores.items()):
                family.add_metric([cluster], float(read(score)))
            families.append(family)
        sampled = GaugeMetricFamily("kpo_cluster_balance_sampled_timestamp_seconds",
                                    "When the last successful balance sample of the cluster began (Unix time).",
                                    labels=["cluster"])
        for cluster, (_, at) in sorted(scores.items()):
            sampled.add_metric([cluster], at)
        healthy = GaugeMetricFamily("kpo_cluster_balance_up", "1 when the last balance sample of the cluster "
                                    "succeeded, 0 when it failed (the other gauges keep the last good sample).",
                                    labels=["cluster"])
        for cluster, ok in sorted(up.items()):
            healthy.add_metric([cluster], 1.0 if ok else 0.0)
        yield from (*families, sampled, healthy, *_disk_usage(scores))


def _disk_usage(scores: Mapping[str, tuple[BalanceScore, float]]) -> tuple[Metric, ...]:
    """Each log dir's and each broker's share of disk in use, as the last balance sample read them (KIP-827)."""
    per_dir = GaugeMetricFamily("kpo_log_dir_used_ratio", "Share of a log dir's file system in use, 0 to 1 "
                                "(1 - usable / total bytes, DescribeLogDirs v4+).", labels=["cluster", "broker", "dir"])
    per_broker = GaugeMetricFamily("kpo_broker_disk_used_ratio", "Share of a broker's log dir space in use, 0 to 1 "
                                   "(used over total bytes, summed over its log dirs).", labels=["cluster", "broker"])
    total = GaugeMetricFamily("kpo_log_dir_total_bytes", "Size of a log dir's file system in bytes.",
                              labels=["cluster", "broker", "dir"])
    for cluster, (score, _) in sorted(scores.items()):
        for (broker, log_dir), capacity in sorted(score.dirs.items()):
            per_dir.add_metric([cluster, str(broker), log_dir], capacity.used_ratio)
            total.add_metric([cluster, str(broker), log_dir], float(capacity.total))
        for broker in sorted({b for b, _dir in score.dirs}):
            ratio = broker_used_ratio(score.dirs, broker)
            if ratio is not None:
                per_broker.add_metric([cluster, str(broker)], ratio)
    return per_dir, per_broker, total


BALANCES = ClusterBalances()
REGISTRY.register(BALANCES)


def serve(port: int, clusters: Collection[str] = (), stale_after: float = 300.0, address: str = "0.0.0.0") -> bool:
    """Expose the metrics on ``http://address:port/metrics``; ``False`` (logged) when the port cannot be bound.

    A taken port costs the metrics, not the operator: reconciling partitions matters more than being scraped.
    """
    from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR  # noqa: PLC0415

    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        with contextlib.suppress(ValueError):  # already registered by an earlier serve() in this process
            REGISTRY.register(collector)
    STATES.known_clusters(clusters)
    STATES.stale_after = stale_after
    try:
        start_http_server(port, addr=address, registry=REGISTRY)
    except OSError as exc:
        log.error("metrics are off: cannot listen on %s:%d: %s", address, port, exc)
        return False
    log.info("metrics on http://%s:%d/metrics", address, port)
    return True


# ------------------------------------------------------------------------------------------- recording helpers


def brokers_touched(target: Replicas, original: Replicas | None) -> frozenset[int]:
    """Brokers a move keeps busy: those that gain a replica (they copy the log) or drop one.

    Without the original replicas (not recorded yet) every target broker counts: better too busy than invisible.
    """
    if original is None:
        return frozenset(target)
    return frozenset(target) ^ frozenset(original)


def broker_moves(in_flight: Iterable[InFlightMove], originals: Mapping[TopicPartition, Replicas]) -> dict[int, int]:
    """Per broker, the moves in flight (status ``inFlight`` entries) that touch it."""
    tally: Tally[int] = Tally()
    for move in in_flight:
        tally.update(brokers_touched(tuple(move.replicas), originals.get(TopicPartition(move.topic, move.partition))))
    return dict(tally)


def bytes_moved_delta(before: Progress | None, after: Progress | None) -> int:
    """Bytes copied between two statuses of one resource.

    ``progress.bytesMoved`` counts up within one run; a new run (changed spec, a revert) starts again from zero, so a
    drop means everything in ``after`` is new.
    """
    old = before.bytes_moved if before is not None else 0
    new = after.bytes_moved if after is not None else 0
    return new - old if new >= old else new


def typed_status(kind: ResourceKind, status: Mapping[str, Any]) -> StatusBase:
    """A status as its kind's API model reads it (the metrics never pick fields out of a dict by name)."""
    return kind.status.model_validate(dict(status))


def classify(exc: BaseException) -> tuple[str, str] | None:
    """``("kafka", reason)`` or ``("kubernetes", code)`` for an error kpo should count, looking through causes
    (a handler re-raises Kafka refusals as Kopf's TemporaryError)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KafkaUnavailable):
            return ("kafka", "KafkaUnavailable")
        if isinstance(seen, KafkaRequestRefused):
            return ("kafka", seen.refusal.code or "KafkaRefused")
        if isinstance(seen, ApiException):
            return ("kubernetes", str(seen.status or "unknown"))
        seen = seen.__cause__
    return None


def count_error(kind: str, cluster: str, exc: BaseException) -> None:
    """Count ``exc`` as a Kafka or Kubernetes API error if it is one (for code paths outside :func:`reconcile`)."""
    found = classify(exc)
    if found is None:
        return
    source, label = found
    if source == "kafka":
        KAFKA_ERRORS.labels(kind, cluster, label).inc()
    else:
        KUBERNETES_ERRORS.labels(kind, label).inc()


def forget(uid: str) -> None:
    """The resource is gone (deletion handler, or the watch's DELETED event): drop it from every gauge at once."""
    STATES.forget(uid)


def watched(kind: ResourceKind, uid: str, status: Mapping[str, Any]) -> None:
    """A watch event of the resource (the listing at start-up too): count it in its phase, at rest or not."""
    try:
        phase = _phase(typed_status(kind, status))
    except ValidationError:
        # A status the model refuses (written by hand, or by an older kpo) is still a live resource: count it in the
        # phase it names, which is what kubectl shows too.
        phase = str(status.get("phase") or "Pending")
    STATES.watched(uid, kind.kind, phase)


def _phase(status: StatusBase) -> str:
    return str(getattr(status, "phase", None) or "Pending")


class Scope:
    """One tick of one resource, as :func:`reconcile` sees it."""

    def __init__(self, kind: ResourceKind, uid: str, cluster: str, status: Mapping[str, Any],
                 patch: Mapping[str, Any]) -> None:
        self.resource = kind
        self.kind, self.uid, self.cluster = kind.kind, uid, cluster
        self.before = status
        self.patch = patch
        self.originals: Mapping[TopicPartition, Replicas] = {}

    def settle(self, originals: Mapping[TopicPartition, Replicas] = {}, *, events: Iterable[Event] = (),
               recorded_now: Mapping[TopicPartition, Replicas] = {}) -> None:
        """What only the handler knows: the original replicas (for per-broker counts), the tick's Events (Kafka
        refusals reported in status rather than raised), and the originals the tick has just recorded (on a
        resource's first tick the rollback record does not exist yet when the handler loads it)."""
        self.originals = {**recorded_now, **originals}
        for event in events:
            if event.reason in KAFKA_EVENT_REASONS:
                KAFKA_ERRORS.labels(self.kind, self.cluster, event.reason).inc()

    def after(self) -> Mapping[str, Any]:
        """The status as it will be once the tick's patch is applied (a tick writes whole top-level fields)."""
        written = self.patch.get("status") or {}
        return {**self.before, **written}

    def record(self) -> None:
        written = self.patch.get("status") or {}
        after, before = typed_status(self.resource, self.after()), typed_status(self.resource, self.before)
        phase = _phase(after)
        if phase != str(getattr(before, "phase", None) or "") and written.get("phase"):
            TRANSITIONS.labels(self.kind, phase).inc()
            if phase in FAILED_PHASES:
                ready = after.condition("Ready")
                FAILURES.labels(self.kind, ready.reason if ready is not None else "Unknown").inc()
        previous = STATES.get(self.uid)
        throttled = previous.throttled_brokers if previous is not None else frozenset()
        holds = previous.holds_throttle if previous is not None else False
        in_flight: list[InFlightMove] = []
        stalled = 0
        if isinstance(after, PartitionReassignmentStatus) and isinstance(before, PartitionReassignmentStatus):
            moved = bytes_moved_delta(before.progress, after.progress)
            if moved > 0:
                BYTES_MOVED.labels(self.kind, self.cluster).inc(moved)
            in_flight = after.in_flight
            moving = {(move.topic, move.partition) for move in in_flight}
            stalled = sum(1 for move in after.stalled_moves
                          if not move.cancelled and (move.topic, move.partition) in moving)
            if "throttle" in written or after.throttle is not None:
                # The resource's throttle journal (status.throttle): what kpo set, exactly.
                throttled = frozenset(after.throttle.brokers) if after.throttle is not None else frozenset()
                holds = after.throttle is not None
        STATES.put(self.uid, Snapshot(
            kind=self.kind, cluster=self.cluster, phase=phase, moves_in_flight=len(in_flight),
            broker_moves=broker_moves(in_flight, self.originals), throttled_brokers=throttled,
            holds_throttle=holds, stalled_moves=stalled))


@contextlib.contextmanager
def reconcile(resource: ResourceKind, uid: str, *, status: Mapping[str, Any], patch: Mapping[str, Any],
              cluster: str) -> Iterator[Scope]:
    """Time one tick, count the Kafka or Kubernetes error that escapes it, and record the resource's state."""
    scope = Scope(resource, uid, cluster, status, patch)
    kind = resource.kind
    started = time.perf_counter()
    try:
        yield scope
    except Exception as exc:
        count_error(kind, cluster, exc)
        raise
    finally:
        RECONCILE_SECONDS.labels(kind).observe(time.perf_counter() - started)
        try:
            scope.record()
        except Exception:  # metrics must never break a reconcile
            log.exception("could not record metrics for %s %s", kind, uid)


__all__ = [
    "BALANCES",
    "REGISTRY",
    "STATES",
    "ClusterBalances",
    "ResourceStates",
    "Scope",
    "Snapshot",
    "broker_moves",
    "brokers_touched",
    "bytes_moved_delta",
    "classify",
    "count_error",
    "forget",
    "reconcile",
    "serve",
    "watched",
]


def refilled(resource: ResourceKind, cluster: str, started: int) -> None:
    """One pass between polls, and the moves it started."""
    REFILL_PASSES.labels(resource.kind, cluster).inc()
    if started:
        MOVES_STARTED_BETWEEN_POLLS.labels(resource.kind, cluster).inc(started)
