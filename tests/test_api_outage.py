"""Kubernetes API outages (issue 12): resources at rest have no timer; an outage is said once and probed with backoff.

Pure: a fake clock, exceptions built in memory, Kopf's filter functions called with plain dicts.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from kpo.k8s.outage import ApiOutage, ApiUnavailableError, RepeatedRequestErrors, is_outage, namespace_terminating
from kpo.resources.partition_reassignment.handlers import partitionreassignment_at_rest
from kpo.resources.preferred_leader_election.handlers import preferredleaderelection_at_rest
from kpo.resources.topic_partition_count.handlers import topicpartitioncount_at_rest


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def refused() -> urllib3.exceptions.MaxRetryError:
    return urllib3.exceptions.MaxRetryError(None, "/api/v1/namespaces/x/configmaps/y",  # type: ignore[arg-type]
                                            urllib3.exceptions.NewConnectionError(None, "Connection refused"))


@pytest.mark.parametrize(("exc", "outage"), [
    (refused(), True),
    (urllib3.exceptions.ProtocolError("Connection aborted."), True),
    (ConnectionResetError(), True),
    (ApiException(status=503, reason="Service Unavailable"), True),
    (ApiException(status=500, reason="Internal Server Error"), True),
    (ApiException(status=404, reason="Not Found"), False),
    (ApiException(status=403, reason="Forbidden"), False),
    (ApiException(status=422, reason="Unprocessable Entity"), False),
    (ValueError("a bug"), False),
])
def test_what_counts_as_an_outage(exc: Exception, outage: bool) -> None:
    assert is_outage(exc) is outage


def test_an_outage_wrapped_by_a_handler_is_still_one() -> None:
    try:
        try:
            raise ApiException(status=503, reason="Service Unavailable")
        except ApiException as inner:
            raise RuntimeError("cannot read PartitionReassignment 'x'") from inner
    except RuntimeError as outer:
        assert is_outage(outer)


def _failing() -> None:
    raise refused()


def test_an_outage_is_logged_once_and_probed_with_backoff(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    outage = ApiOutage(first_backoff=2, max_backoff=16, clock=clock)
    calls: list[float] = []

    def tick() -> None:
        calls.append(clock.now)
        _failing()

    with caplog.at_level(logging.INFO, logger="kpo.k8s.outage"):
        # 300 resources x 150 ticks of one second: the outage of the issue.
        for _second in range(150):
            for _resource in range(300):
                outage.run(tick)
            clock.now += 1
        assert outage.ongoing
        clock.now += 16
        outage.run(lambda: None)  # the API answers again, to the next probe
    assert not outage.ongoing
    probes = [round(t - 1000) for t in calls]
    assert probes[:6] == [0, 2, 6, 14, 30, 46]  # one probe per step: 2, 4, 8, 16, 16 ... seconds apart
    assert len(calls) < 15
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "unavailable" in lines[0] and "NewConnectionError" in lines[0]
    assert "available again after 166 s" in lines[1] and "tick(s) skipped" in lines[1]


def test_errors_that_are_not_an_outage_pass_through() -> None:
    outage = ApiOutage(clock=Clock())

    def not_found() -> None:
        raise ApiException(status=404, reason="Not Found")

    with pytest.raises(ApiException):
        outage.run(not_found)
    assert not outage.ongoing


def test_a_tick_that_gets_through_ends_the_outage_and_the_next_starts_afresh(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    outage = ApiOutage(first_backoff=2, max_backoff=60, clock=clock)
    ran: list[int] = []
    with caplog.at_level(logging.INFO, logger="kpo.k8s.outage"):
        outage.run(_failing)
        outage.run(lambda: ran.append(1))  # inside the window: skipped
        clock.now += 2
        outage.run(lambda: ran.append(2))  # the probe gets through
        outage.run(lambda: ran.append(3))
        outage.run(_failing)
    assert ran == [2, 3]
    assert [r.getMessage().split(" ")[3] for r in caplog.records] == ["(NewConnectionError:", "again",
                                                                      "(NewConnectionError:"]


def test_a_release_in_an_outage_is_retried_not_dropped_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    """A deleted resource's release meets the outage: it must come back (Kopf keeps the finalizer and retries when
    told), not end quietly as a skipped tick does; and it is the outage's one line, not a traceback."""
    clock = Clock()
    outage = ApiOutage(first_backoff=2, max_backoff=60, clock=clock)
    released: list[float] = []
    with caplog.at_level(logging.INFO, logger="kpo.k8s.outage"):
        with pytest.raises(ApiUnavailableError) as first:
            outage.call(_failing)
        assert first.value.delay == 2 and isinstance(first.value.__cause__, urllib3.exceptions.MaxRetryError)
        clock.now += 1
        with pytest.raises(ApiUnavailableError) as early:  # before the next probe: not even tried
            outage.call(_failing)
        assert early.value.__cause__ is None and early.value.delay == 2  # never less than the first step
        clock.now += 1
        with pytest.raises(ApiUnavailableError) as again:  # the probe fails: the wait doubles
            outage.call(_failing)
        assert again.value.delay == 4
        clock.now += 4

        def release() -> str:
            released.append(clock.now)
            return "events"

        assert outage.call(release) == "events"
    assert released == [1006.0] and not outage.ongoing
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "unavailable" in lines[0] and "available again" in lines[1], lines
    with pytest.raises(ApiException):  # not an outage: the release's own error, unchanged
        outage.call(lambda: (_ for _ in ()).throw(ApiException(status=404, reason="Not Found")))
    assert not outage.ongoing


