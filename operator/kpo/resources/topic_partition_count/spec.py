"""Parse a TopicPartitionCount (spec and status) into the values its life cycle decides on.

The API models in :mod:`kpo.api` check the spec again (the CRD schema already did at admission); whatever depends on
the topic — its current count, its replication factor, the live brokers — is the life cycle's to check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kpo.api import KeyOrderingPolicy, PlacementStrategy, TopicPartitionCountSpec
from kpo.resources.topic_partition_count.lifecycle import Intent, Placement


def parse_spec(spec: Mapping[str, Any]) -> TopicPartitionCountSpec:
    return TopicPartitionCountSpec.model_validate(dict(spec))


def intent_of(spec: TopicPartitionCountSpec, generation: int) -> Intent:
    placement = spec.placement
    explicit = placement.strategy is PlacementStrategy.EXPLICIT
    return Intent(
        generation=generation,
        topic=spec.topic,
        partitions=spec.partitions,
        placement=Placement(
            balanced=not explicit,
            rack_aware=placement.rack_aware,
            assignments=tuple(tuple(a) for a in placement.assignments) if explicit and placement.assignments else None,
        ),
        require_multiple=spec.key_ordering.policy is KeyOrderingPolicy.REQUIRE_MULTIPLE,
        sample_messages=spec.key_ordering.sample_messages,
    )
