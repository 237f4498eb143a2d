"""Parse a TopicPartitionCount (spec and status) into the values its life cycle decides on.

The API models in :mod:`kpo.api` check the spec again (the CRD schema already did at admission); whatever depends on
the topic — its current count, its replication factor, the live brokers — is the life cycle's to check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kpo.api import KeyOrderingPolicy, PlacementStrategy, TopicPartitionCountSpec
from kpo.domain.conditions import READY
from kpo.resources.topic_partition_count.lifecycle import Intent, Memory, Phase, Placement


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


def memory_of(status: Mapping[str, Any]) -> Memory:
    try:
        phase = Phase(status.get("phase") or Phase.PENDING)
    except ValueError:
        phase = Phase.PENDING
    ready: Mapping[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == READY), {})
    remap = status.get("keyRemap") or {}
    requested = remap.get("toPartitions") if phase is Phase.GROWING else None
    return Memory(phase=phase, observed_generation=int(status.get("observedGeneration") or 0),
                  reason=str(ready.get("reason") or ""), requested=int(requested) if requested else None)
