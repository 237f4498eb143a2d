"""Stall detection: which moves in flight have copied no byte, or come no closer to their leader, for too long.

A move in flight copies its partition onto its new replicas (KIP-455's *adding* replicas). kpo cannot ask Kafka how
far a follower has fetched, but it reads every replica's size on every tick (DescribeLogDirs), so a move whose new
replicas grow is progressing, and one whose new replicas have not grown for ``stall_after`` seconds is stalled: its
destination broker is down (a down broker answers no DescribeLogDirs, so its replica's size never grows), its log
dir is offline, or its leader cannot serve the copy. A move that completes leaves the list of moves in flight and is
not watched any more.

A move can also copy for ever without ending: a new replica joins the ISR only once it has caught up with the leader,
and a partition that takes writes as fast as the copy goes (a replication throttle below its write rate, KIP-73's
caveat, the classic reassignment that "never finishes") keeps it behind. So each move also has a second clock: the
fewest bytes its slowest new replica lacked against the partition's largest replica (its *lag*), and when that low was
last beaten. A move whose lag has not reached a new low for ``stall_after`` seconds is stalled too, reported with the
lag it still has. Copies under a throttle come in bursts (up to ``replica.fetch.max.bytes`` a fetch, then the quota's
wait) and writes come in bursts too, so the lag zigzags: a copy that gains on the writes reaches new lows burst after
burst, one that does not stops reaching them. Without writes the two clocks agree (the lag falls as the copy grows).

The clocks restart when the new replicas grow (the lag's: when it reaches a new low), and when a destination broker
that was down at the last look answers again: a returning broker first recovers its log and catches up with the
leader before its replica grows (under a throttle, in bursts), and that catch-up is progress resumed, not a stall. So
a move whose broker came back is stalled only if it then copies nothing for ``stall_after`` seconds more.

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
    its destination brokers were down (not live, or not answering DescribeLogDirs) at that look; and the lowest lag
    seen (``behind``, bytes; ``None`` when not known, as in a status an older kpo wrote) and since when no look has
    found a lower one (``closing_since``)."""

    copied: int
    since: dt.datetime
    down: tuple[int, ...] = ()
    behind: int | None = None
    closing_since: dt.datetime | None = None


@dataclass(frozen=True)
class Stall:
    """A stalled move: its destination brokers, those of them that are down, what they hold, since when; and whether
    it was cancelled for it (execution.onStall Cancel, accepted by Kafka): then it is reported until a new run."""

    brokers: tuple[int, ...]
    down: tuple[int, ...]
    copied: int
    since: dt.datetime
    cancelled: bool = False
    #: Set when the move copies but does not catch up: the bytes it still lacks (``since``: when its lag was lowest).
    behind: int | None = None

    def describe(self, tp: TopicPartition, now: dt.datetime) -> str:
        down = f", broker(s) {list(self.down)} down" if self.down else ""
        behind = f", {self.behind} bytes behind" if self.behind is not None else ""
        if self.cancelled:
            return f"{tp} to broker(s) {list(self.brokers)} ({self.copied} bytes copied{behind}, cancelled{down})"
        idle = int((now - self.since).total_seconds())
        if self.behind is not None:
            return (f"{tp} to broker(s) {list(self.brokers)} ({self.copied} bytes copied, still {self.behind} bytes "
                    f"behind its largest replica and no closer for {idle}s: it takes writes as fast as it is copied)")
        return f"{tp} to broker(s) {list(self.brokers)} ({self.copied} bytes copied, none for {idle}s{down})"


def copied_bytes(view: ClusterView, tp: TopicPartition) -> int:
    """Bytes the new replicas of ``tp``'s move hold now; a broker that does not answer counts nothing."""
    ongoing = view.ongoing.get(tp)
    if ongoing is None:
        return 0
    return sum(view.replica_sizes.get((tp, b), 0) for b in ongoing.adding)


def lag_bytes(view: ClusterView, tp: TopicPartition) -> int:
    """Bytes the slowest new replica of ``tp``'s move lacks against the partition's largest replica (the leader's, when
    in sync); a broker that does not answer lacks everything."""
    ongoing = view.ongoing.get(tp)
    if ongoing is None:
        return 0
    largest = view.partition_size(tp)
    return max((largest - view.replica_sizes.get((tp, b), 0) for b in ongoing.adding), default=0)


def down_destinations(view: ClusterView, tp: TopicPartition) -> tuple[int, ...]:
    """The brokers ``tp``'s move copies to that are down now (not listed, or not answering)."""
    ongoing = view.ongoing.get(tp)
    return tuple(b for b in ongoing.adding if not view.available(b)) if ongoing is not None else ()


def follow(previous: Mapping[TopicPartition, Watch], copied: Mapping[TopicPartition, int], now: dt.datetime,
           down: Mapping[TopicPartition, tuple[int, ...]] | None = None,
           lag: Mapping[TopicPartition, int] | None = None) -> dict[TopicPartition, Watch]:
    """The watches of the moves in ``copied`` (those in flight now), with the destination brokers ``down`` now and
    each move's ``lag`` (a move without one is not judged by it): a move whose new replicas grew since the last look,
    one a destination broker of which came back, or one not watched before, restarts its clock; the others keep
    theirs. The lag's clock restarts likewise, and whenever the lag is lower than any seen since it last did."""
    down, lag = down or {}, lag or {}
    watches = {}
    for tp, size in copied.items():
        before, gone, behind = previous.get(tp), down.get(tp, ()), lag.get(tp)
        returned = before is not None and bool(set(before.down) - set(gone))
        since = now if before is None or size > before.copied or returned else before.since
        if behind is None:
            watches[tp] = Watch(copied=size, since=since, down=gone)
            continue
        if (before is None or returned or before.behind is None or before.closing_since is None
                or behind < before.behind):
            watches[tp] = Watch(copied=size, since=since, down=gone, behind=behind, closing_since=now)
        else:
            watches[tp] = Watch(copied=size, since=since, down=gone, behind=before.behind,
                                closing_since=before.closing_since)
    return watches


def stalled(watches: Mapping[TopicPartition, Watch], view: ClusterView, now: dt.datetime, after_seconds: float
            ) -> dict[TopicPartition, Stall]:
    """The moves whose new replicas have not grown for ``after_seconds`` or more, and those that grew but whose lag
    has reached no new low for as long (reported with the lag they have now)."""
    found = {}
    for tp, watch in sorted(watches.items()):
        idle = (now - watch.since).total_seconds() >= after_seconds
        behind = (not idle and watch.closing_since is not None
                  and (now - watch.closing_since).total_seconds() >= after_seconds)
        if not idle and not behind:
            continue
        ongoing = view.ongoing.get(tp)
        brokers = ongoing.adding if ongoing is not None else ()
        down = tuple(b for b in brokers if not view.available(b))
        if idle:
            found[tp] = Stall(brokers=tuple(brokers), down=down, copied=watch.copied, since=watch.since)
        else:
            assert watch.closing_since is not None
            found[tp] = Stall(brokers=tuple(brokers), down=down, copied=watch.copied, since=watch.closing_since,
                              behind=lag_bytes(view, tp))
    return found