def _record(message: str, name: str = "kopf._cogs.clients.watching") -> logging.LogRecord:
    return logging.LogRecord(name, logging.ERROR, __file__, 1, message, None, None)


def test_kopf_request_retries_are_let_through_once_per_doubling_window() -> None:
    clock = Clock()
    repeated = RepeatedRequestErrors(first_window=10, max_window=40, reset_after=60, clock=clock)
    passed: list[str] = []
    for _ in range(150):  # four watch streams failing an attempt each second for 150 s
        for stream in range(4):
            record = _record(f"Request attempt #3/9 failed; will retry: GET /apis/kpo.dev/v1alpha1/s{stream}")
            if repeated.filter(record):
                passed.append(record.getMessage())
        clock.now += 1
    assert len(passed) == 5  # at 0, 10, 30, 70 and 110 s: windows of 10, 20, 40 and 40 s
    assert "held back" in passed[1]
    # Anything else goes through untouched.
    assert repeated.filter(_record("Timer 'x' succeeded."))
    assert repeated.filter(_record("Request attempt #1/9 failed", name="kpo.something"))
    # A quiet minute ends the outage: the next failure is said at once.
    clock.now += 61
    assert repeated.filter(_record("Request attempt #1/9 failed; will retry: GET /api"))


def _meta(generation: int) -> dict[str, Any]:
    return {"generation": generation, "namespace": "ns", "name": "x"}


@pytest.mark.parametrize(("status", "generation", "polls"), [
    ({}, 1, True),
    ({"phase": "Executing", "observedGeneration": 1}, 1, True),
    ({"phase": "Succeeded", "observedGeneration": 1}, 1, False),
    ({"phase": "Reverted", "observedGeneration": 1}, 1, False),
    ({"phase": "Invalid", "observedGeneration": 1}, 1, False),
    ({"phase": "Succeeded", "observedGeneration": 1}, 2, True),  # the spec changed: wake up
    ({"phase": "Stopped", "observedGeneration": 1,
      "inFlight": [{"topic": "t", "partition": 0, "replicas": [1]}]}, 1, True),  # a move of its own still runs
    ({"phase": "Reverted", "observedGeneration": 1, "throttle": {"brokers": [1]}}, 1, True),  # cleanup pending
])
def test_a_partition_reassignment_at_rest_has_no_timer(status: dict[str, Any], generation: int,
                                                       polls: bool) -> None:
    assert partitionreassignment_at_rest(generation, status) is not polls


@pytest.mark.parametrize(("status", "generation", "polls"), [
    ({}, 1, True),
    ({"phase": "Growing", "observedGeneration": 1}, 1, True),
    ({"phase": "Succeeded", "observedGeneration": 1}, 1, False),
    ({"phase": "Failed", "observedGeneration": 1}, 1, False),
    ({"phase": "Succeeded", "observedGeneration": 1}, 2, True),
])
def test_a_topic_partition_count_at_rest_has_no_timer(status: dict[str, Any], generation: int, polls: bool) -> None:
    assert topicpartitioncount_at_rest(generation, status) is not polls


def _ready(reason: str) -> list[dict[str, str]]:
    return [{"type": "Ready", "status": "False", "reason": reason, "lastTransitionTime": "2026-01-01T00:00:00Z"}]


@pytest.mark.parametrize(("status", "generation", "polls"), [
    ({}, 1, True),
    ({"phase": "Scheduled", "observedGeneration": 1}, 1, True),  # its schedule is a clock, not an event
    ({"phase": "Waiting", "observedGeneration": 1}, 1, True),
    ({"phase": "Succeeded", "observedGeneration": 1}, 1, False),
    # Matches no partition yet (a topic created a moment ago): no event on this resource will say when it does.
    ({"phase": "Invalid", "observedGeneration": 1, "conditions": _ready("NothingSelected")}, 1, True),
    ({"phase": "Invalid", "observedGeneration": 1, "conditions": _ready("UnknownTopic")}, 1, False),
    # Waits for a PartitionReassignment to be created: no event on this resource will say so.
    ({"phase": "Invalid", "observedGeneration": 1, "conditions": _ready("UnknownPartitionReassignment")}, 1, True),
    ({"phase": "Failed", "observedGeneration": 1}, 3, True),
])
def test_a_preferred_leader_election_at_rest_has_no_timer(status: dict[str, Any], generation: int,
                                                          polls: bool) -> None:
    assert preferredleaderelection_at_rest(generation, status) is not polls


def test_a_write_into_a_namespace_being_deleted_is_not_an_outage() -> None:
    terminating = ApiException(status=403, reason="Forbidden")
    terminating.body = ('{"message":"configmaps \\"x-rollback\\" is forbidden: unable to create new content in '
                        'namespace e2e-1 because it is being terminated"}')
    assert namespace_terminating(terminating)
    assert not namespace_terminating(ApiException(status=403, reason="Forbidden")), "RBAC refusals are not"
    assert not namespace_terminating(ValueError("being terminated"))
