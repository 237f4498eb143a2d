"""Replication throttles for a PartitionReassignment, set and removed without disturbing anyone else's.

Kafka throttles replication per broker (``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate``, in bytes/s) for the replicas listed per topic
(``leader.replication.throttled.replicas``: the existing replicas that serve the copies, and
``follower.replication.throttled.replicas``: the new replicas that fetch them), exactly as kafka-reassign-partitions
sets them. kafka-reassign-partitions leaves them behind unless someone remembers ``--verify``; kpo removes them when
the resource's last move ends.

"Without disturbing anyone else's" is made precise by a :class:`ThrottleJournal`: the configs kpo itself added,
written to the resource's ConfigMap *before* they are applied, so a restart in between leaks nothing. kpo never
overrides a broker rate it did not set (someone's own throttle keeps governing that broker), appends to the replica
lists instead of replacing them, records only entries that were not there before, and on removal subtracts only its
own entries, and deletes only the broker rates no other live resource still relies on.

Removal goes entity by entity (each topic, then each broker on its own): a broker that is down cannot take its rate
back, but that must neither keep the topics' replica lists in place nor hide what is left. The journal then keeps
exactly the entities not yet cleaned (:meth:`ThrottleJournal.without`), the status lists them
(:func:`describe_pending`), and the next attempt takes back only those.

The intra-broker throttle (``spec.execution.logDirThrottle``, kafka-reassign-partitions'
``--replica-alter-log-dirs-throttle``) is the broker config ``replica.alter.log.dirs.io.max.bytes.per.second``: it caps
how fast a broker copies a replica from one of its log dirs to another (AlterReplicaLogDirs). It is journaled and
shared exactly like the replication rates, with its own rate and its own brokers (those with a replica to move
between dirs), and taken back with them, broker by broker.

Setting goes entity by entity too: Kafka may refuse some of them (a principal that may describe but not alter
configs). The journal written beforehand is then cut back to what was applied (:func:`applied_only`). A broker that
is down is not asked at all: the topics' lists and the live brokers' rates are set, the down broker's rates when it
is back (:func:`reachable`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kpo.domain.model import Replicas, TopicPartition

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
BROKER_KEYS = (LEADER_RATE, FOLLOWER_RATE)
#: Every broker key kpo may hold: what is read of a broker before any of them is set or taken back.
HELD_BROKER_KEYS = (*BROKER_KEYS, LOG_DIR_RATE)
TOPIC_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)

#: How a condition message names throttles still set after a terminal phase (see ``cleanup_pending``).
CLEANUP_PENDING_PREFIX = "replication throttles still set"


@dataclass(frozen=True)
class ConfigChange:
    """One IncrementalAlterConfigs operation."""

    resource: str  # "broker" | "topic"
    name: str  # broker id or topic name
    key: str
    op: str  # "SET" | "DELETE" | "APPEND" | "SUBTRACT"
    value: str = ""


@dataclass(frozen=True)
class ThrottlePlan:
    """What a resource's moves need throttled: every broker they touch, and the replicas on each side; and the
    brokers that move replicas between their own log dirs, at ``log_dir_rate``."""

    rate: int
    brokers: frozenset[int]
    leader_replicas: Mapping[str, frozenset[str]]
    follower_replicas: Mapping[str, frozenset[str]]
    log_dir_rate: int = 0
    log_dir_brokers: frozenset[int] = frozenset()


def plan(rate: int, moves: Mapping[TopicPartition, tuple[Replicas, Replicas]], *, log_dir_rate: int = 0,
         log_dir_brokers: Iterable[int] = ()) -> ThrottlePlan:
    """Throttle what ``moves`` (partition -> (original, target)) copy, the way kafka-reassign-partitions does, at
    ``rate`` (0: no replication throttle), and the log dir moves of ``log_dir_brokers`` at ``log_dir_rate``."""
    brokers: set[int] = set()
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    dir_brokers = frozenset(log_dir_brokers) if log_dir_rate > 0 else frozenset()
    for tp, (original, target) in moves.items() if rate > 0 else ():
        added = [b for b in target if b not in original]
        if not added:
            continue
        brokers.update(original)
        brokers.update(target)
        leader.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in original)
        follower.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in added)
    return ThrottlePlan(rate=rate, brokers=frozenset(brokers),
                        leader_replicas={t: frozenset(v) for t, v in leader.items()},
                        follower_replicas={t: frozenset(v) for t, v in follower.items()},
                        log_dir_rate=log_dir_rate if dir_brokers else 0, log_dir_brokers=dir_brokers)


@dataclass(frozen=True)
class ThrottleJournal:
    """The throttle configs this resource added (and so must remove), as kept in its ConfigMap."""

    rate: int = 0
    brokers: frozenset[int] = frozenset()
    leader_replicas: Mapping[str, frozenset[str]] = field(default_factory=dict)
    follower_replicas: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: The intra-broker rate and the brokers it was set on (replica.alter.log.dirs.io.max.bytes.per.second).
    log_dir_rate: int = 0
    log_dir_brokers: frozenset[int] = frozenset()

    @property
    def empty(self) -> bool:
        return not self.brokers and not self.log_dir_brokers and not any(self.leader_replicas.values()) \
            and not any(self.follower_replicas.values())

    @property
    def all_brokers(self) -> frozenset[int]:
        """Every broker with a rate of this journal's: one config entity each, set and taken back as a whole."""
        return self.brokers | self.log_dir_brokers

    def to_json(self) -> dict[str, Any]:
        topics = sorted(set(self.leader_replicas) | set(self.follower_replicas))
        written: dict[str, Any] = {
            "rate": self.rate,
            "brokers": sorted(self.brokers),
            "topics": [{"topic": t, "leader": sorted(self.leader_replicas.get(t, ())),
                        "follower": sorted(self.follower_replicas.get(t, ()))} for t in topics],
        }
        if self.log_dir_brokers:
            written |= {"logDirRate": self.log_dir_rate, "logDirBrokers": sorted(self.log_dir_brokers)}
        return written

    def without(self, *, brokers: Iterable[int] = (), topics: Iterable[str] = ()) -> ThrottleJournal:
        """The journal once the rates of ``brokers`` and the replica lists of ``topics`` have been taken back."""
        gone_brokers, gone_topics = set(brokers), set(topics)
        return ThrottleJournal(
            rate=self.rate, brokers=self.brokers - gone_brokers,
            leader_replicas={t: v for t, v in self.leader_replicas.items() if t not in gone_topics},
            follower_replicas={t: v for t, v in self.follower_replicas.items() if t not in gone_topics},
            log_dir_rate=self.log_dir_rate, log_dir_brokers=self.log_dir_brokers - gone_brokers)

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(t for side in (self.leader_replicas, self.follower_replicas) for t, v in side.items() if v)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ThrottleJournal:
        if not data:
            return cls()
        topics = data.get("topics") or []
        return cls(rate=int(data.get("rate") or 0), brokers=frozenset(int(b) for b in data.get("brokers") or []),
                   leader_replicas={t["topic"]: frozenset(t["leader"]) for t in topics if t.get("leader")},
                   follower_replicas={t["topic"]: frozenset(t["follower"]) for t in topics if t.get("follower")},
                   log_dir_rate=int(data.get("logDirRate") or 0),
                   log_dir_brokers=frozenset(int(b) for b in data.get("logDirBrokers") or []))


