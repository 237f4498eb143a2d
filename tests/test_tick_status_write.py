"""The tick writes its status itself, so a write that meets an API outage is the tick's failure (said once by the
ApiOutage and probed), not minutes of Kopf retries outside any tick; Events follow only a status that was written."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import urllib3.exceptions

from kpo.api import PARTITION_REASSIGNMENT
from kpo.domain.conditions import Event
from kpo.k8s.outage import ApiOutage
from kpo.resources import shell
from kpo.resources.outcomes import Outcome

BODY = {"apiVersion": "kpo.dev/v1alpha1", "kind": "PartitionReassignment",
        "metadata": {"name": "r", "namespace": "ns", "generation": 1}, "spec": {}, "status": {}}


@pytest.fixture
def posted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    events: list[str] = []
    monkeypatch.setattr(shell.kopf, "event", lambda _body, *, type, reason, message: events.append(reason))
    return events


def outcome() -> Outcome[Any]:
    return Outcome(status={"phase": "Executing", "observedGeneration": 1},
                   events=[Event("Normal", "Executing", "Pending -> Executing")])


def test_the_status_is_written_then_the_events_posted(posted: list[str]) -> None:
    written: list[dict[str, Any]] = []
    shell.post_outcome(PARTITION_REASSIGNMENT, BODY, lambda status: written.append(dict(status)) is None, outcome())  # type: ignore[arg-type]
    assert written == [{"phase": "Executing", "observedGeneration": 1}]
    assert posted == ["Executing"]


def test_no_event_for_a_resource_that_is_gone(posted: list[str]) -> None:
    shell.post_outcome(PARTITION_REASSIGNMENT, BODY, lambda _status: False, outcome())  # type: ignore[arg-type]
    assert posted == []


def test_a_write_that_meets_an_outage_posts_nothing_and_is_said_once(posted: list[str],
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    def refused(_status: Any) -> bool:
        raise urllib3.exceptions.MaxRetryError(None, "/status", urllib3.exceptions.NewConnectionError(None, "refused"))

    clock = [0.0]
    outage = ApiOutage(clock=lambda: clock[0])
    with caplog.at_level(logging.WARNING):
        outage.run(lambda: shell.post_outcome(PARTITION_REASSIGNMENT, BODY, refused, outcome()))  # type: ignore[arg-type]
        clock[0] = 0.5
        outage.run(lambda: shell.post_outcome(PARTITION_REASSIGNMENT, BODY, refused, outcome()))  # type: ignore[arg-type]
    assert outage.ongoing
    assert posted == []
    assert sum("Kubernetes API unavailable" in r.getMessage() for r in caplog.records) == 1


def test_nothing_is_written_for_no_outcome(posted: list[str]) -> None:
    shell.post_outcome(PARTITION_REASSIGNMENT, BODY, lambda _status: pytest.fail("no write expected"), None)  # type: ignore[arg-type]
    assert posted == []


def test_a_refused_status_is_said_once_while_the_status_shows_the_refusal(posted: list[str],
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    # A Pending resource waiting for its topic ticks on: its too-large status must not say StatusRefused every tick.
    too_big = {"phase": "Pending", "observedGeneration": 1, "topicMissingSince": "2026-11-29T04:00:00Z",
               "conditions": [{"type": "Ready", "status": "False", "reason": "WaitingForTopic", "message": "x" * 40_000,
                               "lastTransitionTime": "2026-11-29T04:00:00Z"}]}
    written: list[dict[str, Any]] = []
    body = dict(BODY)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            shell.post_outcome(PARTITION_REASSIGNMENT, body, lambda status: written.append(dict(status)) is None,  # type: ignore[arg-type]
                               Outcome(status=too_big, events=[]))
            body = {**BODY, "status": written[-1]}
    assert posted == ["StatusRefused"]
    assert sum("StatusRefused" in str(w["conditions"]) for w in written) == 3, "the condition stays on every write"
    assert all(w["topicMissingSince"] == "2026-11-29T04:00:00Z" for w in written)
    assert sum("status" in r.getMessage() for r in caplog.records) == 1
