"""The life cycles' transition guard raises (an ``assert`` would be gone under ``python -O``)."""

from __future__ import annotations

import pytest

from kpo.domain.conditions import IllegalTransitionError, check_transition
from kpo.resources.partition_reassignment import lifecycle as reassignment
from kpo.resources.preferred_leader_election import lifecycle as election
from kpo.resources.topic_partition_count import lifecycle as partition_count


@pytest.mark.parametrize("lifecycle", [reassignment, election, partition_count], ids=lambda m: m.__name__)
def test_every_phase_off_a_phases_diagram_raises(lifecycle: object) -> None:
    transitions = lifecycle.TRANSITIONS  # type: ignore[attr-defined]
    phases = list(lifecycle.Phase)  # type: ignore[attr-defined]
    refused = 0
    for before in transitions:
        for after in phases:
            if after in transitions[before]:
                check_transition(transitions, before, after)
            else:
                refused += 1
                with pytest.raises(IllegalTransitionError, match=f"illegal transition {before} -> {after}"):
                    check_transition(transitions, before, after)
    assert refused, "every diagram forbids something"
