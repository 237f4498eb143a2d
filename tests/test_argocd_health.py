"""The Argo CD health check (Lua), run by a real Lua 5.1 interpreter — the dialect of Argo CD's gopher-lua — on the
statuses kpo's own condition code writes.

The samples are not written by hand: each comes from the life cycle's :class:`Decision` for a phase (or from the
kstatus helper the other kinds use), merged by :func:`kpo.domain.conditions.merge` exactly as the operator does. So
when the conditions a phase carries change, this test says whether Argo CD still sees the right health.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from kpo.domain import conditions as cond
from kpo.resources.partition_reassignment.lifecycle import Conflict, Decision, Phase

lua51 = pytest.importorskip("lupa.lua51", reason="lupa (dev extra) runs the Lua health check")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "helm" / "kpo" / "files" / "argocd-health.lua"
ARGOCD_CM = ROOT / "deploy" / "argocd" / "argocd-cm-health.yaml"
KINDS = ("PartitionReassignment", "PreferredLeaderElection", "TopicPartitionCount")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def health(obj: dict[str, Any], script: str | None = None) -> tuple[str, str]:
    """Run the health script as Argo CD does: the resource in the global ``obj``, a table ``hs`` returned."""
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = lua.execute(script if script is not None else SCRIPT.read_text())
    return str(result["status"]), str(result["message"])


def resource(status: dict[str, Any] | None, generation: int = 1, kind: str = "PartitionReassignment"
             ) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "kpo.dev/v1alpha1", "kind": kind,
                           "metadata": {"name": "r", "namespace": "ns", "generation": generation}, "spec": {}}
    if status is not None:
        obj["status"] = status
    return obj


def reassignment_status(decision: Decision, generation: int = 1) -> dict[str, Any]:
    return {"phase": decision.phase.value, "observedGeneration": generation,
            "conditions": cond.merge([], decision.conditions, generation, NOW)}


@pytest.mark.parametrize(("phase", "expected"), [
    (Phase.PENDING, "Progressing"),
    (Phase.PLANNING, "Progressing"),
    (Phase.PROPOSED, "Suspended"),
    (Phase.EXECUTING, "Progressing"),
    (Phase.PAUSED, "Suspended"),
    (Phase.STOPPING, "Progressing"),
    (Phase.STOPPED, "Suspended"),
    (Phase.REVERTING, "Progressing"),
    (Phase.REVERTED, "Suspended"),
    (Phase.SUCCEEDED, "Healthy"),
    (Phase.FAILED, "Degraded"),
    (Phase.INVALID, "Degraded"),
])
def test_every_reassignment_phase_has_the_expected_health(phase: Phase, expected: str) -> None:
    decision = Decision(phase, f"{phase.value}Reason", f"the {phase.value} message")
    status, message = health(resource(reassignment_status(decision)))
    assert status == expected
    assert message.endswith(f"the {phase.value} message")


def test_a_conflict_that_holds_a_reassignment_back_is_degraded() -> None:
    from kpo.domain.model import TopicPartition  # noqa: PLC0415

    decision = Decision(Phase.PENDING, "Conflict", "t-0 is claimed by ns/other",
                        conflicts=(Conflict(TopicPartition("t", 0), "ns/other"),))
    assert health(resource(reassignment_status(decision))) == ("Degraded", "Pending: t-0 is claimed by ns/other")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("flags", "expected"), [
    ({"ready": True, "progressing": False, "stalled": False}, "Healthy"),
    ({"ready": False, "progressing": True, "stalled": False}, "Progressing"),
    ({"ready": False, "progressing": False, "stalled": True}, "Degraded"),
])
def test_every_kind_maps_kstatus_conditions(kind: str, flags: dict[str, bool], expected: str) -> None:
    conditions = cond.merge([], cond.kstatus(reason="R", message="m", **flags), 3, NOW)
    status = {"phase": "Whatever", "observedGeneration": 3, "conditions": conditions}
    assert health(resource(status, generation=3, kind=kind))[0] == expected


def test_not_reconciled_yet_is_progressing() -> None:
    assert health(resource(None)) == ("Progressing", "Waiting for kpo to reconcile this resource")
    assert health(resource({"phase": "Pending"}))[0] == "Progressing"


def test_a_success_for_an_older_spec_is_not_healthy() -> None:
    succeeded = reassignment_status(Decision(Phase.SUCCEEDED, "Succeeded", "done"), generation=1)
    assert health(resource(succeeded, generation=2)) == ("Progressing", "Waiting for kpo to observe generation 2")


def test_stale_conditions_are_ignored_even_when_observed_generation_caught_up() -> None:
    stale = reassignment_status(Decision(Phase.SUCCEEDED, "Succeeded", "done"), generation=1)
    stale["observedGeneration"] = 2  # status written for generation 2, conditions still from generation 1
    assert health(resource(stale, generation=2))[0] == "Progressing"


def test_the_argocd_cm_snippet_carries_the_script_for_each_kind() -> None:
    data = yaml.safe_load(ARGOCD_CM.read_text())["data"]
    script = SCRIPT.read_text()
    assert set(data) == {f"resource.customizations.health.kpo.dev_{kind}" for kind in KINDS}
    assert all(text == script for text in data.values())


def test_the_script_is_lua_5_1() -> None:
    # gopher-lua is Lua 5.1: no goto, no integer division, no bitwise operators.
    text = SCRIPT.read_text()
    for newer in ("goto ", "//", " & ", " | ", "<<", ">>"):
        assert newer not in _code(text), newer


def _code(text: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())
