"""Samples every configured Kafka cluster's balance score in the background, for the ``kpo_cluster_*`` gauges.

One daemon thread for all clusters. Each sample reads DescribeCluster (live brokers, racks), the topic names, then
DescribeTopics and DescribeLogDirs in batches of ``balanceScore.topicsPerRequest`` topics: each batch is folded into
per-broker numbers (:class:`kpo.domain.balance_score.BalanceTally`) and dropped, so a 20,000-partition cluster keeps
no per-partition data beyond one batch, and the operator's other Kafka calls (the adapter serialises them) go between
two batches rather than waiting for a whole sample. Internal topics (``__consumer_offsets`` and the like) are left out,
as the planner leaves them out of a ``Rebalance`` by default.

A cluster that cannot be sampled (Kafka unreachable, a refused login, a missing ACL) is said once, with the reason,
when its first sample fails; the gauges keep the last good sample (``kpo_cluster_balance_up`` 0 says so), the next
attempts back off (the interval, doubled per failure, up to :data:`MAX_BACKOFF_SECONDS` or the interval if longer),
and the first sample that succeeds again says how long the outage lasted. A login Kafka refused stays under the
operator's own login backoff (:class:`kpo.runtime.OperatorContext`): the sampler uses the same adapters.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Protocol

from kpo.domain.balance_score import BalanceScore, BalanceTally
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable

log = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 600.0


class BalanceSink(Protocol):
    def sampled(self, cluster: str, score: BalanceScore, at: float) -> None:
        """A sample that began at ``at`` (seconds since the epoch) succeeded."""
        ...

    def failed(self, cluster: str) -> None: ...


def sample(kafka: KafkaAdmin, topics_per_request: int = 200) -> BalanceScore:
    """One balance sample of a cluster (raises what the adapter raises)."""
    live = kafka.brokers()
    tally = BalanceTally({b: broker.rack for b, broker in live.items()})
    topics = sorted(t for t in kafka.topic_names() if not t.startswith("__"))
    answered = set(live)
    for start in range(0, len(topics), topics_per_request):
        batch = topics[start:start + topics_per_request]
        for state in kafka.describe_topics(batch).values():
            tally.add_partition(state.replicas, state.leader)
        report = kafka.log_dirs(batch, live)
        # A live broker that did not answer one batch has no full byte count: it is left out of the bytes ratios.
        answered &= set(report.broker_dirs)
        for (_, broker), size in report.sizes.items():
            tally.add_bytes(broker, size)
    return tally.score(answered)


@dataclass
class _ClusterState:
    due: float = 0.0
    failures: int = 0
    outage_since: float | None = None


class ClusterBalanceSampler:
    def __init__(self, clusters: Collection[str], interval: float, *, kafka: Callable[[str], KafkaAdmin],
                 forget: Callable[[str], None], sink: BalanceSink, topics_per_request: int = 200,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 logger: logging.Logger = log) -> None:
        if interval <= 0:
            raise ValueError("the sampling interval must be positive (0 means: do not start a sampler)")
        self.interval = interval
        self._kafka, self._forget, self._sink = kafka, forget, sink
        self._topics_per_request = topics_per_request
        self._clock, self._wall, self._log = clock, wall, logger
        self._states = {name: _ClusterState() for name in sorted(clusters)}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def backoff(self, failures: int) -> float:
        """The wait after the ``failures``-th failed sample in a row."""
        return float(min(max(self.interval, MAX_BACKOFF_SECONDS), self.interval * 2 ** min(failures, 32)))

    def run_due(self) -> float:
        """Sample every cluster that is due; the seconds until the next one is."""
        for name, state in self._states.items():
            if self._stop.is_set():
                break
            if self._clock() >= state.due:
                self._sample_one(name, state)
        now = self._clock()
        return max(0.0, min((s.due for s in self._states.values()), default=now + self.interval) - now)

    def _sample_one(self, name: str, state: _ClusterState) -> None:
        began, at = self._clock(), self._wall()
        try:
            score = sample(self._kafka(name), self._topics_per_request)
        except Exception as exc:  # one failed sample must not end the thread: said once per outage, then backoff
            state.failures += 1
            wait = self.backoff(state.failures)
            state.due = self._clock() + wait
            self._sink.failed(name)
            if isinstance(exc, KafkaUnavailable):
                self._forget(name)  # reconnect next time (a refused login stays until its own backoff step)
            if state.outage_since is None:
                state.outage_since = began
                known = isinstance(exc, (KafkaUnavailable, KafkaRequestRefused))
                self._log.warning(
                    "cluster %r: balance sample failed (%s: %s); the kpo_cluster_* balance gauges keep the last "
                    "sample (kpo_cluster_balance_up 0), next attempt in %.0f s, backing off up to %.0f s; said once "
                    "until a sample succeeds", name, type(exc).__name__, str(exc)[:300], wait,
                    self.backoff(64), exc_info=None if known else exc)
            return
        self._sink.sampled(name, score, at)
        state.due = began + self.interval
        if state.outage_since is not None:
            self._log.warning("cluster %r: balance sampled again after %.0f s (%d failed attempt(s))", name,
                              self._clock() - state.outage_since, state.failures)
        state.failures, state.outage_since = 0, None

    def _run(self) -> None:
        while not self._stop.is_set():
            wait = self.run_due()
            self._stop.wait(max(wait, 0.05))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kpo-balance-sampler", daemon=True)
        self._thread.start()
        self._log.info("balance score: sampling %s every %g s", ", ".join(self._states) or "no cluster",
                       self.interval)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
