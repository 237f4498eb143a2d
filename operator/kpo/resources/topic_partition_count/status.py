"""A TopicPartitionCount's status, both ways, through the API status model.

Read: what the life cycle remembers (:class:`Memory`) comes from the status as the API models parse it, never from
strings picked out of a dict. Written: the fields a decision sets are built as a :class:`TopicPartitionCountStatus`
and dumped in the API's camelCase, so what kpo writes is what the CRD schema (generated from the same models)
accepts. A field set to ``None`` is removed (the status is written as a JSON merge patch).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from kpo.api import KeyRemap, KeyRemapSource, TopicPartitionCountStatus
from kpo.domain import conditions as cond
from kpo.domain.keyremap import RemapReport
from kpo.resources.topic_partition_count.lifecycle import (
    Decision,
    Intent,
    KeySample,
    Memory,
    Phase,
    report_sources,
)

#: Decimal places of the fractions in status.keyRemap (the exact value is in movedKeySpace).
DECIMAL_PLACES = 9


def parse(status: Mapping[str, Any]) -> TopicPartitionCountStatus:
    return TopicPartitionCountStatus.model_validate(dict(status))


def memory_of(status: Mapping[str, Any]) -> Memory:
    typed = parse(status)
    phase = Phase(typed.phase or Phase.PENDING)
    ready = typed.condition(cond.READY)
    remap = typed.key_remap
    requested = remap.to_partitions if remap is not None and phase is Phase.GROWING else None
    return Memory(phase=phase, observed_generation=typed.observed_generation or 0,
                  reason=ready.reason if ready is not None else "", requested=requested,
                  topic_missing_since=typed.topic_missing_since)


def decimal(fraction: Fraction, places: int = DECIMAL_PLACES) -> str:
    """A fraction in [0, 1] as a decimal string, truncated (never rounded up to "1" unless it is 1)."""
    scaled = fraction.numerator * 10**places // fraction.denominator
    whole, rest = divmod(scaled, 10**places)
    digits = f"{rest:0{places}d}".rstrip("0")
    return f"{whole}.{digits}" if digits else str(whole)


def remap_of(report: RemapReport, sample: KeySample | None) -> KeyRemap:
    fraction = report.remapped_fraction
    moved = sample.moved_fraction if sample is not None else None
    return KeyRemap(
        from_partitions=report.old_partitions, to_partitions=report.new_partitions,
        moved_fraction=decimal(fraction), moved_key_space=f"{fraction.numerator}/{fraction.denominator}",
        sources=[KeyRemapSource(partition=p, fed_by=list(feeding)) for p, feeding in report_sources(report)],
        sampled_messages=sample.messages if sample is not None else None,
        sampled_moved_fraction=decimal(moved) if moved is not None else None)


def remap_status(report: RemapReport, sample: KeySample | None) -> dict[str, Any]:
    """``status.keyRemap`` for a growth, in the API's shape."""
    return remap_of(report, sample).model_dump(mode="json", by_alias=True, exclude_none=True)


def status_of(previous: Mapping[str, Any], intent: Intent, decision: Decision, now: dt.datetime) -> dict[str, Any]:
    """The status fields this decision sets; ``None`` removes a field (JSON merge patch)."""
    fields: dict[str, Any] = {
        "phase": decision.phase,
        "observed_generation": intent.generation,
        "conditions": cond.merge(previous.get("conditions") or [], decision.conditions, intent.generation, now),
        "topic_missing_since": decision.topic_missing_since,
    }
    if decision.current is not None:
        fields["current_partitions"] = decision.current
    report = decision.report
    earlier = previous.get("keyRemap") or {}
    if report is not None:
        # Reaching a count already present keeps the report of the growth that got there (a re-applied spec, or a
        # status write lost after Kafka accepted the growth).
        no_change = report.old_partitions == report.new_partitions
        if not (no_change and earlier.get("toPartitions") == report.new_partitions):
            fields["key_remap"] = remap_of(report, decision.sample)
    elif decision.phase in (Phase.INVALID, Phase.FAILED):
        fields["key_remap"] = None
    written = TopicPartitionCountStatus(**fields).model_dump(mode="json", by_alias=True, exclude_unset=True)
    if written.get("keyRemap"):
        written["keyRemap"] = {k: v for k, v in written["keyRemap"].items() if v is not None}
    return written
