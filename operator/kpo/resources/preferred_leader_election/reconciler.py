"""One reconciliation tick of a PreferredLeaderElection: observe, decide, elect, report.

The I/O shell around the pure :func:`lifecycle.decide`. It observes lazily, cheapest first — the clock, then the
PartitionReassignment named in ``after`` (one Kubernetes read), then Kafka (topic names and DescribeTopics of the
selected topics) only when a run is due — so an election that waits for its schedule costs nothing. It sends the
ElectLeaders request the decision asks for and returns the status to write and the Events to post, or ``None`` when
nothing changed. It knows nothing of Kopf.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kpo.api import ELECTED_PARTITIONS_CAP
from kpo.domain import access
from kpo.domain import conditions as cond
from kpo.domain.conditions import Event
from kpo.domain.model import ClusterView
from kpo.domain.problems import Problem, summarize
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable
from kpo.resources.preferred_leader_election.lifecycle import (
    KAFKA_UNAVAILABLE,
    Decision,
    Intent,
    Memory,
    Observation,
    Phase,
    Reassignment,
    Run,
    Selection,
    decide,
    finish,
    refused_run,
    rfc3339,
    tally,
    unavailable_run,
)

log = logging.getLogger(__name__)

#: status.lastRun.failures lists at most this many partitions, like electedPartitions; ``failed`` counts them all.
FAILURES_CAP = ELECTED_PARTITIONS_CAP


@dataclass
class TickOutcome:
    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    decision: Decision | None = None


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def observe(kafka: KafkaAdmin, selection: Selection) -> ClusterView:
    """Topic names, and the partitions of the topics the selection covers, read fresh from Kafka."""
    names = kafka.topic_names()
    partitions = kafka.describe_topics(selection.topics_to_describe(names))
    return ClusterView(brokers={}, partitions=partitions, topics=frozenset(names))


def tick(
    *,
    status: Mapping[str, Any],
    intent: Intent,
    memory: Memory,
    kafka: KafkaAdmin,
    read_after: Callable[[str], Reassignment],
    clock: Callable[[], dt.datetime] = utcnow,
    resource: str = "",
) -> TickOutcome | None:
    """Reconcile once; ``None`` when there is nothing to write (idle, or the same status as before).

    ``resource`` ("namespace/name") only labels the log lines.
    """
    now = clock()
    observed = Observation(now=now)
    decision = decide(intent, memory, observed)
    if decision.idle:
        return None
    if intent.after is not None:
        observed = replace(observed, after=read_after(intent.after))
        decision = decide(intent, memory, observed)
    try:
        if decision.needs_cluster:
            decision = decide(intent, memory, replace(observed, cluster=observe(kafka, intent.selection)))
    except KafkaUnavailable as exc:
        return _unavailable(status, str(exc), now, exc.reason)
    if decision.election is not None:
        decision = finish(intent, memory, decision, _elect(kafka, decision, clock, resource))
    new_status = status_of(status, intent, decision, now)
    if not decision.events and _unchanged(status, new_status):
        return None
    return TickOutcome(status=new_status, events=list(decision.events), decision=decision)


def _elect(kafka: KafkaAdmin, decision: Decision, clock: Callable[[], dt.datetime], resource: str) -> Run:
    election = decision.election
    assert election is not None
    started = clock()
    log.info("%s: electing leaders (%s) for %s", resource, "unclean" if election.unclean else "preferred",
             "every partition" if election.partitions is None else f"{len(election.partitions)} partition(s)")
    try:
        answers = kafka.elect_leaders(election.partitions, unclean=election.unclean)
    except KafkaRequestRefused as exc:
        return refused_run(decision.selected, exc.refusal, started, clock())
    except KafkaUnavailable as exc:
        return unavailable_run(str(exc), started)
    return tally(decision.selected, election, answers, started, clock())


def run_status(run: Run) -> dict[str, Any]:
    """``status.lastRun``: complete counters, partition lists capped (see the API)."""
    failures = sorted(run.failures.items())[:FAILURES_CAP]
    return {
        "startedAt": rfc3339(run.started_at),
        "finishedAt": rfc3339(run.finished_at),
        "elected": len(run.elected),
        "alreadyPreferred": run.already_preferred,
        "failed": len(run.failures),
        "failures": [{"topic": tp.topic, "partition": tp.partition, "reason": refusal.code or "Unknown",
                      "message": refusal.message} for tp, refusal in failures],
        "electedPartitions": [str(tp) for tp in run.elected[:ELECTED_PARTITIONS_CAP]],
    }


def status_of(previous: Mapping[str, Any], intent: Intent, decision: Decision, now: dt.datetime) -> dict[str, Any]:
    """The status fields this decision sets; ``None`` removes a field (JSON merge patch)."""
    status: dict[str, Any] = {
        "phase": decision.phase.value,
        "observedGeneration": intent.generation,
        "conditions": cond.merge(previous.get("conditions") or [], decision.conditions, intent.generation,
                                 rfc3339(now)),
        "runs": decision.runs,
        "nextRunAt": rfc3339(decision.next_run_at) if decision.next_run_at is not None else None,
    }
    if decision.run is not None:
        status["lastRun"] = run_status(decision.run)
    return status


def _unchanged(previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return all(previous.get(key) == value for key, value in new.items())


def _unavailable(status: Mapping[str, Any], message: str, now: dt.datetime, reason: str = KAFKA_UNAVAILABLE
                 ) -> TickOutcome | None:
    previous = status.get("conditions") or []
    updates, news = access.unreachable_updates(previous, reason, message)
    conditions = cond.merge(previous, updates, int(status.get("observedGeneration") or 0), rfc3339(now))
    events = [Event("Warning", reason, f"will retry: {message}")] if news else []
    return TickOutcome(status={"conditions": conditions}, events=events)


def invalid_outcome(status: Mapping[str, Any], generation: int, problems: list[Problem],
                    now: dt.datetime) -> TickOutcome | None:
    """For a spec the models reject (e.g. a topicPattern that does not compile): Invalid, every problem named."""
    if status.get("phase") == Phase.INVALID.value and status.get("observedGeneration") == generation:
        return None
    message = summarize(problems)
    decision = Decision(Phase.INVALID, problems[0].reason if problems else "InvalidSpec", message,
                        problems=tuple(problems))
    return TickOutcome(
        status={"phase": Phase.INVALID.value, "observedGeneration": generation,
                "conditions": cond.merge(status.get("conditions") or [], decision.conditions, generation,
                                         rfc3339(now))},
        events=[Event("Warning", decision.reason, message)], decision=decision)


__all__ = ["TickOutcome", "invalid_outcome", "observe", "run_status", "status_of", "tick", "utcnow"]
