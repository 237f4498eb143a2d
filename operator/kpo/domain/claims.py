"""Who may move a partition when several PartitionReassignments want it.

A partition belongs to at most one live PartitionReassignment at a time. The one that has a move of it in flight
holds it; otherwise the older one (by creation time, then namespace/name) goes first. The other waits and says whom it
waits for — kpo never silently overrides another resource's move.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kpo.domain.cordon import CordonJournal
from kpo.domain.model import TopicPartition
from kpo.domain.throttle import ThrottleJournal


@dataclass(frozen=True)
class Claim:
    """What one live PartitionReassignment wants and holds, as the operator's index sees it."""

    key: str  # "namespace/name"
    created: str  # metadata.creationTimestamp (RFC 3339, so it sorts)
    partitions: frozenset[TopicPartition]
    in_flight: frozenset[TopicPartition]
    live: bool  # in a phase that claims its partitions (not terminal)
    throttle: ThrottleJournal = field(default_factory=ThrottleJournal)
    cordons: CordonJournal = field(default_factory=CordonJournal)

    def precedes(self, other: Claim) -> bool:
        return (self.created, self.key) < (other.created, other.key)


def claimed_by_others(me: Claim, others: Iterable[Claim]) -> dict[TopicPartition, str]:
    """Partitions of ``me`` that another live claim holds: partition -> the holder's "namespace/name"."""
    held: dict[TopicPartition, str] = {}
    for other in sorted(others, key=lambda c: (c.created, c.key)):
        if other.key == me.key or not other.live:
            continue
        for tp in me.partitions & (other.partitions | other.in_flight):
            if tp in held or tp in me.in_flight:
                continue
            if tp in other.in_flight or other.precedes(me):
                held[tp] = other.key
    return held
