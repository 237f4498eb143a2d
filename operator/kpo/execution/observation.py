"""One look at a Kafka cluster, shared by every tick that needs a fresh one.

Each PartitionReassignment used to read the cluster for itself on every tick: DescribeCluster, Metadata,
ListPartitionReassignments, DescribeTopics and a DescribeLogDirs per broker. With hundreds of resources on one
cluster those reads queued behind each other on the cluster's one admin connection (the adapter serialises its
calls), ticks ran minutes late, and each admitted moves against a picture of its own partitions only. Here the
cluster is read once for all of them: a tick asks for a look *taken after* a moment of its choosing (its own start,
so it never decides on anything older than itself), and every tick that asks while a look is being taken gets the
next one. The number of looks is bounded by how long a look takes, not by the number of resources.

A look lists every reassignment in the cluster (one unfiltered ListPartitionReassignments: the admission of moves
needs all of them, anyone's) and describes the topics some tick asked about recently (their interest expires after
``interest_seconds`` without a question), with the replica sizes DescribeLogDirs gives for them.

Looks are taken by the cluster's own thread, never by a tick: a tick waits for one with a bound, so a look that hangs
on a dead cluster for a whole connection timeout holds no tick's resource lock (a deletion waits for that lock) and
no worker beyond the bound. A cluster that cannot be read is said once per look, not once per tick: the failure is
kept and handed to every tick that asks meanwhile, at once, without a connection attempt of its own, and the next
look waits out a backoff that doubles per failure. One cluster's outage never slows another's ticks (each cluster
has its own looks).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace

from kpo.domain.access import Backoff
from kpo.domain.model import (
    Broker,
    LogDirReport,
    OngoingReassignment,
    PartitionState,
    ReplicaKey,
    TopicPartition,
)
from kpo.kafka.admin import KafkaAdmin, KafkaAuthenticationFailed, KafkaUnavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Look:
    """What one look at the cluster saw; ``started`` is the monotonic time the look began (its reads came after)."""

    started: float
    brokers: dict[int, Broker]
    topic_names: frozenset[str]
    #: Every reassignment Kafka lists, cluster-wide.
    ongoing: dict[TopicPartition, OngoingReassignment]
    #: The topics this look described (existing or not): a tick that asks about another needs another look.
    covered: frozenset[str]
    states: dict[str, dict[TopicPartition, PartitionState]] = field(default_factory=dict)
    sizes: dict[str, dict[ReplicaKey, int]] = field(default_factory=dict)
    replica_dirs: dict[str, dict[ReplicaKey, str]] = field(default_factory=dict)
    future_dirs: dict[str, dict[ReplicaKey, str]] = field(default_factory=dict)
    broker_dirs: dict[int, frozenset[str]] = field(default_factory=dict)
    unreachable: frozenset[int] = frozenset()
    offline_dirs: dict[int, frozenset[str]] = field(default_factory=dict)
    future_sizes: dict[str, dict[ReplicaKey, int]] = field(default_factory=dict)
    #: Partitions an earlier look listed as moving within ``SETTLE_SECONDS`` that this one does not list.
    recently_moved: frozenset[TopicPartition] = frozenset()

    def partition_states(self, topics: Collection[str]) -> dict[TopicPartition, PartitionState]:
        return {tp: s for t in topics for tp, s in self.states.get(t, {}).items()}

    def log_dirs(self, topics: Collection[str]) -> LogDirReport:
        """The DescribeLogDirs report of ``topics``, as a look at those topics alone would have given it."""
        return LogDirReport(sizes={k: v for t in topics for k, v in self.sizes.get(t, {}).items()},
                            broker_dirs=dict(self.broker_dirs),
                            replica_dirs={k: v for t in topics for k, v in self.replica_dirs.get(t, {}).items()},
                            future_dirs={k: v for t in topics for k, v in self.future_dirs.get(t, {}).items()},
                            unreachable=self.unreachable, offline_dirs=dict(self.offline_dirs),
                            future_sizes={k: v for t in topics for k, v in self.future_sizes.get(t, {}).items()})

    def partition_size(self, tp: TopicPartition) -> int:
        state = self.states.get(tp.topic, {}).get(tp)
        if state is None:
            return 0
        sizes = self.sizes.get(tp.topic, {})
        return max((sizes.get((tp, b), 0) for b in state.replicas), default=0)


def _by_topic(values: Mapping[ReplicaKey, str] | Mapping[ReplicaKey, int]) -> dict[str, dict[ReplicaKey, object]]:
    out: dict[str, dict[ReplicaKey, object]] = {}
    for key, value in values.items():
        out.setdefault(key[0].topic, {})[key] = value
    return out


def look(kafka: KafkaAdmin, topics: Collection[str], started: float) -> Look:
    """Read the cluster once for ``topics``. What is moving is read *before* where the replicas are: a move that
    completes between the two reads is still listed as moving (and seen at its target), never taken for pending."""
    brokers = kafka.brokers()
    names = frozenset(kafka.topic_names())
    present = sorted(set(topics) & names)
    ongoing = kafka.list_reassignments(None)
    described = kafka.describe_topics(present)
    report = kafka.log_dirs(present, brokers)
    states: dict[str, dict[TopicPartition, PartitionState]] = {}
    for tp, state in described.items():
        states.setdefault(tp.topic, {})[tp] = state
    return Look(started=started, brokers=brokers, topic_names=names, ongoing=ongoing, covered=frozenset(topics),
                states=states, sizes=_by_topic(report.sizes),  # type: ignore[arg-type]
                replica_dirs=_by_topic(report.replica_dirs),  # type: ignore[arg-type]
                future_dirs=_by_topic(report.future_dirs),  # type: ignore[arg-type]
                broker_dirs=dict(report.broker_dirs), unreachable=report.unreachable,
                offline_dirs=dict(report.offline_dirs),
                future_sizes=_by_topic(report.future_sizes))  # type: ignore[arg-type]


@dataclass
class _Failure:
    started: float
    error: Exception


#: How long after Kafka last listed a partition as moving its DescribeTopics answer may still show the move: a broker's
#: metadata can lag the controller's by seconds on a loaded cluster.
SETTLE_SECONDS = 10.0


#: How long a tick waits for a look under way at a cluster that has not answered since the operator started.
FIRST_WAIT_SECONDS = 3.0


class SharedLooks:
    """The looks at one cluster: :meth:`after` gives a look taken after a moment, taking one if needed."""

    def __init__(self, kafka: Callable[[], KafkaAdmin], *, interest_seconds: float = 60.0,
                 wait_seconds: float = 30.0, backoff: Backoff | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 on_look: Callable[[Look], None] = lambda _look: None, named: str = "") -> None:
        self._kafka = kafka
        #: How a failure names the cluster ("cluster 'east' (bootstrap a:9092)"): a resource's condition must say
        #: which of the operator's clusters did not answer.
        self._named = named
        self._interest_seconds = interest_seconds
        self._wait_seconds = wait_seconds
        self._backoff = backoff or Backoff(initial=2.0, maximum=60.0)
        self._clock = clock
        self._on_look = on_look
        self._changed = threading.Condition()
        self._latest: Look | None = None
        self._failure: _Failure | None = None
        self._looking = False
        self._look_started = 0.0
        self._wanted = False
        self._thread: threading.Thread | None = None
        self._interest: dict[str, float] = {}
        self._listed_at: dict[TopicPartition, float] = {}
        self.looks = 0

    @property
    def latest(self) -> Look | None:
        with self._changed:
            return self._latest

    def after(self, moment: float, topics: Collection[str] = ()) -> Look:
        """A look that began after ``moment`` (monotonic) and covers ``topics``.

        The look is taken by the cluster's own thread, never by the caller: a tick waits for it (at most
        ``wait_seconds``; ``FIRST_WAIT_SECONDS`` at a cluster that has not answered yet -- counted from when the look
        under way began, so that once it is that old every tick is told at once instead of waiting the whole time
        again), and holds its resource's lock meanwhile, so a look that hangs on a dead cluster must not hold it for a
        whole connection timeout (a deletion waits for that lock). Raises the failure of the look that should have
        answered (:class:`KafkaUnavailable` and the like), at once while the cluster is failing.
        """
        with self._changed:
            now = self._clock()
            window = self._wait_seconds if self._latest is not None else min(self._wait_seconds, FIRST_WAIT_SECONDS)
            deadline = now + window
            for topic in topics:
                self._interest[topic] = now
            while True:
                latest = self._latest
                if latest is not None and latest.started >= moment and latest.covered.issuperset(topics):
                    return latest
                failure = self._failure
                if failure is not None and (failure.started >= moment or self._looking
                                            or self._backoff.waiting(self._clock())):
                    raise failure.error
                if not self._looking:
                    self._wanted = True
                    self._start()
                    self._changed.notify_all()
                left = (min(deadline, self._look_started + window) if self._looking else deadline) - self._clock()
                if left <= 0:
                    waited = self._wait_seconds if self._latest is not None else FIRST_WAIT_SECONDS
                    raise KafkaUnavailable(f"the cluster did not answer within {waited:g}s")
                self._changed.wait(left)

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kpo-looks", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._wanted:
                    self._changed.wait()
                self._wanted = False
                self._looking = True
                started = self._look_started = self._clock()
                cutoff = started - self._interest_seconds
                self._interest = {t: at for t, at in self._interest.items() if at >= cutoff}
                wanted = frozenset(self._interest)
            try:
                found = look(self._kafka(), wanted, started)
            except Exception as exc:  # handed to every tick that asked; the thread goes on
                if self._named and type(exc) in (KafkaUnavailable, KafkaAuthenticationFailed):
                    exc = type(exc)(f"{self._named}: {exc}")
                with self._changed:
                    self._failure = _Failure(started, exc)
                    self._backoff.failed(self._clock())
                    self._looking = False
                    self._changed.notify_all()
                continue
            with self._changed:
                self.looks += 1
                # Newer looks may have finished first; the listing times only ever move forward.
                for tp in found.ongoing:
                    self._listed_at[tp] = max(self._listed_at.get(tp, started), started)
                cutoff = started - SETTLE_SECONDS
                self._listed_at = {tp: at for tp, at in self._listed_at.items() if at >= cutoff}
                found = replace(found, recently_moved=frozenset(tp for tp in self._listed_at
                                                                if tp not in found.ongoing))
                self._latest = found
                self._failure = None
                self._backoff.succeeded()
                self._looking = False
                self._changed.notify_all()
            try:
                self._on_look(found)
            except Exception:  # the metrics and write rates must not stop the looks
                log.exception("after a look at the cluster")
