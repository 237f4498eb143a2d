"""KIP-1066 cordons for a RemoveBrokers drain: set, kept and taken back without disturbing anyone else's.

From metadata.version 4.3-IV0 (feature level 30) a broker's log directories can be cordoned: the dynamic broker config
``cordoned.log.dirs`` lists them, ``*`` meaning every one. The controller then places no new partition on a broker
whose directories are all cordoned, while the replicas it has keep serving. A drain without it races topic creation:
a RemoveBrokers plan empties a broker while CreateTopics and CreatePartitions put new replicas back on it.

So kpo cordons the brokers of a RemoveBrokers plan while it carries the plan out, and keeps them cordoned once the
drain has succeeded (they are about to be shut down; a partition placed on them meanwhile would go with them) until
the resource is deleted. A stop, a revert, a failure or a new spec takes the cordons back at once.

As with throttles (:mod:`kpo.domain.throttle`), a :class:`CordonJournal` is written to the resource's ConfigMap
*before* a broker is cordoned: the value ``cordoned.log.dirs`` had, so that taking the cordon back restores exactly
that (deletes the config when there was none) and a restart in between leaks nothing. A broker someone outside kpo
cordoned entirely is left alone and not journaled; one another live resource holds is journaled with that
resource's recorded value and left cordoned until the last holder lets go.

Kafka 4.1 and 4.2 know the config but ignore it, and 4.3 below its metadata version refuses it: kpo reads the
finalized metadata.version first and, below 4.3-IV0, drains without cordons and says so once.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kpo.domain.throttle import ConfigChange

CORDONED_LOG_DIRS = "cordoned.log.dirs"
EVERY_DIR = "*"
#: The feature level of metadata.version 4.3-IV0, the first whose controller honours cordoned log directories.
FIRST_METADATA_LEVEL = 30


@dataclass(frozen=True)
class CordonJournal:
    """The brokers this resource cordoned, each with the ``cordoned.log.dirs`` it had before ("" = not set)."""

    previous: Mapping[int, str] = field(default_factory=dict)

    @property
    def brokers(self) -> frozenset[int]:
        return frozenset(self.previous)

    @property
    def empty(self) -> bool:
        return not self.previous

    def without(self, brokers: Iterable[int]) -> CordonJournal:
        gone = set(brokers)
        return CordonJournal({b: v for b, v in self.previous.items() if b not in gone})

    def to_json(self) -> list[dict[str, Any]]:
        return [{"broker": b, "previous": v} for b, v in sorted(self.previous.items())]

    @classmethod
    def from_json(cls, data: Iterable[Mapping[str, Any]] | None) -> CordonJournal:
        return cls({int(e["broker"]): str(e.get("previous") or "") for e in data or []})


@dataclass(frozen=True)
class CordonState:
    """What a resource holds of cordons: the journal, and why the cordons could not be set (said once, until the
    spec changes). ``status.cordon`` reports it (read and written in the resource's status module)."""

    journal: CordonJournal = field(default_factory=CordonJournal)
    unavailable: str | None = None

    @property
    def empty(self) -> bool:
        return self.journal.empty and not self.unavailable


def unavailable(metadata_level: int | None) -> str | None:
    """Why the cluster cannot cordon (``None``: it can), from its finalized metadata.version feature level."""
    if metadata_level is None:
        return "the cluster reports no finalized metadata.version: brokers are drained without cordons (KIP-1066)"
    if metadata_level < FIRST_METADATA_LEVEL:
        return (f"metadata.version feature level {metadata_level} is below {FIRST_METADATA_LEVEL} (4.3-IV0): Kafka "
                f"ignores or refuses cordoned.log.dirs, so brokers are drained without cordons (KIP-1066)")
    return None


def journal(wanted: Collection[int], previous: CordonJournal, configs: Mapping[int, Mapping[str, str]],
            held_by_others: Iterable[CordonJournal]) -> CordonJournal:
    """What this resource holds once ``wanted`` are cordoned: ``previous`` plus each wanted broker not in it yet.

    ``configs`` are the brokers' current ``cordoned.log.dirs``. A broker another resource holds is recorded with that
    resource's value (whoever lets go last restores it); one already cordoned entirely by someone else is skipped.
    """
    others = list(held_by_others)
    recorded = dict(previous.previous)
    for broker in sorted(set(wanted) - set(recorded)):
        held = next((o.previous[broker] for o in others if broker in o.previous), None)
        current = (configs.get(broker) or {}).get(CORDONED_LOG_DIRS, "").strip()
        if held is not None:
            recorded[broker] = held
        elif current != EVERY_DIR:
            recorded[broker] = current
    return CordonJournal(recorded)


def cordon_changes(mine: CordonJournal, configs: Mapping[int, Mapping[str, str]]) -> list[ConfigChange]:
    """The operations that cordon every broker of ``mine`` entirely (none for one that already is)."""
    return [ConfigChange("broker", str(b), CORDONED_LOG_DIRS, "SET", EVERY_DIR) for b in sorted(mine.brokers)
            if (configs.get(b) or {}).get(CORDONED_LOG_DIRS, "").strip() != EVERY_DIR]


def release_changes(mine: CordonJournal, broker: int, held_by_others: Iterable[CordonJournal]) -> list[ConfigChange]:
    """The operations that take ``broker``'s cordon back: its recorded value again (deleted when it had none); none
    while another resource still holds it."""
    if any(broker in o.previous for o in held_by_others):
        return []
    before = mine.previous.get(broker, "")
    if before:
        return [ConfigChange("broker", str(broker), CORDONED_LOG_DIRS, "SET", before)]
    return [ConfigChange("broker", str(broker), CORDONED_LOG_DIRS, "DELETE")]


def left_behind(brokers: Collection[int]) -> str:
    """The Event message for cordons a deleted resource cannot take back (its brokers are gone or down)."""
    ids = ",".join(str(b) for b in sorted(brokers))
    return (f"broker(s) {sorted(brokers)} cannot be reached to take their cordon back: cordoned.log.dirs stays in the "
            f"cluster metadata, so a broker that registers again with such an id places nothing; clear it with "
            f"kafka-configs.sh --alter --delete-config cordoned.log.dirs --entity-type brokers --entity-name <id> "
            f"(ids {ids})")
