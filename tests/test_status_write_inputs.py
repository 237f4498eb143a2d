"""A status write refused for a stale resourceVersion is retried only when the tick's inputs did not move."""

from __future__ import annotations

from typing import Any

from kpo.k8s.status import same_inputs


def obj(generation: int, status: dict[str, Any] | None, version: str = "1", finalizers: tuple[str, ...] = ()
        ) -> dict[str, Any]:
    meta = {"generation": generation, "resourceVersion": version, "finalizers": list(finalizers)}
    return {"metadata": meta, "spec": {}, **({"status": status} if status is not None else {})}


def test_a_finalizer_added_after_the_tick_read_the_object_is_no_reason_to_drop_its_status() -> None:
    assert same_inputs(obj(1, None), obj(1, None, "2", ("kpo.dev/finalizer",)))
    assert same_inputs(obj(1, {"phase": "Executing"}), obj(1, {"phase": "Executing"}, "9"))


def test_a_new_spec_or_another_status_makes_the_tick_stale() -> None:
    assert not same_inputs(obj(1, None), obj(2, None, "2"))
    assert not same_inputs(obj(1, {"phase": "Pending"}), obj(1, {"phase": "Executing"}, "2"))
