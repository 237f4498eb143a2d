"""The executor's refill loop: a slot freed by a move that ended is given to a waiting move at once.

Kafka announces nothing, and a resource's tick comes every poll interval: a slot that freed a moment after a tick
stayed empty until the next tick of a resource that had a move waiting. With hundreds of resources of one small move
each, that gap was as long as the moves themselves (200 resources took 1.9 times the schedule floor). So while some
resource has moves *armed* — waiting for a slot, their original replicas on record and their throttle in place —
this loop lists the cluster's moves (one ListPartitionReassignments) every ``interval`` seconds and lets the executor
send what now fits (:meth:`ClusterExecutor.refill`). With nothing armed it sleeps until something is.

A listing that fails is said once, and the loop backs off (up to ``max_backoff`` seconds); the resources' own ticks
meet the outage with their usual handling meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kpo.execution.executor import ClusterExecutor

log = logging.getLogger(__name__)


class RefillLoop:
    def __init__(self, executor: ClusterExecutor, *, interval: float = 0.25, idle: float = 1.0,
                 max_backoff: float = 30.0, clock: Callable[[], float] = time.monotonic,
                 on_started: Callable[[int], None] = lambda _count: None) -> None:
        self.executor = executor
        #: Told how many moves each probe started (``kpo_moves_started_between_polls_total``).
        self.on_started = on_started
        self.interval = interval
        self.idle = idle
        self.max_backoff = max_backoff
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kpo-refill-{executor.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.executor.armed_changed.set()

    def join(self, timeout: float) -> None:
        """Wait for the loop to end (a probe under way finishes its send first)."""
        if self._thread.is_alive():
            self._thread.join(timeout)

    def once(self) -> int:
        """One probe: list the cluster's moves, then send what fits; the number of moves sent."""
        at = self.clock()
        self.executor.listed(self.executor.read().list_reassignments(None), at)
        started = sum(len(sent) for sent in self.executor.refill().values())
        if started:
            self.on_started(started)
        return started

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            if not self.executor.has_armed():
                self.executor.armed_changed.wait(self.idle)
                self.executor.armed_changed.clear()
                continue
            try:
                self.once()
            except Exception as exc:  # whatever failed, the resources' ticks meet it; this loop only waits
                failures += 1
                if failures == 1:
                    log.info("%s: refill paused, listing the cluster's moves failed: %s", self.executor.name, exc)
                self._stop.wait(min(self.max_backoff, self.interval * 2 ** min(failures, 10)))
                continue
            if failures:
                log.info("%s: refill resumed", self.executor.name)
                failures = 0
            self._stop.wait(self.interval)
