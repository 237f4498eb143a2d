"""Leader election: of the operator's replicas, only the one holding the Lease acts.

``python -m kpo`` with ``leaderElection.enabled`` (on in the Helm chart) calls :func:`lead` before it starts Kopf and
its background threads. :func:`lead` blocks until this process holds the Lease (the standby waits there, answering
the kubelet's probes on the liveness address meanwhile), then keeps renewing it in a daemon thread:

- **Renewal fails past its deadline** (or the Lease turns out to be someone else's): one log line, and the process
  ends at once with ``os._exit(1)``, as controller-runtime's managers do. Nothing of the old leader keeps acting:
  no Kopf handler, no executor, no thread finishes its request. The kubelet restarts the container, which comes
  back as the standby.
- **Shutdown** (SIGTERM: Kopf stops its handlers and ``main`` returns): the Lease is released at exit, after
  everything that acted has stopped, so the standby takes over at once instead of waiting for it to expire.

Code that is about to write to Kafka asks :func:`holding` (cheap: a clock read) and does not write when it is False:
that closes the window between a missed deadline and the renewal thread noticing it. Without leader election
:func:`holding` is always True. The timing rules are :mod:`kpo.domain.lease`'s; the Lease I/O is
:class:`kpo.k8s.lease.LeaseStore`'s, handed in.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol
from urllib.parse import urlsplit

from kpo.domain import lease
from kpo.domain.lease import LeaseRecord, LeaseTiming, Step

log = logging.getLogger(__name__)


class LeaseStore(Protocol):
    """One Lease: read it, create it, or replace it as last read (a conditional write: False when it changed)."""

    def read(self, timeout: float) -> LeaseRecord | None: ...

    def create(self, holder: str, duration_seconds: int, timeout: float) -> bool: ...

    def write(self, holder: str, duration_seconds: int, timeout: float) -> bool: ...


def lost_lease(identity: str) -> None:
    """What a leader does when its Lease is gone: stop everything at once. The pod restarts as the standby."""
    log.critical("leader election: %s lost the Lease (renewal failed past its deadline, or another holder): "
                 "exiting at once so that no two replicas act", identity)
    os._exit(1)  # no clean-up: a handler or executor must not get to send one more request


class Leadership:
    def __init__(self, store: LeaseStore, identity: str, timing: LeaseTiming, *,
                 clock: Callable[[], float] = time.monotonic,
                 on_lost: Callable[[str], None] = lost_lease) -> None:
        self.store = store
        self.identity = identity
        self.timing = timing
        self._clock = clock
        self._on_lost = on_lost
        self._renewed_at: float | None = None
        self._seen: LeaseRecord | None = None
        self._seen_at = 0.0
        self._io = threading.Lock()  # one Lease request at a time: renewal and release
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._waiting_for = ""

    def holding(self) -> bool:
        """Whether this process may act: its last successful write began less than the renew deadline ago."""
        return lease.holding(self._renewed_at, self._clock(), self.timing)

    def attempt(self) -> bool:
        """One round: read the Lease and create, take or renew it as the rules say. True when it is ours now; False
        when someone else holds it, or when it was lost (then ``on_lost`` has been called)."""
        leading = self._renewed_at is not None
        with self._io:
            now = self._clock()
            timeout = lease.request_timeout(self._renewed_at, now, self.timing)
            record = self.store.read(timeout)
            self._seen_at = lease.observed_at(self._seen, self._seen_at, record, now)
            self._seen = record
            action = lease.step(record, self.identity, self._seen_at, now, leading=leading)
            duration = round(self.timing.lease_duration)
            if action is Step.LOST:
                self._lose()
                return False
            if action is Step.WAIT:
                holder = record.holder if record else ""
                if holder != self._waiting_for:
                    log.info("leader election: the Lease is held by %s; %s waits", holder, self.identity)
                    self._waiting_for = holder
                return False
            timeout = lease.request_timeout(self._renewed_at, self._clock(), self.timing)
            if action is Step.CREATE:
                won = self.store.create(self.identity, duration, timeout)
            else:
                won = self.store.write(self.identity, duration, timeout)
            if won:
                # The write began at `now`: a standby counts the Lease's duration from when it saw it, later still.
                self._renewed_at = now
                if action is not Step.RENEW:
                    log.info("leader election: %s holds the Lease (%s)", self.identity, action.value.lower())
            return won

    def acquire(self) -> None:
        """Block until this process holds the Lease."""
        log.info("leader election: %s is a candidate for the Lease", self.identity)
        while True:
            try:
                if self.attempt():
                    return
            except Exception as exc:
                log.warning("leader election: reading the Lease failed (%s); retrying", exc)
            time.sleep(self.timing.retry_period)

    def start_renewing(self) -> None:
        self._thread = threading.Thread(target=self._renew_loop, name="kpo-lease", daemon=True)
        self._thread.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(lease.next_wait(self._renewed_at, self._clock(), self.timing)):
            self.renew_once()

    def renew_once(self) -> None:
        """One renewal, and the deadline checked after it, whatever it did."""
        try:
            self.attempt()
        except Exception as exc:
            log.warning("leader election: renewing the Lease failed (%s)", exc)
        if not self._stop.is_set() and not self.holding():
            self._lose()

    def _lose(self) -> None:
        self._renewed_at = None
        if not self._stop.is_set():
            self._stop.set()
            self._on_lost(self.identity)

    def release(self) -> None:
        """Stop renewing and hand the Lease back (an empty holder), so the standby takes over at once."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.timing.retry_period + 1)
        if not self.holding():
            return
        # From here this process acts no more: nothing may write to Kafka once the standby can take the Lease.
        self._renewed_at = None
        try:
            with self._io:
                timeout = self.timing.retry_period
                record = self.store.read(timeout)
                if record is not None and record.holder == self.identity:
                    released = self.store.write("", 1, timeout)
                    log.info("leader election: %s %s the Lease", self.identity,
                             "released" if released else "could not release")
        except Exception as exc:
            log.warning("leader election: releasing the Lease failed (%s)", exc)


_current: Leadership | None = None


def holding() -> bool:
    """Whether this process may act on Kafka now: True without leader election, else whether it holds the Lease."""
    return _current is None or _current.holding()


def lead(leadership: Leadership, liveness: str = "") -> Leadership:
    """Block until ``leadership`` holds the Lease (answering ``liveness`` meanwhile), keep renewing it, release it at
    exit, and make it the one :func:`holding` asks."""
    global _current  # noqa: PLW0603 - the process's one leadership, as the process is the unit that leads
    with _answering(liveness):
        leadership.acquire()
    leadership.start_renewing()
    _current = leadership
    atexit.register(leadership.release)
    return leadership


@contextmanager
def _answering(liveness: str) -> Iterator[None]:
    """While waiting, answer the kubelet's liveness, readiness and startup probes on Kopf's endpoint (which only
    starts with Kopf): a standby is healthy. The port is free again before Kopf binds it."""
    if not liveness:
        yield
        return
    url = urlsplit(liveness)
    path = url.path or "/"

    class Probe(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path.split("?", 1)[0] == path
            self.send_response(200 if ok else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"standby": true}' if ok else b"{}")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((url.hostname or "0.0.0.0", url.port or 80), Probe)
    thread = threading.Thread(target=server.serve_forever, name="kpo-standby-probe", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
