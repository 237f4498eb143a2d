"""Auto-propose on broker changes: a background thread that looks at each configured cluster's registered brokers and
proposes an ``AddBrokers`` PartitionReassignment for the ones that hold nothing (:mod:`kpo.domain.auto_propose` says
when and what).

A look costs one DescribeCluster while every registered broker is known to hold a replica (the steady state). Only
when a broker is not known to hold one does the look walk the topics, ``topicsPerRequest`` at a time, and it stops as
soon as every such broker has been found in a replica list; a broker found holding replicas is remembered for the
operator's life, so a broker that a RemoveBrokers plan drains is not taken for a new one while this operator runs.

A look that fails (Kafka unreachable, a refused login, the API server down or refusing) is said once, when the
outage begins, and the next looks back off (the interval doubled per failure, up to :data:`MAX_BACKOFF_SECONDS`); the
first look that succeeds again says how long it lasted. A proposal that the API server refuses (the configured plan
template fails the CRD's rules) is said once per broker set, not once per look.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kpo.config import AutoProposeCluster
from kpo.domain.auto_propose import add_brokers_proposal, covered_brokers, newcomers, proposed_message
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable

log = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 600.0


class ProposalStore(Protocol):
    def existing(self, namespace: str, cluster: str) -> list[dict[str, Any]]: ...

    def create(self, body: Mapping[str, Any], message: str) -> bool: ...


def holders(kafka: KafkaAdmin, candidates: Collection[int], topics_per_request: int = 200) -> set[int]:
    """Which of ``candidates`` hold a replica of any topic (internal topics included), reading the topics in batches
    and stopping once all of them have been found."""
    wanted, found = set(candidates), set[int]()
    topics = sorted(kafka.topic_names())
    for start in range(0, len(topics), topics_per_request):
        for state in kafka.describe_topics(topics[start:start + topics_per_request]).values():
            found.update(wanted & set(state.replicas))
        if found == wanted:
            break
    return found


@dataclass
class _ClusterState:
    due: float = 0.0
    failures: int = 0
    outage_since: float | None = None
    empty_since: dict[int, float] = field(default_factory=dict)
    ever_held: set[int] = field(default_factory=set)
    refused: set[frozenset[int]] = field(default_factory=set)


class BrokerChangeWatcher:
    def __init__(self, clusters: Mapping[str, AutoProposeCluster], interval: float, *,
                 kafka: Callable[[str], KafkaAdmin], forget: Callable[[str], None], proposals: ProposalStore,
                 topics_per_request: int = 200, clock: Callable[[], float] = time.monotonic,
                 logger: logging.Logger = log) -> None:
        self.interval = interval
        self._settings = dict(clusters)
        self._kafka, self._forget, self._proposals = kafka, forget, proposals
        self._topics_per_request = topics_per_request
        self._clock, self._log = clock, logger
        self._states = {name: _ClusterState() for name in sorted(clusters)}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def backoff(self, failures: int) -> float:
        return float(min(max(self.interval, MAX_BACKOFF_SECONDS), self.interval * 2 ** min(failures, 32)))

    def run_due(self) -> float:
        """Look at every cluster that is due; the seconds until the next one is."""
        for name, state in self._states.items():
            if self._stop.is_set():
                break
            if self._clock() >= state.due:
                self._look_safely(name, state)
        now = self._clock()
        return max(0.0, min((s.due for s in self._states.values()), default=now + self.interval) - now)

    def _look_safely(self, name: str, state: _ClusterState) -> None:
        began = self._clock()
        try:
            self.look(name, state)
        except Exception as exc:  # one failed look must not end the thread: said once per outage, then backoff
            state.failures += 1
            wait = self.backoff(state.failures)
            state.due = self._clock() + wait
            if isinstance(exc, KafkaUnavailable):
                self._forget(name)
            if state.outage_since is None:
                state.outage_since = began
                known = isinstance(exc, (KafkaUnavailable, KafkaRequestRefused)) or hasattr(exc, "status")
                self._log.warning("cluster %r: auto-propose cannot look at the brokers (%s: %s); next attempt in "
                                  "%.0f s, backing off up to %.0f s; said once until a look succeeds", name,
                                  type(exc).__name__, str(exc)[:300], wait, self.backoff(64),
                                  exc_info=None if known else exc)
            return
        state.due = began + self.interval
        if state.outage_since is not None:
            self._log.warning("cluster %r: auto-propose looks at the brokers again after %.0f s (%d failed "
                              "attempt(s))", name, self._clock() - state.outage_since, state.failures)
        state.failures, state.outage_since = 0, None

    def look(self, name: str, state: _ClusterState) -> frozenset[int]:
        """One look at cluster ``name``: the brokers proposed (empty when none)."""
        settings = self._settings[name]
        kafka = self._kafka(name)
        live = kafka.brokers()
        unknown = set(live) - state.ever_held - settings.ignore_brokers
        if not unknown:
            state.empty_since.clear()
            return frozenset()
        covered = covered_brokers(self._proposals.existing(settings.namespace, name))
        to_find = unknown - covered
        if to_find and not state.ever_held & set(live):
            to_find = set(live) - state.ever_held  # first look: learn whether anyone holds a replica at all
        if to_find:
            state.ever_held |= holders(kafka, to_find, self._topics_per_request)
        seen = newcomers(state.empty_since, live, state.ever_held & set(live), covered=covered,
                         ignored=settings.ignore_brokers, settle_seconds=settings.settle_seconds, now=self._clock())
        state.empty_since = seen.empty_since
        if not seen.due or seen.due in state.refused:
            return frozenset()
        automatic = settings.approval == "Automatic"
        body = add_brokers_proposal(
            cluster=name, namespace=settings.namespace, brokers=seen.due,
            racks={b: live[b].rack for b in seen.due}, automatic=automatic, plan=settings.plan,
            execution=settings.execution, seen_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"))
        message = proposed_message(seen.due, automatic)
        try:
            created = self._proposals.create(body, message)
        except Exception as exc:
            if getattr(exc, "status", None) in (400, 403, 422):
                state.refused.add(seen.due)
                self._log.error("cluster %r: the API server refused the auto-proposal %s (%s): fix autoPropose in "
                                "the operator's configuration; said once for these brokers", name,
                                body["metadata"]["name"], str(getattr(exc, "body", exc))[:500])
                return frozenset()
            raise
        if created:
            self._log.info("cluster %r: %s (PartitionReassignment %s/%s)", name, message,
                           settings.namespace, body["metadata"]["name"])
        return seen.due

    def _run(self) -> None:
        while not self._stop.is_set():
            wait = self.run_due()
            self._stop.wait(max(wait, 0.05))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kpo-auto-propose", daemon=True)
        self._thread.start()
        self._log.info("auto-propose: watching the brokers of %s every %g s", ", ".join(self._states), self.interval)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
