"""The throttle ledger of one Kafka cluster: which throttles kpo holds there, for which resources.

Each resource journals the throttles it holds (:class:`~kpo.domain.throttle.ThrottleJournal`): a broker rate or
replica entry several resources need is recorded by each of them, a reference each, and whichever ends last takes it
back. The journals of every resource on the cluster are kept in one place, the cluster's :class:`ThrottleRecord` (a
ConfigMap in the operator's namespace, :mod:`kpo.k8s.throttle_record`), and each is written there *before* any change
it names is made in Kafka. The resource's own ConfigMap keeps its copy too, beside its originals.

Why one place: whether a rate is someone else's, or still needed by another resource when one ends, is judged
against the other resources' journals. Read from the operator's index of statuses, which lags, two resources deciding
at once — or one ending while the index still showed another's old journal — each took the rate for the other's, and
100 resources left both rates on every broker for good. A status also says nothing until the tick that changed Kafka
has written it, and is gone with a namespace being deleted. The record is written first and read back when it is
older than ``fresh_seconds`` (another operator, scoped to other namespaces, may share the cluster), and the ledger
lets one resource at a time change the cluster's throttles.

An operator upgraded mid-flight from the per-resource journals finds no record: the journals in the resources'
statuses (the index) count until each resource next saves its journal, which puts it in the record. A holder the
record names whose resource no longer exists (its finalizer taken off by hand) would keep a shared rate for ever: the
ledger asks whether it exists, and takes back what it alone held, once, when a removal meets it.

Reading every throttled broker's and topic's configs on every tick of every resource cost a DescribeConfigs per
broker and per topic per tick; for the entities kpo holds, the ledger keeps what it read for ``fresh_seconds``
instead, since every change kpo makes goes through it and drops the entity from the cache (a change made outside kpo
is seen when the entry is read again). Entities kpo does not hold are always read fresh.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast

from kpo.domain.throttle import ConfigChange, ThrottleJournal, ThrottlePlan
from kpo.execution import throttles
from kpo.kafka.admin import KafkaAdmin

log = logging.getLogger(__name__)

Save = Callable[[ThrottleJournal], object]


class ThrottleRecord(Protocol):
    """The cluster's throttle journals, every resource's, in one place (keys are the resources' "namespace/name")."""

    def load(self) -> Mapping[str, ThrottleJournal]:
        """Every journal recorded for the cluster."""

    def save(self, key: str, journal: ThrottleJournal) -> None:
        """Record ``key``'s journal; an empty one removes ``key``."""

    def exists(self, key: str) -> bool | None:
        """Whether the resource ``key`` still exists (None: cannot tell, e.g. not allowed to read it)."""


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
    "nothing set" would let kpo take a user's throttle, set a moment ago, for its own. And not those this pass has
    changed: a removal is read back until Kafka shows it, and a broker shows it some milliseconds after the
    acknowledgement, so each read-back must ask Kafka again (each read still refreshes the cache).
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
            self._held_brokers = self._held_brokers - {int(c.name) for c in changes if c.resource == "broker"}
            self._held_topics = self._held_topics - {c.name for c in changes if c.resource == "topic"}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kafka, name)


