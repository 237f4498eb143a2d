"""Samples every configured Kafka cluster's balance score in the background, for the ``kpo_cluster_*`` gauges.

One daemon thread for all clusters. Each sample reads DescribeCluster (live brokers, racks), the topic names, then
DescribeTopics and DescribeLogDirs in batches of ``balanceScore.topicsPerRequest`` topics: each batch is folded into
per-broker numbers (:class:`kpo.domain.balance_score.BalanceTally`) and dropped, so a 20,000-partition cluster keeps
no per-partition data beyond one batch, and the operator's other Kafka calls (the adapter serialises them) go between
two batches rather than waiting for a whole sample. Internal topics (``__consumer_offsets`` and the like) are left out,
as the planner leaves them out of a ``Rebalance`` by default.

A cluster that cannot be sampled (Kafka unreachable, a refused login, a missing ACL) is said once and backed off as
:mod:`kpo.background.loop` does it; the gauges keep the last good sample meanwhile (``kpo_cluster_balance_up`` 0
says so).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from typing import Protocol

from kpo.background.loop import ClusterLoop, Wording
from kpo.domain.balance_score import BalanceScore, BalanceTally
from kpo.domain.model import DirCapacity
from kpo.kafka.admin import KafkaAdmin

log = logging.getLogger(__name__)

WORDING = Wording(failed="balance sample failed", succeeds="a sample succeeds", recovered="balance sampled again",
                  kept="; the kpo_cluster_* balance gauges keep the last sample (kpo_cluster_balance_up 0)")


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
    capacity: dict[tuple[int, str], DirCapacity] = {}
    for start in range(0, len(topics), topics_per_request):
        batch = topics[start:start + topics_per_request]
        for state in kafka.describe_topics(batch).values():
            tally.add_partition(state.replicas, state.leader)
        report = kafka.log_dirs(batch, live)
        # A live broker that did not answer one batch has no full byte count: it is left out of the bytes ratios.
        answered &= set(report.broker_dirs)
        for (_, broker), size in report.sizes.items():
            tally.add_bytes(broker, size)
        capacity.update(report.capacity)
    # Every batch's answer carries each dir's capacity: only a cluster without topics asks for the dirs alone.
    tally.add_dirs(capacity if topics else kafka.dir_capacity(live))
    return tally.score(answered)


class ClusterBalanceSampler(ClusterLoop):
    def __init__(self, clusters: Collection[str], interval: float, *, kafka: Callable[[str], KafkaAdmin],
                 forget: Callable[[str], None], sink: BalanceSink, topics_per_request: int = 200,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 logger: logging.Logger = log) -> None:
        super().__init__(clusters, interval, forget=forget, wording=WORDING, thread_name="kpo-balance-sampler",
                         clock=clock, logger=logger)
        self._kafka, self._sink = kafka, sink
        self._topics_per_request = topics_per_request
        self._wall = wall
        self._names = sorted(clusters)

    def attempt(self, name: str) -> None:
        at = self._wall()
        self._sink.sampled(name, sample(self._kafka(name), self._topics_per_request), at)

    def on_failure(self, name: str) -> None:
        self._sink.failed(name)

    def start(self) -> None:
        super().start()
        self._log.info("balance score: sampling %s every %g s", ", ".join(self._names) or "no cluster",
                       self.interval)
