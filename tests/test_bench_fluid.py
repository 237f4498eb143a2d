"""The execution simulator's model of refill between polls (kpo.domain.fluid): a look that finds a move ended refills
one pass later; without looks the slot waits for the next poll."""

from __future__ import annotations

import pytest

from kpo.domain.fluid import SimMove, simulate

FIRST, SECOND = SimMove(0, 0, (1,), 64.0, 0.0), SimMove(1, 0, (1,), 64.0, 0.0)


def one_at_a_time(now: float, finished: list[SimMove], running: list[SimMove]) -> list[SimMove]:
    if now == 0.0:
        return [FIRST]
    return [SECOND] if FIRST in finished else []


def every_quarter_second(since_poll: float, since_pass: float, quiet: int, left: dict[int, float]) -> float | None:
    return 0.25 if left and since_poll + 0.25 <= 1.8 else None


def test_without_looks_the_second_move_waits_for_the_next_poll() -> None:
    # The first move copies 64 bytes at 64 bytes/s: it ends at 1 s, the poll at 2 s starts the second.
    assert simulate(one_at_a_time, throttle=64.0, poll_interval=2.0).makespan == pytest.approx(3.0)


def test_a_look_that_sees_the_move_ended_refills_one_pass_later() -> None:
    result = simulate(one_at_a_time, throttle=64.0, poll_interval=2.0, watch=every_quarter_second,
                      refill_latency=0.1)
    assert result.makespan == pytest.approx(2.1)
    assert result.finish_times == pytest.approx({0: 1.0, 1: 2.1})
