"""Auto-propose on broker changes: a background thread that looks at each configured cluster's registered brokers and
proposes an ``AddBrokers`` PartitionReassignment for the ones that hold nothing (:mod:`kpo.domain.auto_propose` says
when and what).

A look costs one DescribeCluster while every registered broker is known to hold a replica (the steady state). Only
when a broker is not known to hold one does the look walk the topics, ``topicsPerRequest`` at a time, and it stops as
soon as every such broker has been found in a replica list; a broker found holding replicas is remembered for the
operator's life, so a broker that a RemoveBrokers plan drains is not taken for a new one while this operator runs.
With ``removeDeadAfterSeconds`` on, the first look walks every topic once, and so does each look while a broker that
held replicas is not alive and not yet drained (its replicas are what a RemoveBrokers proposal would move).

A look that fails (Kafka unreachable, a refused login, the API server down or refusing) is said once and backed off
as :mod:`kpo.background.loop` does it. A proposal that the API server refuses (the configured plan
template fails the CRD's rules) is said once per broker set, not once per look.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kpo.background.loop import ClusterLoop, Wording
from kpo.config import AutoProposeCluster
from kpo.domain.auto_propose import (
    ADD_BROKERS,
    REMOVE_BROKERS,
    add_brokers_proposal,
    covered_brokers,
    departures,
    newcomers,
    proposed_message,
    remove_brokers_proposal,
)
from kpo.kafka.admin import KafkaAdmin

log = logging.getLogger(__name__)

WORDING = Wording(failed="auto-propose cannot look at the brokers", succeeds="a look succeeds",
                  recovered="auto-propose looks at the brokers again")


class ProposalStore(Protocol):
    def existing(self, namespace: str, cluster: str) -> list[dict[str, Any]]: ...

    def create(self, body: Mapping[str, Any], message: str) -> bool: ...


def holders(kafka: KafkaAdmin, candidates: Collection[int] | None, topics_per_request: int = 200) -> set[int]:
    """Which of ``candidates`` hold a replica of any topic (internal topics included), reading the topics in batches
    and stopping once all of them have been found; ``None``: every broker named in a replica list (a full walk)."""
    wanted, found = (None if candidates is None else set(candidates)), set[int]()
    topics = sorted(kafka.topic_names())
    for start in range(0, len(topics), topics_per_request):
        for state in kafka.describe_topics(topics[start:start + topics_per_request]).values():
            found.update(state.replicas if wanted is None else wanted & set(state.replicas))
        if found == wanted:
            break
    return found


@dataclass
class _ClusterState:
    empty_since: dict[int, float] = field(default_factory=dict)
    dead_since: dict[int, float] = field(default_factory=dict)
    # Brokers seen holding a replica in this operator's life (never "new"), and those of them that are not alive
    # and hold nothing any more (drained: no reason to walk the topics for them).
    ever_held: set[int] = field(default_factory=set)
    gone: set[int] = field(default_factory=set)
    # Every broker seen alive: one that disappears may hold replicas an add proposal gave it (never walked for).
    seen_alive: set[int] = field(default_factory=set)
    walked: bool = False
    refused: set[tuple[str, frozenset[int]]] = field(default_factory=set)


def _utc(seconds_ago: float) -> str:
    at = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds_ago)
    return at.isoformat(timespec="seconds")


class BrokerChangeWatcher(ClusterLoop):
    def __init__(self, clusters: Mapping[str, AutoProposeCluster], interval: float, *,
                 kafka: Callable[[str], KafkaAdmin], forget: Callable[[str], None], proposals: ProposalStore,
                 topics_per_request: int = 200, clock: Callable[[], float] = time.monotonic,
                 logger: logging.Logger = log) -> None:
        super().__init__(clusters, interval, forget=forget, wording=WORDING, thread_name="kpo-auto-propose",
                         clock=clock, logger=logger)
        self._settings = dict(clusters)
        self._kafka, self._proposals = kafka, proposals
        self._topics_per_request = topics_per_request
        self._states = {name: _ClusterState() for name in sorted(clusters)}

    def attempt(self, name: str) -> None:
        self.look(name, self._states[name])

    def wake_at(self, name: str) -> float | None:
        """When the first waiting broker's settle time (or a dead broker's wait) runs out: the look that proposes it
        is then taken at that moment, so a proposal comes settleSeconds after kpo first saw the broker, not up to an
        interval later."""
        settings, state = self._settings[name], self._states[name]
        deadlines = [first + settings.settle_seconds for first in state.empty_since.values()]
        if settings.remove_dead_after_seconds > 0:
            deadlines += [first + settings.remove_dead_after_seconds for first in state.dead_since.values()]
        return min(deadlines, default=None)

    def start(self) -> None:
        super().start()
        self._log.info("auto-propose: watching the brokers of %s every %g s", ", ".join(self._states), self.interval)

    def look(self, name: str, state: _ClusterState) -> frozenset[int]:
        """One look at cluster ``name``: the brokers proposed (empty when none)."""
        settings = self._settings[name]
        removal = settings.remove_dead_after_seconds > 0
        kafka = self._kafka(name)
        live = kafka.brokers()
        alive = set(live)
        unknown = alive - state.ever_held - settings.ignore_brokers
        state.gone -= alive
        known = state.ever_held | state.seen_alive
        state.seen_alive |= alive
        missing = known - alive - state.gone
        full_walk = removal and (bool(missing) or not state.walked)
        if not unknown and not full_walk:
            state.empty_since.clear()
            state.dead_since.clear()
            return frozenset()
        existing = self._proposals.existing(settings.namespace, name)
        covered = covered_brokers(existing, ADD_BROKERS)
        dead_holding: set[int] = set()
        if full_walk:
            referenced = holders(kafka, None, self._topics_per_request)
            state.ever_held |= referenced
            state.gone = (state.ever_held | state.seen_alive) - alive - referenced
            state.walked = True
            dead_holding = referenced - alive
        else:
            to_find = unknown - covered
            if to_find and not state.ever_held & alive:
                to_find = alive - state.ever_held  # first look: learn whether anyone holds a replica at all
            if to_find:
                state.ever_held |= holders(kafka, to_find, self._topics_per_request)
        now = self._clock()
        first_empty, first_dead = dict(state.empty_since), dict(state.dead_since)
        seen = newcomers(state.empty_since, alive, state.ever_held & alive, covered=covered,
                         ignored=settings.ignore_brokers, settle_seconds=settings.settle_seconds, now=now)
        state.empty_since = seen.waiting_since
        proposed: set[int] = set()
        if seen.due:
            body = add_brokers_proposal(
                cluster=name, namespace=settings.namespace, brokers=seen.due,
                racks={b: live[b].rack for b in seen.due}, automatic=settings.approval == "Automatic",
                plan=settings.plan, execution=settings.execution,
                seen_at=_utc(seconds_ago=now - min(first_empty.get(b, now) for b in seen.due)))
            proposed |= self._propose(name, state, ADD_BROKERS, seen.due, body)
        if removal:
            gone = departures(state.dead_since, dead_holding, covered=covered_brokers(existing, REMOVE_BROKERS),
                              ignored=settings.ignore_brokers, after_seconds=settings.remove_dead_after_seconds,
                              now=now)
            state.dead_since = gone.waiting_since
            if gone.due:
                body = remove_brokers_proposal(
                    cluster=name, namespace=settings.namespace, brokers=gone.due,
                    automatic=settings.approval == "Automatic", plan=settings.plan, execution=settings.execution,
                    seen_at=_utc(seconds_ago=now - min(first_dead.get(b, now) for b in gone.due)))
                proposed |= self._propose(name, state, REMOVE_BROKERS, gone.due, body)
        return frozenset(proposed)

    def _propose(self, name: str, state: _ClusterState, kind: str, brokers: frozenset[int],
                 body: Mapping[str, Any]) -> frozenset[int]:
        if (kind, brokers) in state.refused:
            return frozenset()
        settings = self._settings[name]
        message = proposed_message(brokers, settings.approval == "Automatic", kind)
        try:
            created = self._proposals.create(body, message)
        except Exception as exc:
            if getattr(exc, "status", None) in (400, 403, 422):
                state.refused.add((kind, brokers))
                self._log.error("cluster %r: the API server refused the auto-proposal %s (%s): fix autoPropose in "
                                "the operator's configuration; said once for these brokers", name,
                                body["metadata"]["name"], str(getattr(exc, "body", exc))[:500])
                return frozenset()
            raise
        if created:
            self._log.info("cluster %r: %s (PartitionReassignment %s/%s)", name, message,
                           settings.namespace, body["metadata"]["name"])
        return brokers
