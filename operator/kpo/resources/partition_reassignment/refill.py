"""Refill between polls: a tick that keeps looking at its moves in flight and refills a slot as soon as one ends.

The decision (whether to look again, and when) is :func:`kpo.domain.refill.next_probe`; this is the loop around it.
A look is one ListPartitionReassignments of the resource's own moves in flight. When one of them is no longer
listed, the loop runs a whole pass again — observe, decide, act, exactly what a tick does — on the status the
previous pass produced, so a freed slot is refilled through the cluster-wide scheduler under every limit, and the
status never says more than Kafka showed that pass. The tick then writes the status of its last pass, with the
fields of the earlier ones it did not replace (the passes' statuses merged as the API server merges patches), and
posts the Events of every pass.

What ends the loop, besides the decision: the resource changed (a new generation: a spec change the next tick must
see first) or is being deleted (its finalizer waits for this tick's lock); a look or a pass that fails (Kafka gone,
a request refused, a ConfigMap write refused) — what earlier passes did is written, and the next tick meets the
failure with the usual handling; and more watching ticks at once than the operator allows (each holds a worker
thread). A failure the tick itself must meet (:attr:`Probes.fatal`: the Kubernetes API down, which the tick's
ApiOutage says once and probes with backoff) is raised instead: nothing can be written then anyway.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from kpo.domain.model import Replicas, TopicPartition
from kpo.domain.refill import Elapsed, RefillPolicy, next_probe
from kpo.kafka.admin import KafkaRequestRefused, KafkaUnavailable
from kpo.resources.outcomes import Outcome
from kpo.resources.partition_reassignment.reconciler import PassReport

log = logging.getLogger(__name__)

#: One pass on a body (its status is what the pass remembers) and the original replicas on record.
Passed = tuple[Outcome[Any] | None, PassReport | None]
OnePass = Callable[[Mapping[str, Any], Mapping[TopicPartition, Replicas]], Passed]


@dataclass(frozen=True)
class Watching:
    """What the loop needs besides the passes: the policy, the operator's limit on watching ticks, time."""

    policy: RefillPolicy
    slots: threading.BoundedSemaphore
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True)
class Probes:
    """The loop's window on the world between passes."""

    #: The partitions among these that Kafka lists as moving (ListPartitionReassignments).
    moving: Callable[[Collection[TopicPartition]], Collection[TopicPartition]]
    #: False once the resource has a new generation or is being deleted.
    unchanged: Callable[[], bool]
    #: Called after each pass between polls with the moves it started (the metrics).
    refilled: Callable[[int], None] = lambda _started: None
    #: Failures of a pass that end the tick as they are (raised), not just the watch: a Kubernetes API outage.
    fatal: Callable[[BaseException], bool] = lambda _exc: False


def run(body: Mapping[str, Any], originals: Mapping[TopicPartition, Replicas], one_pass: OnePass, *,
        probes: Probes, watching: Watching, key: str = "") -> Outcome[Any] | None:
    """The tick: one pass, then passes between polls for as long as :func:`next_probe` says so."""
    began = watching.clock()
    outcome, report = one_pass(body, originals)
    if outcome is None or report is None or outcome.lost_kafka:
        return outcome
    ended = watching.clock()
    if next_probe(report.work, Elapsed(ended - began, 0.0, ended - began), watching.policy) is None:
        return outcome  # the usual case for large moves: not even a watching slot is taken
    if not watching.slots.acquire(blocking=False):
        return outcome
    try:
        return _watch(body, outcome, report, one_pass, probes=probes, watching=watching, began=began, key=key)
    finally:
        watching.slots.release()


def _watch(body: Mapping[str, Any], first: Outcome[Any], report: PassReport, one_pass: OnePass, *, probes: Probes,
           watching: Watching, began: float, key: str) -> Outcome[Any]:
    clock = watching.clock
    status, events, last = dict(first.status), list(first.events), first
    pass_ended = clock()
    last_pass, quiet = pass_ended - began, 0
    work = report.work
    while True:
        now = clock()
        delay = next_probe(work, Elapsed(now - began, now - pass_ended, last_pass, quiet), watching.policy)
        if delay is None:
            break
        watching.sleep(delay)
        if not probes.unchanged():
            break
        try:
            moving = set(probes.moving(list(work.in_flight)))
        except (KafkaUnavailable, KafkaRequestRefused) as exc:
            log.info("%s: stops looking between polls: %s", key, exc)
            break
        if set(work.in_flight) <= moving:
            quiet += 1
            continue
        body = {**body, "status": _merged(body.get("status") or {}, last.status)}
        started = clock()
        try:
            outcome, next_report = one_pass(body, last.originals)
        except Exception as exc:  # whatever failed, the next tick meets it with the tick's own handling
            if probes.fatal(exc):
                raise
            log.warning("%s: a pass between polls failed, the next tick retries: %s", key, exc)
            break
        pass_ended = clock()
        last_pass, quiet = pass_ended - started, 0
        if outcome is None or next_report is None:
            break
        probes.refilled(next_report.started)
        status.update(outcome.status)
        events += outcome.events
        last, work = outcome, next_report.work
        if outcome.lost_kafka:
            break
    return Outcome(status=status, events=events, decision=last.decision, lost_kafka=last.lost_kafka,
                   originals=last.originals)


def _merged(status: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """The status after a merge patch of its top-level fields (None removes one), as the next pass must see it."""
    return {k: v for k, v in {**status, **patch}.items() if v is not None}
