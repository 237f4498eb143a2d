"""The ticks' calls to one cluster, cut short while the cluster does not answer.

A TopicPartitionCount or a PreferredLeaderElection asks Kafka from its own tick, and a request to a cluster that does
not answer (a listener that accepts and stays silent, an address that drops every packet) waits the whole request
timeout; the adapter serialises its calls, so every other tick of that cluster waited behind it. Twelve such
resources on unusable clusters held twelve of Kopf's sixteen worker threads for most of every poll: the resources of
a healthy cluster waited for a thread, and those of the unusable ones never got a phase (measured in
``e2e/test_concurrency.py``). A PartitionReassignment avoids it through the cluster's shared look
(:class:`kpo.execution.observation.SharedLooks`), which waits at most a few seconds and fails at once while the cluster
is failing; this gate gives the direct calls the same rules:

- one call at a time goes to the cluster (the adapter serialises them anyway): the others wait here, where they see
  what the call under way finds, instead of in the adapter's queue, where each would wait its own timeout;
- a call that failed with :class:`~kpo.kafka.admin.KafkaUnavailable` after at least ``slow_seconds`` marks the
  cluster as not answering (a quick failure blocks nobody, and may be a broker's retriable answer);
- while it is marked, calls fail at once with that failure until a backoff step has passed; then one call finds out
  whether it answers again, and the others fail at once meanwhile;
- a call waits for the one under way at most ``first_wait_seconds`` before the cluster has ever answered (a healthy
  cluster's first answer comes well within that), ``wait_seconds`` after, both counted from when the call under way
  began: once it is that old, the others are told at once instead of each waiting the whole time;
- a call that returns, or that Kafka refuses (an answer too), clears the mark.

Whoever is turned away is told the failure that marks the cluster, in its words, or that the cluster did not answer
within the wait: the same words tick after tick, so a resource's condition is not rewritten for the wording alone.

A tick never waits out a timeout itself: while the cluster has not answered yet, or is marked, a read runs on a
thread of its own and the tick waits for it at most ``first_wait_seconds`` (the read goes on, holds the gate, and
marks or clears it when it ends). Writes always run in the caller's thread: a write the tick gave up on could land
unseen.

A key sample (:data:`UNSERIALISED`) reads through a consumer of its own, not the adapter's clients, for up to twice
the request timeout: it only fails at once while the cluster is marked, and never holds the others up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, cast

from kpo.domain.access import Backoff
from kpo.execution.counting import REQUESTS
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable

#: Requests that do not go one at a time (see the module docstring).
UNSERIALISED = frozenset({"sample_key_partitions"})
#: Requests that only read: these may go on after the caller stopped waiting for them.
READS = frozenset({"brokers", "topic_names", "describe_topics", "list_reassignments", "log_dirs", "topic_configs",
                   "broker_configs", "metadata_level"})


class CallGate:
    """The state of one cluster's direct calls; thread-safe. ``enter`` before a call, ``leave`` after it (a thread
    already inside may call again: the adapter's methods do not, but a caller's callback might)."""

    def __init__(self, *, slow_seconds: float, wait_seconds: float, first_wait_seconds: float = 3.0,
                 backoff: Backoff | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.slow_seconds = slow_seconds
        self.wait_seconds = wait_seconds
        self.first_wait_seconds = first_wait_seconds
        self._backoff = backoff or Backoff(initial=2.0, maximum=60.0)
        self._clock = clock
        self._changed = threading.Condition()
        self._holder: int | None = None
        self._held_since = 0.0
        self._depth = 0
        self._answered = False
        self._failure: str | None = None

    @property
    def failing(self) -> bool:
        with self._changed:
            return self._failure is not None

    def unanswered(self, seconds: float) -> str:
        """What a caller that stopped waiting after ``seconds`` is told: the failure that marks the cluster if any
        (the same words on every tick, so a status does not change for the wording alone)."""
        with self._changed:
            return self._failure or f"the cluster did not answer within {seconds:g}s"

    @property
    def answering(self) -> bool:
        """The cluster has answered, and nothing since says it stopped."""
        with self._changed:
            return self._answered and self._failure is None

    def check(self) -> None:
        """Raise :class:`KafkaUnavailable` while the cluster is marked and its backoff step has not passed."""
        with self._changed:
            if self._failure is not None and self._backoff.waiting(self._clock()):
                raise KafkaUnavailable(self._failure)

    def enter(self) -> float:
        """Let a call go (returns when it started), or raise :class:`KafkaUnavailable`."""
        me = threading.get_ident()
        with self._changed:
            if self._holder == me:
                self._depth += 1
                return self._clock()
            waited = self.wait_seconds if self._answered else self.first_wait_seconds
            deadline = self._clock() + waited
            while True:
                if self._failure is not None and (self._holder is not None or self._backoff.waiting(self._clock())):
                    raise KafkaUnavailable(self._failure)
                if self._holder is None:
                    break
                # Counted from when the call under way began too: once it is that old, nobody waits any more.
                left = min(deadline, self._held_since + waited) - self._clock()
                if left <= 0:
                    raise KafkaUnavailable(self._failure or f"the cluster did not answer within {waited:g}s")
                self._changed.wait(left)
            self._holder, self._depth, self._held_since = me, 1, self._clock()
            return self._held_since

    def leave(self, started: float, error: BaseException | None) -> None:
        with self._changed:
            self._depth -= 1
            if self._depth == 0:
                self._holder = None
            if error is None or isinstance(error, KafkaRequestRefused):
                self._answered = True
                self._failure = None
                self._backoff.succeeded()
            elif isinstance(error, KafkaUnavailable) and self._clock() - started >= self.slow_seconds:
                self._failure = str(error)
                self._backoff.failed(self._clock())
            self._changed.notify_all()


class _Gated:
    def __init__(self, kafka: KafkaAdmin, gate: CallGate) -> None:
        self._kafka = kafka
        self._gate = gate

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._kafka, name)
        if name not in REQUESTS or not callable(found):
            return found
        gate = self._gate

        def inline(*args: Any, **kwargs: Any) -> Any:
            started = gate.enter()
            try:
                result = found(*args, **kwargs)
            except BaseException as exc:
                gate.leave(started, exc)
                raise
            gate.leave(started, None)
            return result

        def call(*args: Any, **kwargs: Any) -> Any:
            if name in UNSERIALISED:
                gate.check()
                return found(*args, **kwargs)
            if name not in READS or gate.answering:
                return inline(*args, **kwargs)
            gate.check()
            return _time_boxed(inline, args, kwargs, gate.first_wait_seconds, gate.unanswered)
        return call


def _time_boxed(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], seconds: float,
                told: Callable[[float], str]) -> Any:
    """``fn``'s answer if it comes within ``seconds``; else :class:`KafkaUnavailable`, and ``fn`` goes on."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller if it still waits
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="kpo-gate-read", daemon=True).start()
    if not done.wait(seconds):
        raise KafkaUnavailable(told(seconds))
    if "error" in box:
        raise box["error"]
    return box["value"]


def gated(kafka: KafkaAdmin, gate: CallGate) -> KafkaAdmin:
    """``kafka`` with every request through ``gate``."""
    return cast(KafkaAdmin, _Gated(kafka, gate))