class ThrottleLedger:
    #: An empty journal stays recorded this long (it overrides the index's stale copy until the status is written).
    EMPTY_KEPT_SECONDS = 300.0

    def __init__(self, *, record: ThrottleRecord | None = None, fresh_seconds: float = 10.0,
                 clock: Callable[[], float] = time.monotonic,
                 read_back_seconds: float = throttles.READ_BACK_SECONDS) -> None:
        self._lock = threading.Lock()
        #: How long a removal waits for Kafka to show it before leaving it to the next pass.
        self._read_back_seconds = read_back_seconds
        #: The journals this ledger saved, with when: the freshest of all.
        self._journals: dict[str, tuple[ThrottleJournal, float]] = {}
        self._record = record
        #: The record as last read (and kept up to date with this ledger's own saves), and when it was read.
        self._recorded: dict[str, ThrottleJournal] = {}
        self._recorded_at: float | None = None
        #: Holders the record names that were asked whether they exist (once each).
        self._asked: set[str] = set()
        self._cache = _ConfigCache(fresh_seconds, clock)
        self._fresh_seconds = fresh_seconds
        self._clock = clock

    def others(self, key: str, index: Mapping[str, ThrottleJournal]) -> list[ThrottleJournal]:
        """The journals of every resource but ``key``: this ledger's own saves first, then the cluster's record,
        then the index (statuses: journals kept before the record existed)."""
        return [j for k, j in sorted(self._holders(index).items()) if k != key and not j.empty]

    def _holders(self, index: Mapping[str, ThrottleJournal]) -> dict[str, ThrottleJournal]:
        now = self._clock()
        for gone in [k for k, (j, at) in self._journals.items() if j.empty and now - at > self.EMPTY_KEPT_SECONDS]:
            del self._journals[gone]
        return {**index, **self._recorded, **{k: j for k, (j, _at) in self._journals.items()}}

    def _read_record(self) -> None:
        if self._record is None:
            return
        now = self._clock()
        if self._recorded_at is not None and now - self._recorded_at <= self._fresh_seconds:
            return
        self._recorded = {k: j for k, j in self._record.load().items() if not j.empty}
        self._recorded_at = now

    def _write_record(self, key: str, journal: ThrottleJournal) -> None:
        if self._record is None:
            return
        self._record.save(key, journal)
        if journal.empty:
            self._recorded.pop(key, None)
        else:
            self._recorded[key] = journal

    def _set(self, key: str, journal: ThrottleJournal) -> None:
        self._journals[key] = (journal, self._clock())

    def _recording(self, key: str, save: Save) -> Save:
        def saved(journal: ThrottleJournal) -> object:
            self._write_record(key, journal)
            result = save(journal)
            self._set(key, journal)
            return result
        return saved

    def ensure(self, key: str, kafka: KafkaAdmin, wanted: ThrottlePlan, *, previous: ThrottleJournal,
               index: Mapping[str, ThrottleJournal], save: Save, live_brokers: Collection[int]) -> ThrottleJournal:
        """:func:`throttles.ensure` for resource ``key``, alone on this cluster while it runs."""
        with self._lock:
            self._read_record()
            if self._record is not None and not previous.empty and self._recorded.get(key) != previous:
                # A journal kept only by the resource (an earlier version's, or a save the record missed): into
                # the record before anything more is applied.
                self._write_record(key, previous)
            others = self.others(key, index)
            mine = throttles.ensure(self._cached(kafka, [previous, *others]), wanted, previous=previous,
                                    others=others, save=self._recording(key, save), live_brokers=live_brokers)
            self._set(key, mine)
            return mine

    def remove(self, key: str, kafka: KafkaAdmin, journal: ThrottleJournal, *, index: Mapping[str, ThrottleJournal],
               save: Save, live_brokers: Collection[int] | None) -> ThrottleJournal:
        """:func:`throttles.remove` for resource ``key``: what it alone still needs goes; what is left is returned."""
        with self._lock:
            self._read_record()
            self._let_go_of_the_departed(key, kafka, index, live_brokers)
            others = self.others(key, index)
            left = throttles.remove(self._cached(kafka, [journal, *others]), journal, others,
                                    self._recording(key, save), live_brokers=live_brokers,
                                    read_back_seconds=self._read_back_seconds)
            self._set(key, left)
            return left

    def _let_go_of_the_departed(self, key: str, kafka: KafkaAdmin, index: Mapping[str, ThrottleJournal],
                                live_brokers: Collection[int] | None) -> None:
        """Take back what holders that no longer exist alone held: nobody else ever would."""
        if self._record is None:
            return
        for holder, journal in sorted(self._recorded.items()):
            if holder == key or holder in index or holder in self._journals or holder in self._asked:
                continue
            self._asked.add(holder)
            if self._record.exists(holder) is not False:
                continue
            log.warning("the throttle journal of %s, which no longer exists, is still recorded: taking back what "
                        "it alone held", holder)
            others = [j for k, j in sorted(self._holders(index).items()) if k != holder and not j.empty]
            left = throttles.remove(self._cached(kafka, [journal, *others]), journal, others,
                                    functools.partial(self._write_record, holder), live_brokers=live_brokers,
                                    read_back_seconds=self._read_back_seconds)
            if not left.empty:
                self._asked.discard(holder)  # a broker that is down: the next removal tries again

    def forget(self, key: str) -> None:
        """``key`` no longer counts as a holder (deleted with deletionPolicy Orphan: its throttles are the user's)."""
        with self._lock:
            self._write_record(key, ThrottleJournal())
            self._set(key, ThrottleJournal())

    def _cached(self, kafka: KafkaAdmin, held: Sequence[ThrottleJournal]) -> KafkaAdmin:
        brokers = frozenset(b for j in held for b in j.all_brokers)
        topics = frozenset(t for j in held for t in j.topics)
        return cast(KafkaAdmin, _CachedKafka(kafka, self._cache, brokers, topics))
