"""A status the API server would refuse is caught before Kopf patches it, and replaced by its small, valid part."""

from __future__ import annotations

from typing import Any

from kpo.api import PARTITION_REASSIGNMENT
from kpo.resources.shell import OBJECT_BUDGET_BYTES, STATUS_REFUSED, status_refusal
from kpo.resources.shell import fallback_status as _fallback

NOW = "2026-11-22T10:00:00Z"


def _refused(body: dict[str, Any], status: dict[str, Any]) -> str | None:
    return status_refusal(PARTITION_REASSIGNMENT, body, status)


def body(partitions: int = 2, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "kpo.dev/v1alpha1", "kind": "PartitionReassignment",
            "metadata": {"name": "r", "namespace": "ns", "generation": 3},
            "spec": {"partitions": [{"topic": "t", "partition": p, "replicas": [1, 2, 3]} for p in range(partitions)]},
            "status": status or {}}


def condition(type_: str, message: str) -> dict[str, Any]:
    return {"type": type_, "status": "False", "reason": "InvalidSpec", "message": message,
            "lastTransitionTime": NOW, "observedGeneration": 3}


def test_a_valid_status_passes() -> None:
    assert _refused(body(), {"phase": "Invalid", "observedGeneration": 3,
                                   "conditions": [condition("Ready", "x" * 32768)]}) is None


def test_a_message_over_the_conditions_32_kib_is_refused_as_the_schema_would() -> None:
    refusal = _refused(body(), {"phase": "Invalid", "conditions": [condition("Ready", "x" * 32769)]})
    assert refusal is not None and "status.conditions.0.message" in refusal and "CRD schema" in refusal


def test_an_unknown_phase_is_refused() -> None:
    assert _refused(body(), {"phase": "Exploded"}) is not None


def test_the_merged_status_is_checked_not_only_the_patch() -> None:
    previous = {"conditions": [condition("Ready", "x" * 40_000)]}
    assert _refused(body(status=previous), {"phase": "Pending"}) is not None
    assert _refused(body(status=previous), {"phase": "Pending", "conditions": None}) is None


def test_an_object_over_one_etcd_write_is_refused() -> None:
    big = body(partitions=30_000)
    refusal = _refused(big, {"phase": "Pending"})
    assert refusal is not None and str(OBJECT_BUDGET_BYTES) in refusal and "split" in refusal


def test_the_fallback_keeps_phase_generation_and_clipped_conditions_and_says_why() -> None:
    status = {"phase": "Invalid", "observedGeneration": 3, "inFlight": [{"topic": "t"}] * 5,
              "conditions": [condition("Ready", "x" * 40_000), condition("Stalled", "old")]}
    fallback = _fallback(status, "the status fails the CRD schema")
    assert set(fallback) == {"phase", "observedGeneration", "conditions"}
    ready, stalled = fallback["conditions"]
    assert len(ready["message"]) == 1024
    assert stalled["type"] == "Stalled" and stalled["reason"] == STATUS_REFUSED and stalled["status"] == "True"
    assert "the status fails the CRD schema" in stalled["message"]
    assert _refused(body(), fallback) is None


def test_the_fallback_keeps_when_a_missing_topic_was_first_seen_so_the_wait_for_it_ends() -> None:
    status = {"phase": "Pending", "observedGeneration": 3, "topicMissingSince": NOW,
              "conditions": [condition("Ready", "x" * 40_000)]}
    assert _fallback(status, "too big")["topicMissingSince"] == NOW
