"""Kubernetes API outages: said once, probed with backoff, never a traceback per resource per tick.

While the kube-apiserver is unreachable, every tick of every resource fails the same way on its first read (a
rollback ConfigMap, a Secret, another resource). Left to Kopf, each failure is a traceback and a retry, per resource,
per tick: an outage of 150 s once made 25,861 log lines. One :class:`ApiOutage` per operator turns that into two
lines: the first failure opens the outage (a warning naming the error), ticks inside the backoff window skip their
reads altogether, one tick per backoff step probes the API, and the first tick that gets through closes the outage
(how long it lasted, how many ticks were skipped). Errors that are not an outage (a 404, a 403, a 422) pass through
unchanged: they say something about one resource, not about the API server.

Kopf's own request retries (its watch streams, its status patches) log a line per failed attempt; the
:class:`RepeatedRequestErrors` log filter lets the first of them through and then one per doubling window.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)
T = TypeVar("T")

#: HTTP statuses that mean "the API server cannot answer now", not "this request is wrong".
_UNAVAILABLE = frozenset({0, 429, 500, 502, 503, 504})


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the Kubernetes API cannot be reached or cannot answer now."""
    seen: BaseException | None = exc
    for _ in range(5):  # a short cause chain: a handler may have wrapped the client's error once or twice
        if seen is None:
            return False
        if isinstance(seen, ApiException):
            return (seen.status or 0) in _UNAVAILABLE
        if isinstance(seen, (urllib3.exceptions.HTTPError, ConnectionError)):
            return True
        seen = seen.__cause__
    return False


class ApiUnavailableError(Exception):
    """Work that must be retried could not reach the Kubernetes API; try again in ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        super().__init__(f"Kubernetes API unavailable; trying again in {delay:.0f} s")
        self.delay = delay


class ApiOutage:
    """One operator's view of whether the Kubernetes API is reachable, shared by every resource's tick."""

    def __init__(self, first_backoff: float = 2.0, max_backoff: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, logger: logging.Logger = log) -> None:
        self._first_backoff = first_backoff
        self._max_backoff = max_backoff
        self._clock = clock
        self._log = logger
        self._lock = threading.Lock()
        self._since: float | None = None
        self._backoff = first_backoff
        self._next_probe = 0.0
        self._failures = 0
        self._skipped = 0

    @property
    def ongoing(self) -> bool:
        with self._lock:
            return self._since is not None

    def run(self, tick: Callable[[], None]) -> None:
        """Run one tick unless the API is down and the next probe is not due; an outage error ends it quietly."""
        if self._skip():
            return
        try:
            tick()
        except Exception as exc:
            if not is_outage(exc):
                raise
            self.failed(exc)
        else:
            self.succeeded()

    def call(self, action: Callable[[], T]) -> T:
        """Run work that must not be skipped (letting go of a deleted resource's throttles): while the API is down
        and no probe is due it does not run, and an outage error opens or extends the outage; either way
        :class:`ApiUnavailableError` says when to try again, so the caller retries it rather than drops it."""
        if self._skip():
            raise ApiUnavailableError(self._until_probe())
        try:
            result = action()
        except Exception as exc:
            if not is_outage(exc):
                raise
            self.failed(exc)
            raise ApiUnavailableError(self._until_probe()) from exc
        self.succeeded()
        return result

    def _until_probe(self) -> float:
        with self._lock:
            return max(self._first_backoff, self._next_probe - self._clock())

    def _skip(self) -> bool:
        with self._lock:
            if self._since is None:
                return False
            now = self._clock()
            if now < self._next_probe:
                self._skipped += 1
                return True
            # This tick probes; the others keep skipping until it has answered or the next step is due.
            self._next_probe = now + self._backoff
            return False

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            now = self._clock()
            self._failures += 1
            if self._since is None:
                self._since = now
                self._backoff = self._first_backoff
                self._log.warning("Kubernetes API unavailable (%s): resource ticks pause and probe it every %.0f s "
                                  "up to every %.0f s; said once until it answers again",
                                  _describe(exc), self._first_backoff, self._max_backoff)
            else:
                self._backoff = min(self._max_backoff, self._backoff * 2)
            self._next_probe = now + self._backoff

    def succeeded(self) -> None:
        with self._lock:
            if self._since is None:
                return
            self._log.warning("Kubernetes API available again after %.0f s (%d failed probe(s), %d tick(s) skipped)",
                              self._clock() - self._since, self._failures, self._skipped)
            self._since = None
            self._failures = self._skipped = 0
            self._backoff = self._first_backoff


def namespace_terminating(exc: BaseException) -> bool:
    """The API server refused a write because the resource's namespace is being deleted: not an outage, and nothing
    to retry — the resource goes with its namespace, and its delete handler does the cleanup."""
    return isinstance(exc, ApiException) and exc.status == 403 and "being terminated" in str(exc.body or "")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason}"
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        return f"{type(exc.reason).__name__}: {exc.reason}"
    text = str(exc)
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


class RepeatedRequestErrors(logging.Filter):
    """Kopf logs every failed API request attempt of its watch streams and patches: let the first through, then
    one per window (doubling up to ``max_window``), each saying how many were held back. A quiet spell of
    ``reset_after`` seconds ends the outage, so the next one starts with its first line again."""

    def __init__(self, first_window: float = 10.0, max_window: float = 300.0, reset_after: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._first_window, self._max_window, self._reset_after = first_window, max_window, reset_after
        self._clock = clock
        self._lock = threading.Lock()
        self._window = first_window
        self._last_seen = float("-inf")
        self._last_let_through = float("-inf")
        self._held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("kopf") or not str(record.msg).startswith("Request attempt"):
            return True
        if "failed" not in str(record.msg):
            return True
        with self._lock:
            now = self._clock()
            if now - self._last_seen > self._reset_after:
                self._window = self._first_window
                self._last_let_through = float("-inf")
                self._held = 0
            self._last_seen = now
            if now - self._last_let_through < self._window:
                self._held += 1
                return False
            if self._last_let_through != float("-inf"):
                self._window = min(self._max_window, self._window * 2)
            if self._held:
                record.msg = f"{record.msg} ({self._held} similar line(s) held back)"
            self._held = 0
            self._last_let_through = now
            return True