def still_set(changes: Iterable[ConfigChange], configs: Mapping[str, str]) -> list[str]:
    """The keys whose removal by ``changes`` (one entity's DELETEs and SUBTRACTs) ``configs``, that entity's configs
    read back from Kafka, do not show: a key deleted that still has a value, a list that still holds an entry
    subtracted from it. Kafka acknowledging a removal is not enough: a Kafka 3.2 broker was seen to acknowledge the
    DELETE of its rates and keep them."""
    left = []
    for change in changes:
        now = configs.get(change.key)
        deleted_yet_set = change.op == "DELETE" and bool(now)
        if deleted_yet_set or (change.op == "SUBTRACT" and _entries(now) & _entries(change.value)):
            left.append(change.key)
    return left


def _entries(value: str | None) -> set[str]:
    return {e.strip() for e in (value or "").split(",") if e.strip()}


def journal(wanted: ThrottlePlan, previous: ThrottleJournal, broker_configs: Mapping[int, Mapping[str, str]],
            topic_configs: Mapping[str, Mapping[str, str]], held_by_others: Iterable[ThrottleJournal]
            ) -> ThrottleJournal:
    """What this resource owns once ``wanted`` is applied: its previous journal plus what it adds now.

    A broker whose rate someone outside kpo set is left alone: that throttle governs it, and whoever set it removes
    it. A broker another kpo resource throttles is shared: this resource records it too (one more reference), so
    whichever of them ends last takes the rate back — recorded by one of them only, the rate was deleted under the
    other's moves, or kept for ever when the one that recorded it ended while a stale view showed the other holding
    it. Replica entries the same way: someone else's are not recorded, another resource's are shared.
    """
    others = list(held_by_others)
    others_brokers = {b for j in others for b in j.brokers}
    brokers = set(previous.brokers)
    for broker in wanted.brokers:
        configured = broker_configs.get(broker, {})
        already = any(configured.get(k) for k in BROKER_KEYS)
        if broker in brokers or broker in others_brokers or not already:
            brokers.add(broker)
    leader = {t: set(v) for t, v in previous.leader_replicas.items()}
    follower = {t: set(v) for t, v in previous.follower_replicas.items()}
    for mine, wanted_side, key, attr in ((leader, wanted.leader_replicas, LEADER_REPLICAS, "leader_replicas"),
                                         (follower, wanted.follower_replicas, FOLLOWER_REPLICAS, "follower_replicas")):
        for topic, entries in wanted_side.items():
            listed = _entries(topic_configs.get(topic, {}).get(key))
            if "*" in listed:
                continue  # every replica of the topic is throttled already, by someone else
            shared = {e for j in others for e in getattr(j, attr).get(topic, ())}
            mine.setdefault(topic, set()).update(e for e in entries if e not in listed or e in shared)
    others_dir_brokers = {b for j in others for b in j.log_dir_brokers}
    dir_brokers = set(previous.log_dir_brokers)
    for broker in wanted.log_dir_brokers:
        already = bool(broker_configs.get(broker, {}).get(LOG_DIR_RATE))
        if broker in dir_brokers or broker in others_dir_brokers or not already:
            dir_brokers.add(broker)
    return ThrottleJournal(rate=wanted.rate or previous.rate, brokers=frozenset(brokers),
                           leader_replicas={t: frozenset(v) for t, v in leader.items() if v},
                           follower_replicas={t: frozenset(v) for t, v in follower.items() if v},
                           log_dir_rate=wanted.log_dir_rate or previous.log_dir_rate,
                           log_dir_brokers=frozenset(dir_brokers))


