"""Execution time with the pauses taken out: what ``status.progress`` counts as elapsed, paused and left.

A PartitionReassignment may be paused (``spec.execution.paused``) for minutes or days; the time it sits in phase
Paused is not execution time. Its clock is three values kept in the status — when the first move started, the paused
seconds of the pauses that ended, and when the current pause began (if paused) — so an operator restart neither
forgets a pause nor counts one twice. Elapsed time is the time since the start less every pause: it stands still
while paused, and once finished it is how long the moves took, to set against the estimate.

The ETA is the bytes left at the copy rate over that elapsed time; while paused it is never raised (moves in flight
finish meanwhile, so it may fall; the bytes to move may grow with writes, which would raise it): it tells how long
the rest should take once resumed.

Pure: times in, times out.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class ExecutionClock:
    """When execution started, the seconds of the pauses that ended, and when the current pause (if any) began."""

    started: dt.datetime | None = None
    paused_seconds: float = 0.0
    paused_since: dt.datetime | None = None

    @classmethod
    def read(cls, started: dt.datetime | None, elapsed: float, paused: float, paused_since: dt.datetime | None
             ) -> ExecutionClock:
        """The clock as the status shows it: ``paused`` (pausedSeconds) counts the current pause too; the pauses
        that ended are the time from the start to the current pause less the execution time (which stood still
        since)."""
        if started is None or paused_since is None:
            return cls(started, paused)
        return cls(started, max(0.0, (paused_since - started).total_seconds() - elapsed), paused_since)

    def advance(self, *, running: bool, paused: bool, now: dt.datetime, start: dt.datetime | None = None
                ) -> ExecutionClock:
        """The clock after a tick at ``now``: started by the first move (``running``; at ``start``, when the tick
        sent it, if given), pausing while ``paused``."""
        started = self.started or ((start or now) if running else None)
        if started is None:
            return self  # nothing started yet: a pause before the first move costs no execution time
        if paused:
            return ExecutionClock(started, self.paused_seconds, self.paused_since or now)
        return ExecutionClock(started, self.paused_total(now), None)

    def paused_total(self, now: dt.datetime) -> float:
        """Seconds paused since the start, the current pause included."""
        current = (now - self.paused_since).total_seconds() if self.paused_since is not None else 0.0
        return self.paused_seconds + max(0.0, current)

    def elapsed(self, now: dt.datetime) -> float:
        """Seconds of execution since the start: paused time excluded."""
        if self.started is None:
            return 0.0
        return max(0.0, (now - self.started).total_seconds() - self.paused_total(now))


def eta_while_paused(computed: int | None, previous: int | None) -> int | None:
    """A paused resource's ETA: never above the one it had (a pause adds no execution time)."""
    if previous is None:
        return computed
    return previous if computed is None else min(computed, previous)
