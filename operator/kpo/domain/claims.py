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


def move_holders(me: Claim, others: Iterable[Claim]) -> dict[TopicPartition, Claim]:
    """Whose limits each move in flight counts against, as ``me``'s tick tells the executor.

    A move a live status lists in ``inFlight`` is that resource's. A move of one of ``me``'s own partitions that no
    status lists is counted as ``me``'s too: a leader replica stopped mid-tick (SIGTERM, a deleted pod) may have sent
    moves whose status write went with it, and its successor, counting them as someone else's, started ``maxMoves``
    more of its own beside them (3 in flight under ``maxMoves: 2`` in an e2e handover). Counting a stranger's move of
    the partition against ``me`` instead can only hold one of its slots back a while.
    """
    held = dict.fromkeys(me.partitions, me)
    for claim in (me, *others):
        if claim.live:
            held.update(dict.fromkeys(claim.in_flight, claim))
    return held