def reachable(changes: Iterable[ConfigChange], live_brokers: Iterable[int]) -> list[ConfigChange]:
    """The changes that can be made now: topic changes go through any broker, a broker's rates only to that broker
    while it is live. The rest wait in the journal for the tick that finds the broker back."""
    live = {str(b) for b in live_brokers}
    return [c for c in changes if c.resource != "broker" or c.name in live]


def apply_changes(mine: ThrottleJournal, broker_configs: Mapping[int, Mapping[str, str]],
                  topic_configs: Mapping[str, Mapping[str, str]],
                  held_by_others: Iterable[ThrottleJournal] = ()) -> list[ConfigChange]:
    """The operations that make the cluster carry every throttle in ``mine`` (none when it already does).

    A broker several resources throttle runs at the lowest of their rates: a throttle is a promise not to exceed,
    and one rate per broker must not flip between two resources' values on every tick.
    """
    changes: list[ConfigChange] = []
    others = list(held_by_others)
    shared = _lowest(others, "rate", "brokers")
    dir_shared = _lowest(others, "log_dir_rate", "log_dir_brokers")
    for broker in sorted(mine.all_brokers):
        configured = broker_configs.get(broker, {})
        wanted: list[tuple[str, int]] = []
        if broker in mine.brokers and mine.rate > 0:
            wanted += [(key, min(mine.rate, shared.get(broker, mine.rate))) for key in BROKER_KEYS]
        if broker in mine.log_dir_brokers and mine.log_dir_rate > 0:
            wanted.append((LOG_DIR_RATE, min(mine.log_dir_rate, dir_shared.get(broker, mine.log_dir_rate))))
        changes.extend(ConfigChange("broker", str(broker), key, "SET", str(rate))
                       for key, rate in wanted if configured.get(key) != str(rate))
    for side, key in ((mine.leader_replicas, LEADER_REPLICAS), (mine.follower_replicas, FOLLOWER_REPLICAS)):
        for topic, entries in sorted(side.items()):
            missing = sorted(entries - _entries(topic_configs.get(topic, {}).get(key)))
            if missing:
                changes.append(ConfigChange("topic", topic, key, "APPEND", ",".join(missing)))
    return changes


