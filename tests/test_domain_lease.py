"""The Lease timing rules (kpo.domain.lease): when to take, renew, wait, and when a leader has lost the Lease."""

from __future__ import annotations

import pytest

from kpo.domain.lease import LeaseRecord, LeaseTiming, Step, holding, next_wait, observed_at, request_timeout, step

ME, OTHER = "kpo-a_1", "kpo-b_2"
TIMING = LeaseTiming(lease_duration=10, renew_deadline=6, retry_period=2)


def rec(holder: str, version: str = "1", duration: float = 10) -> LeaseRecord:
    return LeaseRecord(holder=holder, duration_seconds=duration, transitions=0, version=version)


def test_no_lease_is_created() -> None:
    assert step(None, ME, 0, 0, leading=False) is Step.CREATE


def test_an_empty_holder_is_taken_at_once() -> None:
    # The last leader released the Lease on shutdown: no waiting for it to expire.
    assert step(rec(""), ME, seen_at=100, now=100, leading=False) is Step.ACQUIRE


def test_a_fresh_lease_of_another_holder_is_waited_for() -> None:
    assert step(rec(OTHER), ME, seen_at=100, now=109.9, leading=False) is Step.WAIT


def test_a_lease_unchanged_for_its_duration_on_our_clock_is_taken() -> None:
    assert step(rec(OTHER), ME, seen_at=100, now=110, leading=False) is Step.ACQUIRE
    # The holder's own duration counts, not ours.
    assert step(rec(OTHER, duration=30), ME, seen_at=100, now=110, leading=False) is Step.WAIT


def test_our_own_lease_is_renewed() -> None:
    assert step(rec(ME), ME, seen_at=0, now=1000, leading=True) is Step.RENEW
    # A restarted process with the same identity would renew too; identities carry a random suffix, so it does not.
    assert step(rec(ME), ME, seen_at=0, now=0, leading=False) is Step.RENEW


def test_a_leader_that_reads_another_holder_or_no_lease_has_lost_it() -> None:
    assert step(rec(OTHER), ME, seen_at=0, now=0, leading=True) is Step.LOST
    assert step(rec(""), ME, seen_at=0, now=0, leading=True) is Step.LOST
    assert step(None, ME, seen_at=0, now=0, leading=True) is Step.LOST


def test_a_change_restarts_the_expiry_clock_and_no_change_keeps_it() -> None:
    first = rec(OTHER, version="1")
    assert observed_at(None, 0, first, now=5) == 5
    assert observed_at(first, 5, rec(OTHER, version="1"), now=9) == 5
    # The holder renewed (a new resourceVersion): it is alive, count again from now.
    assert observed_at(first, 5, rec(OTHER, version="2"), now=9) == 9
    assert observed_at(first, 5, None, now=9) == 9


def test_a_leader_holds_until_its_renew_deadline() -> None:
    assert not holding(None, 0, TIMING)
    assert holding(100, 105.9, TIMING)
    assert not holding(100, 106, TIMING)


def test_the_old_leader_stops_before_a_standby_may_start() -> None:
    # The leader's last write began at t=100; a standby saw it no earlier than that, so it waits until >= 110, and the
    # leader stopped at 106.
    last_write, standby_saw = 100.0, 100.0
    takeover = standby_saw + TIMING.lease_duration
    assert not holding(last_write, takeover, TIMING)
    assert step(rec(OTHER), ME, seen_at=standby_saw, now=takeover - 0.001, leading=False) is Step.WAIT


def test_the_renewal_loop_wakes_at_the_deadline_and_requests_fit_before_it() -> None:
    assert next_wait(None, 0, TIMING) == 2
    assert next_wait(100, 100, TIMING) == 2
    assert next_wait(100, 105, TIMING) == pytest.approx(1)
    assert next_wait(100, 107, TIMING) == 0
    assert request_timeout(None, 0, TIMING) == 2
    assert request_timeout(100, 105.5, TIMING) == pytest.approx(0.5)
    assert request_timeout(100, 110, TIMING) == pytest.approx(0.1)


@pytest.mark.parametrize(("duration", "deadline", "retry"), [(6, 6, 2), (10, 2.4, 2), (10, 6, 0)])
def test_unsafe_timings_are_refused(duration: float, deadline: float, retry: float) -> None:
    with pytest.raises(ValueError, match="must"):
        LeaseTiming(lease_duration=duration, renew_deadline=deadline, retry_period=retry)
