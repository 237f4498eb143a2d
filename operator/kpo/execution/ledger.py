"""The throttle ledger of one Kafka cluster: which throttles kpo holds there, for which resources.

Each resource journals the throttles it holds (its rollback ConfigMap, before anything is applied, and its status),
and a broker rate or replica entry several resources need is recorded by each of them: a reference each
(:func:`kpo.domain.throttle.journal`). Whether a rate is someone else's, or still needed by another resource when one
ends, is judged against the other resources' journals — and that judgement used to read them from the operator's
index of statuses, which lags: two resources deciding at once, or one ending while the index still showed another's
old journal, each took the rate for the other's, and 100 resources left both rates on every broker for good.

Here a cluster's throttle changes are made one resource at a time, and the other resources' journals are the ones
this ledger recorded as they were saved (fresher than any status), falling back to the index only for resources it
has not seen since the operator started — which is also how an operator upgraded mid-flight picks up the journals
earlier versions kept per resource: they are the same journals.

Reading every throttled broker's and topic's configs on every tick of every resource cost a DescribeConfigs per
broker and per topic per tick; for the entities kpo holds, the ledger keeps what it read for ``fresh_seconds``
instead, since every change kpo makes goes through it and drops the entity from the cache (a change made outside kpo
is seen when the entry is read again). Entities kpo does not hold are always read fresh.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar, cast

from kpo.domain.model import Replicas, TopicPartition
from kpo.domain.throttle import ConfigChange, ThrottleJournal
from kpo.execution import throttles
from kpo.kafka.admin import KafkaAdmin

Save = Callable[[ThrottleJournal], object]


class _ConfigCache:
    """Broker and topic throttle configs as last read or written, for ``fresh_seconds``."""

    def __init__(self, fresh_seconds: float, clock: Callable[[], float]) -> None:
        self.fresh_seconds = fresh_seconds
        self.clock = clock
        self.brokers: dict[int, tuple[float, dict[str, str]]] = {}
        self.topics: dict[str, tuple[float, dict[str, str]]] = {}

    def fresh(self, at: float) -> bool:
        return self.clock() - at <= self.fresh_seconds

    def changed(self, changes: Sequence[ConfigChange]) -> None:
        # Applied changes are not replayed here (APPEND/SUBTRACT semantics live in Kafka): the entity is read again.
        for change in changes:
            if change.resource == "broker":
                self.brokers.pop(int(change.name), None)
            else:
                self.topics.pop(change.name, None)


Entity = TypeVar("Entity", int, str)


def _through(cached: dict[Entity, tuple[float, dict[str, str]]], wanted: Collection[Entity], *,
             held: frozenset[Entity], names: Collection[str], cache: _ConfigCache,
             read: Callable[[list[Entity]], Mapping[Entity, Mapping[str, str]]]) -> dict[Entity, dict[str, str]]:
    """The configs of ``wanted``: from the cache for the entities kpo holds and read within ``fresh_seconds``, the
    others read now (and cached)."""
    missing = sorted(e for e in set(wanted) if e not in held or e not in cached or not cache.fresh(cached[e][0]))
    if missing:
        found = read(missing)
        now = cache.clock()
        for entity in missing:
            if entity in found:
                cached[entity] = (now, dict(found[entity]))
    return {e: {k: v for k, v in cached[e][1].items() if k in names} for e in wanted if e in cached}


def _each(asked: list[int], found: Mapping[int, Mapping[str, str]]) -> dict[int, Mapping[str, str]]:
    return {b: found.get(b, {}) for b in asked}


class _CachedKafka:
    """The cluster's client, with the throttle configs of entities kpo holds served from the ledger's cache.

    Only those: whether a rate or a replica list is someone else's is decided on a fresh read, always — a cached
    "nothing set" would let kpo take a user's throttle, set a moment ago, for its own.
    """

    def __init__(self, kafka: KafkaAdmin, cache: _ConfigCache, held_brokers: frozenset[int],
                 held_topics: frozenset[str]) -> None:
        self._kafka = kafka
        self._cache = cache
        self._held_brokers = held_brokers
        self._held_topics = held_topics

    def broker_configs(self, brokers: Collection[int], names: Collection[str]) -> dict[int, dict[str, str]]:
        # A broker answers for itself even with nothing set: what it did not name is cached as nothing set.
        return _through(self._cache.brokers, brokers, held=self._held_brokers, names=names, cache=self._cache,
                        read=lambda missing: _each(missing, self._kafka.broker_configs(missing, names)))

    def topic_configs(self, topics: Collection[str], names: Collection[str]) -> dict[str, dict[str, str]]:
        # A topic Kafka does not name does not exist (deleted): nothing is cached for it.
        return _through(self._cache.topics, topics, held=self._held_topics, names=names, cache=self._cache,
                        read=lambda missing: self._kafka.topic_configs(missing, names))

    def alter_configs(self, changes: Sequence[ConfigChange]) -> None:
        try:
            self._kafka.alter_configs(changes)
        finally:
            self._cache.changed(changes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kafka, name)


class ThrottleLedger:
    #: An empty journal stays recorded this long (it overrides the index's stale copy until the status is written).
    EMPTY_KEPT_SECONDS = 300.0

    def __init__(self, *, fresh_seconds: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._journals: dict[str, tuple[ThrottleJournal, float]] = {}
        self._cache = _ConfigCache(fresh_seconds, clock)
        self._clock = clock

    def others(self, key: str, index: Mapping[str, ThrottleJournal]) -> list[ThrottleJournal]:
        """The journals of every resource but ``key``: the ledger's where it has one, else the index's."""
        now = self._clock()
        for gone in [k for k, (j, at) in self._journals.items() if j.empty and now - at > self.EMPTY_KEPT_SECONDS]:
            del self._journals[gone]
        merged = {**index, **{k: j for k, (j, _at) in self._journals.items()}}
        return [j for k, j in sorted(merged.items()) if k != key and not j.empty]

    def _set(self, key: str, journal: ThrottleJournal) -> None:
        self._journals[key] = (journal, self._clock())

    def _recording(self, key: str, save: Save) -> Save:
        def saved(journal: ThrottleJournal) -> object:
            result = save(journal)
            self._set(key, journal)
            return result
        return saved

    def ensure(self, key: str, kafka: KafkaAdmin, rate: int, moves: Mapping[TopicPartition, tuple[Replicas, Replicas]],
               *, previous: ThrottleJournal, index: Mapping[str, ThrottleJournal], save: Save,
               live_brokers: Collection[int]) -> ThrottleJournal:
        """:func:`throttles.ensure` for resource ``key``, alone on this cluster while it runs."""
        with self._lock:
            others = self.others(key, index)
            mine = throttles.ensure(self._cached(kafka, [previous, *others]), rate, moves, previous=previous,
                                    others=others, save=self._recording(key, save), live_brokers=live_brokers)
            self._set(key, mine)
            return mine

    def remove(self, key: str, kafka: KafkaAdmin, journal: ThrottleJournal, *, index: Mapping[str, ThrottleJournal],
               save: Save, live_brokers: Collection[int] | None) -> ThrottleJournal:
        """:func:`throttles.remove` for resource ``key``: what it alone still needs goes; what is left is returned."""
        with self._lock:
            others = self.others(key, index)
            left = throttles.remove(self._cached(kafka, [journal, *others]), journal, others,
                                    self._recording(key, save), live_brokers=live_brokers)
            self._set(key, left)
            return left

    def forget(self, key: str) -> None:
        """``key`` no longer counts as a holder (deleted with deletionPolicy Orphan: its throttles are the user's)."""
        with self._lock:
            self._set(key, ThrottleJournal())

    def _cached(self, kafka: KafkaAdmin, held: Sequence[ThrottleJournal]) -> KafkaAdmin:
        brokers = frozenset(b for j in held for b in j.brokers)
        topics = frozenset(t for j in held for t in j.topics)
        return cast(KafkaAdmin, _CachedKafka(kafka, self._cache, brokers, topics))