def _lowest(journals: Iterable[ThrottleJournal], rate: str, brokers: str) -> dict[int, int]:
    """Per broker, the lowest ``rate`` the ``journals`` holding it there ask for."""
    lowest: dict[int, int] = {}
    for journal in journals:
        value = getattr(journal, rate)
        for broker in getattr(journal, brokers) if value > 0 else ():
            lowest[broker] = min(lowest.get(broker, value), value)
    return lowest


def entity(change: ConfigChange) -> tuple[str, str]:
    """The config resource a change goes to: one IncrementalAlterConfigs resource, accepted or refused as a whole."""
    return change.resource, change.name


def applied_only(mine: ThrottleJournal, previous: ThrottleJournal, refused: Iterable[tuple[str, str]]
                 ) -> ThrottleJournal:
    """The journal once Kafka refused the changes of the ``refused`` entities (``("broker", "1")``,
    ``("topic", "t")``): for those, only what ``previous`` recorded; the journal must never name a throttle that was
    not applied — it would be "taken back" later, hold the resource's partitions, and keep its finalizer waiting."""
    gone = set(refused)
    brokers = {b for b in mine.brokers if ("broker", str(b)) not in gone or b in previous.brokers}
    dir_brokers = {b for b in mine.log_dir_brokers if ("broker", str(b)) not in gone or b in previous.log_dir_brokers}
    topics = {name for kind, name in gone if kind == "topic"}
    leader = {t: v for t, v in mine.leader_replicas.items() if t not in topics}
    follower = {t: v for t, v in mine.follower_replicas.items() if t not in topics}
    leader.update({t: v for t, v in previous.leader_replicas.items() if t in topics})
    follower.update({t: v for t, v in previous.follower_replicas.items() if t in topics})
    return ThrottleJournal(rate=mine.rate, brokers=frozenset(brokers), leader_replicas=leader,
                           follower_replicas=follower, log_dir_rate=mine.log_dir_rate,
                           log_dir_brokers=frozenset(dir_brokers))


def removal_changes(mine: ThrottleJournal, held_by_others: Iterable[ThrottleJournal],
                    topic_configs: Mapping[str, Mapping[str, str]] | None = None) -> list[ConfigChange]:
    """The operations that take back exactly what ``mine`` added and no other live resource still needs.

    With the topics' current lists (``topic_configs``), a list that would be left empty is deleted instead of
    subtracted from: kafka-reassign-partitions deletes the key, and an empty value left behind is residue.
    """
    others = list(held_by_others)
    others_brokers = {b for j in others for b in j.brokers}
    changes: list[ConfigChange] = []
    for broker in sorted(mine.brokers - others_brokers):
        changes.extend(ConfigChange("broker", str(broker), key, "DELETE") for key in BROKER_KEYS)
    for broker in sorted(mine.log_dir_brokers - {b for j in others for b in j.log_dir_brokers}):
        changes.append(ConfigChange("broker", str(broker), LOG_DIR_RATE, "DELETE"))
    for side, key, attr in ((mine.leader_replicas, LEADER_REPLICAS, "leader_replicas"),
                            (mine.follower_replicas, FOLLOWER_REPLICAS, "follower_replicas")):
        for topic, entries in sorted(side.items()):
            shared = {e for j in others for e in getattr(j, attr).get(topic, ())}
            own = sorted(entries - shared)
            if not own:
                continue
            current = _entries(topic_configs[topic].get(key)) if topic_configs and topic in topic_configs else None
            if current is not None and not (current - set(own)):
                changes.append(ConfigChange("topic", topic, key, "DELETE"))
            else:
                changes.append(ConfigChange("topic", topic, key, "SUBTRACT", ",".join(own)))
    return changes


def describe_pending(left: ThrottleJournal, unreachable: Iterable[int] = ()) -> str:
    """What is still throttled, for a condition: which brokers (saying which are down) and which topics."""
    down = set(unreachable)
    parts = []
    if left.topics:
        parts.append(f"replica lists of topic(s) {', '.join(sorted(left.topics))}")
    if left.brokers:
        parts.append(f"rates of broker(s) {sorted(left.brokers)}")
    if left.log_dir_brokers:
        parts.append(f"log dir rates of broker(s) {sorted(left.log_dir_brokers)}")
    waiting = sorted(down & left.all_brokers)
    because = f" (broker(s) {waiting} not available: retried until they return)" if waiting else ""
    return f"{CLEANUP_PENDING_PREFIX}: {' and '.join(parts)}{because}"
