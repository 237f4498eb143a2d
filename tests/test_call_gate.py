"""The call gate of a cluster's direct calls (kpo.execution.gate): pure rules, a hand-turned clock, and a second
thread only where a call under way is the point."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kpo.domain.access import Backoff
from kpo.domain.model import KafkaRefusal
from kpo.execution.gate import CallGate, gated
from kpo.kafka.admin import KafkaRequestRefused, KafkaUnavailable


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def gate_at(clock: Clock, **kwargs: Any) -> CallGate:
    settings: dict[str, Any] = {"slow_seconds": 5.0, "wait_seconds": 0.0, "first_wait_seconds": 0.0,
                                "backoff": Backoff(initial=2.0, maximum=60.0), **kwargs}
    return CallGate(clock=clock, **settings)


def marked(clock: Clock, **kwargs: Any) -> CallGate:
    """A gate whose cluster let a call wait out its 10 s timeout."""
    gate = gate_at(clock, **kwargs)
    call(gate, clock, 10.0, KafkaUnavailable("Kafka did not answer within 10s"))
    return gate


def call(gate: CallGate, clock: Clock, takes: float, error: BaseException | None = None) -> None:
    started = gate.enter()
    clock.now += takes
    gate.leave(started, error)


@contextmanager
def under_way(gate: CallGate) -> Iterator[None]:
    """A call entered by another thread, held until the block ends."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        started = gate.enter()
        entered.set()
        release.wait(5)
        gate.leave(started, None)

    thread = threading.Thread(target=hold)
    thread.start()
    assert entered.wait(5)
    try:
        yield
    finally:
        release.set()
        thread.join(5)


def test_a_call_that_waited_out_its_timeout_marks_the_cluster_and_the_next_fails_at_once() -> None:
    clock = Clock()
    gate = marked(clock)
    assert gate.failing
    with pytest.raises(KafkaUnavailable, match=r"^Kafka did not answer within 10s$"):
        gate.enter()


def test_after_the_backoff_step_one_call_finds_out_and_an_answer_clears_the_mark() -> None:
    clock = Clock()
    gate = marked(clock)
    clock.now += 2.0
    call(gate, clock, 0.01)
    assert not gate.failing
    call(gate, clock, 0.01)


def test_the_backoff_grows_while_the_cluster_stays_silent() -> None:
    clock = Clock()
    gate = marked(clock)
    clock.now += 2.0
    call(gate, clock, 10.0, KafkaUnavailable("Kafka did not answer within 10s"))
    clock.now += 2.0
    with pytest.raises(KafkaUnavailable):
        gate.enter()  # 4 s this time
    clock.now += 2.0
    call(gate, clock, 0.01)


def test_a_quick_failure_blocks_nobody_and_does_not_mark() -> None:
    clock = Clock()
    gate = gate_at(clock)
    call(gate, clock, 0.2, KafkaUnavailable("NOT_CONTROLLER"))
    assert not gate.failing
    call(gate, clock, 0.01)


def test_a_refusal_is_an_answer() -> None:
    clock = Clock()
    gate = marked(clock)
    clock.now += 2.0
    call(gate, clock, 0.1, KafkaRequestRefused(KafkaRefusal(code="TOPIC_AUTHORIZATION_FAILED", message="no")))
    assert not gate.failing


def test_while_one_call_finds_out_whether_a_marked_cluster_answers_the_others_fail_at_once() -> None:
    clock = Clock()
    gate = marked(clock, wait_seconds=30.0)
    clock.now += 2.0
    with under_way(gate), pytest.raises(KafkaUnavailable, match=r"^Kafka did not answer within 10s$"):
        gate.enter()


def test_before_the_first_answer_a_call_waits_briefly_for_the_one_under_way() -> None:
    gate = CallGate(slow_seconds=5.0, wait_seconds=30.0, first_wait_seconds=0.05)
    with under_way(gate), pytest.raises(KafkaUnavailable, match=r"^the cluster did not answer within 0\.05s$"):
        gate.enter()


def test_once_the_cluster_answered_a_call_waits_for_the_one_under_way_and_then_goes() -> None:
    gate = CallGate(slow_seconds=5.0, wait_seconds=30.0, first_wait_seconds=0.0)
    gate.leave(gate.enter(), None)
    went = threading.Event()

    def second() -> None:
        gate.leave(gate.enter(), None)
        went.set()

    with under_way(gate):
        waiting = threading.Thread(target=second)
        waiting.start()
        assert not went.wait(0.1)  # held back while the first is under way
    assert went.wait(5)
    waiting.join(5)


