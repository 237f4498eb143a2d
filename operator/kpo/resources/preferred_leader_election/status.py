"""A PreferredLeaderElection's status, both ways, through the API status model.

Read: what the life cycle remembers (:class:`Memory`) comes from the status as the API models parse it. Written: the
fields a decision sets are built as a :class:`PreferredLeaderElectionStatus` and dumped in the API's camelCase, so
what kpo writes is what the CRD schema (generated from the same models) accepts. ``nextRunAt: None`` removes the
field (the status is written as a JSON merge patch).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from kpo.api import ELECTED_PARTITIONS_CAP, ElectionRun, PartitionFailure, PreferredLeaderElectionStatus
from kpo.domain import conditions as cond
from kpo.resources.outcomes import topic_missing_since
from kpo.resources.preferred_leader_election.lifecycle import Decision, Intent, Memory, Phase, Run

#: status.lastRun.failures lists at most this many partitions, like electedPartitions; ``failed`` counts them all.
FAILURES_CAP = ELECTED_PARTITIONS_CAP


def parse(status: Mapping[str, Any]) -> PreferredLeaderElectionStatus:
    return PreferredLeaderElectionStatus.model_validate(dict(status))


def memory_of(status: Mapping[str, Any]) -> Memory:
    typed = parse(status)
    ready = typed.condition(cond.READY)
    return Memory(phase=Phase(typed.phase or Phase.PENDING), observed_generation=typed.observed_generation or 0,
                  reason=ready.reason if ready is not None else "", runs=typed.runs, next_run_at=typed.next_run_at,
                  topic_missing_since=typed.topic_missing_since)


def run_of(run: Run) -> ElectionRun:
    """``status.lastRun``: complete counters, partition lists capped (see the API)."""
    failures = sorted(run.failures.items())[:FAILURES_CAP]
    return ElectionRun(
        started_at=run.started_at, finished_at=run.finished_at, elected=len(run.elected),
        already_preferred=run.already_preferred, failed=len(run.failures), excluded=run.excluded,
        failures=[PartitionFailure(topic=tp.topic, partition=tp.partition, reason=refusal.code or "Unknown",
                                   message=refusal.message) for tp, refusal in failures],
        elected_partitions=[str(tp) for tp in run.elected[:ELECTED_PARTITIONS_CAP]])


def run_status(run: Run) -> dict[str, Any]:
    return run_of(run).model_dump(mode="json", by_alias=True)


def status_of(previous: Mapping[str, Any], intent: Intent, decision: Decision, now: dt.datetime) -> dict[str, Any]:
    """The status fields this decision sets; ``None`` removes a field (JSON merge patch)."""
    fields: dict[str, Any] = {
        "phase": decision.phase,
        "observed_generation": intent.generation,
        "conditions": cond.merge(previous.get("conditions") or [], decision.conditions, intent.generation, now),
        "runs": decision.runs,
        "next_run_at": decision.next_run_at,
    }
    if decision.run is not None:
        fields["last_run"] = run_of(decision.run)
    fields |= topic_missing_since(previous, decision.topic_missing_since)
    return PreferredLeaderElectionStatus(**fields).model_dump(mode="json", by_alias=True, exclude_unset=True)
