"""No module of a kind but its status.py names a status field: every read and write goes through the kind's API
status model (issue 29). The shared kstatus fields (phase, observedGeneration, conditions) are the shell's and
``outcomes``' too; everything else a reconciler or handler reports it asks status.py for."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kpo.api import PartitionReassignmentStatus, PreferredLeaderElectionStatus, TopicPartitionCountStatus
from kpo.api.common import StatusBase

RESOURCES = Path(__file__).resolve().parents[1] / "operator" / "kpo" / "resources"
KINDS: dict[str, type[StatusBase]] = {"partition_reassignment": PartitionReassignmentStatus,
         "preferred_leader_election": PreferredLeaderElectionStatus,
         "topic_partition_count": TopicPartitionCountStatus}


def status_keys(model: type[StatusBase]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()} - {"phase", "conditions",
                                                                                  "observedGeneration"}


def named_keys(source: str) -> set[str]:
    """String constants used as a subscript or a ``.get`` key."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            found.add(str(node.slice.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant):
            found.add(str(node.args[0].value))
        elif isinstance(node, ast.Dict):
            found.update(str(k.value) for k in node.keys if isinstance(k, ast.Constant))
    return found


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_only_the_kinds_status_module_names_its_status_fields(kind: str) -> None:
    keys = status_keys(KINDS[kind])
    named = {path.name: sorted(named_keys(path.read_text()) & keys)
             for path in sorted((RESOURCES / kind).glob("*.py")) if path.name != "status.py"}
    assert {name: found for name, found in named.items() if found} == {}


def test_the_check_sees_a_status_field_named_by_string() -> None:
    source = 'new_status["throttle"] = 1\nx = status.get("cordon")\ny = {"inFlight": []}\n'
    assert named_keys(source) & status_keys(PartitionReassignmentStatus) == {"throttle", "cordon", "inFlight"}
