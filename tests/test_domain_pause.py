"""Execution time with the pauses taken out (kpo.domain.pause): elapsed stands still while paused, the pauses are
counted apart, and the ETA does not grow while paused (issue 26)."""

from __future__ import annotations

import datetime as dt

from kpo.domain.pause import ExecutionClock, eta_while_paused

T0 = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def test_nothing_started_costs_nothing_even_paused() -> None:
    clock = ExecutionClock().advance(running=False, paused=True, now=T0)
    assert clock == ExecutionClock() and clock.elapsed(at(60)) == 0


def test_the_first_move_starts_the_clock_when_it_was_sent() -> None:
    clock = ExecutionClock().advance(running=True, paused=False, now=T0)
    assert clock.started == T0 and clock.elapsed(at(30)) == 30 and clock.paused_total(at(30)) == 0
    # A first tick that took 6 s to read and record before it sent the move: the clock starts at the sending.
    sent = ExecutionClock().advance(running=True, paused=False, now=T0, start=at(6))
    assert sent.started == at(6) and sent.elapsed(at(30)) == 24 and sent.elapsed(T0) == 0
    assert sent.advance(running=True, paused=False, now=at(10), start=at(12)).started == at(6), "started once"


def test_elapsed_stands_still_while_paused_and_goes_on_after_resume() -> None:
    clock = ExecutionClock(T0).advance(running=True, paused=True, now=at(100))
    assert clock.paused_since == at(100)
    later = clock.advance(running=True, paused=True, now=at(400))
    assert later.paused_since == at(100), "the pause keeps its start"
    assert later.elapsed(at(400)) == 100 and later.paused_total(at(400)) == 300
    resumed = later.advance(running=True, paused=False, now=at(500))
    assert resumed.paused_since is None and resumed.paused_seconds == 400
    assert resumed.elapsed(at(530)) == 130 and resumed.paused_total(at(530)) == 400


def test_two_pauses_add_up() -> None:
    clock = ExecutionClock(T0)
    for paused, now in ((True, 10), (False, 20), (True, 50), (True, 70), (False, 80)):
        clock = clock.advance(running=True, paused=paused, now=at(now))
    assert clock.paused_seconds == 40 and clock.elapsed(at(100)) == 60


def test_the_eta_never_grows_while_paused() -> None:
    assert eta_while_paused(120, None) == 120
    assert eta_while_paused(150, 120) == 120
    assert eta_while_paused(90, 120) == 90
    assert eta_while_paused(None, 120) == 120


def test_the_clock_reads_back_from_what_the_status_shows() -> None:
    # Paused 40 s before, paused again since 120 s, looked at 200 s: elapsed 80, paused 120 (40 + the current 80).
    clock = ExecutionClock.read(T0, elapsed=80, paused=120, paused_since=at(120))
    assert clock == ExecutionClock(T0, 40, at(120))
    assert clock.elapsed(at(200)) == 80 and clock.paused_total(at(200)) == 120
    assert ExecutionClock.read(T0, elapsed=80, paused=40, paused_since=None) == ExecutionClock(T0, 40)
