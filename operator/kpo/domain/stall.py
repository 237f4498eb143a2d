"""Stall detection: which moves in flight have copied no byte for too long.

A move in flight copies its partition onto its new replicas (KIP-455's *adding* replicas). kpo cannot ask Kafka how
far a follower has fetched, but it reads every replica's size on every tick (DescribeLogDirs), so a move whose new
replicas grow is progressing, and one whose new replicas have not grown for ``stall_after`` seconds is stalled: its
destination broker is down (a down broker answers no DescribeLogDirs, so its replica's size never grows), its log
dir is offline, or its leader cannot serve the copy. A move that completes leaves the list of moves in flight and is
not watched any more.

The clock restarts when the new replicas grow, and when a destination broker that was down at the last look answers
again: a returning broker first recovers its log and catches up with the leader before its replica grows (under a
throttle, in bursts), and that catch-up is progress resumed, not a stall. So a move whose broker came back is stalled
only if it then copies nothing for ``stall_after`` seconds more.

The clock of each move (:class:`Watch`) lives in the resource's status beside the move itself (``status.inFlight``),
so an operator restart neither forgets a stall nor flags a move it has not seen for long enough: a move with no
recorded clock starts one at the first look.

Pure: sizes and the time come in, the watches and the stalled moves go out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from kpo.domain.model import ClusterView, TopicPartition

#: The code of a move cancelled because it stalled (execution.onStall Cancel), as it appears in status.failures.
STALLED_CODE = "MoveStalled"


@dataclass(frozen=True)
class Watch:
    """What kpo last saw of one move: the bytes its new replicas held, since when they have not grown, and which of
    its destination brokers were down (not live, or not answering DescribeLogDirs) at that look."""

    copied: int
    since: dt.datetime
    down: tuple[int, ...] = ()


@dataclass(frozen=True)
class Stall:
    """A stalled move: its destination brokers, those of them that are down, what they hold, since when; and whether
    it was cancelled for it (execution.onStall Cancel, accepted by Kafka): then it is reported until a new run."""

    brokers: tuple[int, ...]
    down: tuple[int, ...]
    copied: int
    since: dt.datetime
    cancelled: bool = False

    def describe(self, tp: TopicPartition, now: dt.datetime) -> str:
        down = f", broker(s) {list(self.down)} down" if self.down else ""
        if self.cancelled:
            return f"{tp} to broker(s) {list(self.brokers)} ({self.copied} bytes copied, cancelled{down})"
        idle = int((now - self.since).total_seconds())
        return f"{tp} to broker(s) {list(self.brokers)} ({self.copied} bytes copied, none for {idle}s{down})"


def copied_bytes(view: ClusterView, tp: TopicPartition) -> int:
    """Bytes the new replicas of ``tp``'s move hold now; a broker that does not answer counts nothing."""
    ongoing = view.ongoing.get(tp)
    if ongoing is None:
        return 0
    return sum(view.replica_sizes.get((tp, b), 0) for b in ongoing.adding)


def down_destinations(view: ClusterView, tp: TopicPartition) -> tuple[int, ...]:
    """The brokers ``tp``'s move copies to that are down now (not listed, or not answering)."""
    ongoing = view.ongoing.get(tp)
    return tuple(b for b in ongoing.adding if not view.available(b)) if ongoing is not None else ()


def follow(previous: Mapping[TopicPartition, Watch], copied: Mapping[TopicPartition, int], now: dt.datetime,
           down: Mapping[TopicPartition, tuple[int, ...]] | None = None) -> dict[TopicPartition, Watch]:
    """The watches of the moves in ``copied`` (those in flight now), with the destination brokers ``down`` now: a
    move whose new replicas grew since the last look, one a destination broker of which came back, or one not
    watched before, restarts its clock; the others keep theirs."""
    down = down or {}
    watches = {}
    for tp, size in copied.items():
        before, gone = previous.get(tp), down.get(tp, ())
        restart = before is None or size > before.copied or bool(set(before.down) - set(gone))
        watches[tp] = Watch(copied=size, since=now if restart or before is None else before.since, down=gone)
    return watches


def stalled(watches: Mapping[TopicPartition, Watch], view: ClusterView, now: dt.datetime, after_seconds: float
            ) -> dict[TopicPartition, Stall]:
    """The moves whose new replicas have not grown for ``after_seconds`` or more."""
    found = {}
    for tp, watch in sorted(watches.items()):
        if (now - watch.since).total_seconds() < after_seconds:
            continue
        ongoing = view.ongoing.get(tp)
        brokers = ongoing.adding if ongoing is not None else ()
        found[tp] = Stall(brokers=tuple(brokers), down=tuple(b for b in brokers if not view.available(b)),
                          copied=watch.copied, since=watch.since)
    return found
