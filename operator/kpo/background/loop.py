"""A background thread that does one piece of work per configured Kafka cluster every interval: the balance sampler
(:mod:`kpo.background.balance_sampler`) and the broker-change watcher (:mod:`kpo.background.broker_changes`) are
two such loops.

What they share is how they fail. An attempt that fails (Kafka unreachable, a refused login, a missing ACL, the API
server down) is said once, with the reason, when the outage begins; the next attempts back off (the interval,
doubled per failure, up to :data:`MAX_BACKOFF_SECONDS` or the interval if longer), and the first attempt that works
again says how long the outage lasted. A connection that could not reach Kafka is dropped so the next attempt makes a
new one; a refused login stays under the operator's own login backoff (:class:`kpo.runtime.OperatorContext`), as the
loops use the same adapters as the ticks. An unexpected error is logged with its traceback, once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from kpo.kafka.admin import KafkaRequestRefused, KafkaUnavailable

MAX_BACKOFF_SECONDS = 600.0


@dataclass(frozen=True)
class Wording:
    """How a loop's outage reads in the log: ``cluster 'x': <failed> (<error>)<kept>; next attempt in ...; said once
    until <succeeds>`` and ``cluster 'x': <recovered> after N s``."""

    failed: str
    succeeds: str
    recovered: str
    kept: str = ""


@dataclass
class _Attempts:
    due: float = 0.0
    failures: int = 0
    outage_since: float | None = None


class ClusterLoop:
    """Subclasses say what one attempt does (:meth:`attempt`) and, if anything, what a failed one changes
    (:meth:`on_failure`)."""

    def __init__(self, clusters: Collection[str], interval: float, *, forget: Callable[[str], None],
                 wording: Wording, thread_name: str, clock: Callable[[], float] = time.monotonic,
                 logger: logging.Logger) -> None:
        if interval <= 0:
            raise ValueError("the interval must be positive (0 means: do not start the loop)")
        self.interval = interval
        self._forget, self._wording, self._thread_name = forget, wording, thread_name
        self._clock, self._log = clock, logger
        self._attempts = {name: _Attempts() for name in sorted(clusters)}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def attempt(self, name: str) -> None:
        raise NotImplementedError

    def on_failure(self, name: str) -> None:
        """Called after each failed attempt."""

    def wake_at(self, name: str) -> float | None:
        """A moment (on the loop's clock) before the next interval when cluster ``name`` is due anyway, or None:
        a deadline an attempt set (a settle time running out) is met when it falls, not up to an interval late."""
        return None

    def backoff(self, failures: int) -> float:
        """The wait after the ``failures``-th failed attempt in a row."""
        return float(min(max(self.interval, MAX_BACKOFF_SECONDS), self.interval * 2 ** min(failures, 32)))

    def run_due(self) -> float:
        """Attempt every cluster that is due; the seconds until the next one is."""
        for name, state in self._attempts.items():
            if self._stop.is_set():
                break
            if self._clock() >= state.due:
                self._attempt_one(name, state)
        now = self._clock()
        return max(0.0, min((s.due for s in self._attempts.values()), default=now + self.interval) - now)

    def _attempt_one(self, name: str, state: _Attempts) -> None:
        began = self._clock()
        try:
            self.attempt(name)
        except Exception as exc:  # one failed attempt must not end the thread: said once per outage, then backoff
            state.failures += 1
            wait = self.backoff(state.failures)
            state.due = self._clock() + wait
            self.on_failure(name)
            if isinstance(exc, KafkaUnavailable):
                self._forget(name)  # reconnect next time (a refused login stays until its own backoff step)
            if state.outage_since is None:
                state.outage_since = began
                # Kafka's refusals and the API server's (an ApiException has a status) need no traceback.
                known = isinstance(exc, (KafkaUnavailable, KafkaRequestRefused)) or hasattr(exc, "status")
                self._log.warning(
                    "cluster %r: %s (%s: %s)%s, next attempt in %.0f s, backing off up to %.0f s; said once until %s",
                    name, self._wording.failed, type(exc).__name__, str(exc)[:300], self._wording.kept, wait,
                    self.backoff(64), self._wording.succeeds, exc_info=None if known else exc)
            return
        wake = self.wake_at(name)
        state.due = began + self.interval if wake is None else min(began + self.interval, wake)
        if state.outage_since is not None:
            self._log.warning("cluster %r: %s after %.0f s (%d failed attempt(s))", name, self._wording.recovered,
                              self._clock() - state.outage_since, state.failures)
        state.failures, state.outage_since = 0, None

    def _run(self) -> None:
        while not self._stop.is_set():
            wait = self.run_due()
            self._stop.wait(max(wait, 0.05))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
