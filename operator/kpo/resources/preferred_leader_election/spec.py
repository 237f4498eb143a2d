"""Parse a PreferredLeaderElection (spec and status) into the values its life cycle decides on.

The API models in :mod:`kpo.api` check the spec again (the CRD schema already did at admission, except that a
``topicPattern`` compiles, which only Python can check); the life cycle then works on plain values: the selection,
the election type, the interval, and what the status remembers of earlier runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kpo.api import ElectionType, PreferredLeaderElectionSpec
from kpo.domain.conditions import READY
from kpo.domain.model import TopicPartition
from kpo.resources.preferred_leader_election.lifecycle import Intent, Memory, Phase, Selection, SelectionKind


def parse_spec(spec: Mapping[str, Any]) -> PreferredLeaderElectionSpec:
    return PreferredLeaderElectionSpec.model_validate(dict(spec))


def selection_of(spec: PreferredLeaderElectionSpec) -> Selection:
    if spec.topics is not None:
        return Selection(SelectionKind.TOPICS, topics=tuple(spec.topics))
    if spec.topic_pattern is not None:
        return Selection(SelectionKind.PATTERN, pattern=spec.topic_pattern)
    if spec.partitions is not None:
        return Selection(SelectionKind.PARTITIONS,
                         partitions=tuple(TopicPartition(p.topic, p.partition) for p in spec.partitions))
    return Selection(SelectionKind.ALL)


def intent_of(spec: PreferredLeaderElectionSpec, generation: int) -> Intent:
    return Intent(generation=generation, selection=selection_of(spec),
                  unclean=spec.election_type is ElectionType.UNCLEAN,
                  interval=spec.schedule.every if spec.schedule is not None else None, after=spec.after)


def parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def memory_of(status: Mapping[str, Any]) -> Memory:
    try:
        phase = Phase(status.get("phase") or Phase.PENDING)
    except ValueError:
        phase = Phase.PENDING
    ready: Mapping[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == READY), {})
    return Memory(phase=phase, observed_generation=int(status.get("observedGeneration") or 0),
                  reason=str(ready.get("reason") or ""), runs=int(status.get("runs") or 0),
                  next_run_at=parse_time(status.get("nextRunAt")))
