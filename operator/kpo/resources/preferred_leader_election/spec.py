"""Parse a PreferredLeaderElection (spec and status) into the values its life cycle decides on.

The API models in :mod:`kpo.api` check the spec again (the CRD schema already did at admission, except that a
``topicPattern`` compiles, which only Python can check); the life cycle then works on plain values: the selection,
the election type, the interval, and what the status remembers of earlier runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kpo.api import ElectionType, PreferredLeaderElectionSpec
from kpo.domain.model import TopicPartition
from kpo.resources.preferred_leader_election.lifecycle import Intent, Selection, SelectionKind


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
                  interval=spec.schedule.every if spec.schedule is not None else None, after=spec.after,
                  exclude_leaders=frozenset(spec.exclude_leaders))