def test_a_thread_already_inside_may_call_again() -> None:
    clock = Clock()
    gate = gate_at(clock, wait_seconds=30.0)
    outer = gate.enter()
    inner = gate.enter()
    gate.leave(inner, None)
    gate.leave(outer, None)
    call(gate, clock, 0.01)


class Admin:
    """Records calls; a stand-in for the KafkaAdmin Protocol (no I/O: the gate's wrapper is what is tested)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.settings = "kept"

    def describe_topics(self, topics: list[str]) -> dict[str, int]:
        self.calls.append("describe_topics")
        return {t: 1 for t in topics}

    def list_reassignments(self) -> dict[str, int]:
        raise KafkaUnavailable("Kafka did not answer within 10s")

    def sample_key_partitions(self, topic: str) -> int:
        self.calls.append("sample_key_partitions")
        return 3


def test_the_wrapper_gates_requests_and_leaves_other_attributes_alone() -> None:
    clock = Clock()
    gate = gate_at(clock, slow_seconds=0.0, first_wait_seconds=5.0)
    admin = gated(Admin(), gate)  # type: ignore[arg-type]
    assert admin.describe_topics(["a"]) == {"a": 1}
    assert admin.settings == "kept"  # type: ignore[attr-defined]
    with pytest.raises(KafkaUnavailable):
        admin.list_reassignments()
    assert gate.failing
    with pytest.raises(KafkaUnavailable, match=r"^Kafka did not answer within 10s$"):
        admin.describe_topics(["a"])
    with pytest.raises(KafkaUnavailable, match=r"^Kafka did not answer within 10s$"):
        admin.sample_key_partitions("a")  # type: ignore[call-arg]


def test_a_key_sample_does_not_hold_the_others_up() -> None:
    gate = CallGate(slow_seconds=5.0, wait_seconds=0.0, first_wait_seconds=0.0)
    gate.leave(gate.enter(), None)
    inner = Admin()
    admin = gated(inner, gate)  # type: ignore[arg-type]
    with under_way(gate):
        assert admin.sample_key_partitions("a") == 3  # type: ignore[call-arg]
    assert inner.calls == ["sample_key_partitions"]


class Silent:
    """A read that does not answer until released, then fails as a timed-out request does; a write that answers."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.ended = threading.Event()
        self.created: list[int] = []

    def describe_topics(self, topics: list[str]) -> dict[str, int]:
        try:
            self.release.wait(5)
            raise KafkaUnavailable("Kafka did not answer within 10s")
        finally:
            self.ended.set()

    def create_partitions(self, topic: str, total: int) -> None:
        self.created.append(total)


def test_a_read_to_a_cluster_that_never_answered_is_waited_for_briefly_and_goes_on_in_the_background() -> None:
    gate = CallGate(slow_seconds=0.0, wait_seconds=30.0, first_wait_seconds=0.05)
    inner = Silent()
    admin = gated(inner, gate)  # type: ignore[arg-type]
    with pytest.raises(KafkaUnavailable, match=r"^the cluster did not answer within 0\.05s$"):
        admin.describe_topics(["a"])
    assert not inner.ended.is_set() and not gate.failing  # still under way, on its own thread
    inner.release.set()
    assert inner.ended.wait(5)
    for _ in range(100):  # the read's thread leaves the gate right after
        if gate.failing:
            break
        threading.Event().wait(0.01)
    assert gate.failing
    with pytest.raises(KafkaUnavailable, match=r"^Kafka did not answer within 10s$"):
        admin.describe_topics(["a"])


def test_a_write_runs_in_the_callers_thread_even_before_the_first_answer() -> None:
    gate = CallGate(slow_seconds=5.0, wait_seconds=30.0, first_wait_seconds=0.0)
    inner = Silent()
    admin = gated(inner, gate)  # type: ignore[arg-type]
    admin.create_partitions("a", 6)
    assert inner.created == [6] and gate.answering


def test_once_the_call_under_way_is_older_than_the_wait_the_others_are_told_at_once() -> None:
    ahead = [0.0]  # a clock that runs, and can be put forward
    gate = CallGate(slow_seconds=5.0, wait_seconds=30.0, first_wait_seconds=3.0,
                    clock=lambda: time.monotonic() + ahead[0])
    with under_way(gate):
        ahead[0] += 3.5
        began = time.monotonic()
        with pytest.raises(KafkaUnavailable, match=r"^the cluster did not answer within 3s$"):
            gate.enter()
        assert time.monotonic() - began < 1.0
