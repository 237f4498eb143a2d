"""The leader-election loop (kpo.leadership) on an in-memory Lease with conditional writes and a fake clock: two
candidates, one leader; renewal; loss past the deadline; release hands over at once."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kpo import leadership
from kpo.config import LeaderElectionConfig, OperatorConfig
from kpo.domain.lease import LeaseRecord, LeaseTiming
from kpo.leadership import Leadership

TIMING = LeaseTiming(lease_duration=10, renew_deadline=6, retry_period=2)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Lease:
    """The API server's side: one Lease, a resourceVersion bumped on every write, 409 on a stale one."""

    record: LeaseRecord | None = None
    down: bool = False
    writes: list[str] = field(default_factory=list)

    def bump(self, holder: str, duration: int, transitions: int) -> None:
        version = str(int(self.record.version) + 1) if self.record else "1"
        self.record = LeaseRecord(holder, float(duration), transitions, version)
        self.writes.append(holder)


class Store:
    """One candidate's client: writes are conditional on the version it last read."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.last: LeaseRecord | None = None

    def read(self, timeout: float) -> LeaseRecord | None:
        assert timeout > 0
        if self.lease.down:
            raise ConnectionError("API server unreachable")
        self.last = self.lease.record
        return self.last

    def create(self, holder: str, duration_seconds: int, timeout: float) -> bool:
        if self.lease.record is not None:
            return False
        self.lease.bump(holder, duration_seconds, 0)
        return True

    def write(self, holder: str, duration_seconds: int, timeout: float) -> bool:
        if self.lease.down:
            raise ConnectionError("API server unreachable")
        current = self.lease.record
        if current is None or self.last is None or current.version != self.last.version:
            return False
        transitions = current.transitions + (1 if holder and holder != current.holder else 0)
        self.lease.bump(holder, duration_seconds, transitions)
        return True


def candidates(lease: Lease, clock: Clock, lost: list[str]) -> tuple[Leadership, Leadership]:
    def make(name: str) -> Leadership:
        return Leadership(Store(lease), name, TIMING, clock=clock, on_lost=lost.append)
    return make("a"), make("b")


def test_one_leader_and_a_waiting_standby() -> None:
    lease, clock, lost = Lease(), Clock(), []
    a, b = candidates(lease, clock, lost)
    assert a.attempt() and a.holding()
    assert not b.attempt() and not b.holding()
    clock.now += 2
    a.renew_once()
    assert a.holding() and lease.record is not None and lease.record.holder == "a"
    # The leader keeps renewing: the standby never sees it expire.
    for _ in range(10):
        clock.now += 2
        a.renew_once()
        assert not b.attempt()
    assert lost == []


def test_the_standby_takes_over_a_dead_leaders_lease_after_its_duration() -> None:
    lease, clock, lost = Lease(), Clock(), []
    a, b = candidates(lease, clock, lost)
    assert a.attempt()
    assert not b.attempt()  # b saw this version now
    clock.now += 9.9
    assert not b.attempt()
    clock.now += 0.1
    assert b.attempt() and b.holding()
    assert lease.record is not None and lease.record.holder == "b" and lease.record.transitions == 1
    # The old leader, had it survived, stopped 4 s before, and finds the Lease gone on its next renewal.
    assert not a.holding()


def test_a_leader_whose_renewals_fail_stops_at_its_deadline() -> None:
    lease, clock, lost = Lease(), Clock(), []
    a, _ = candidates(lease, clock, lost)
    assert a.attempt()
    lease.down = True
    clock.now += 2
    a.renew_once()
    assert a.holding() and lost == []
    clock.now += 2
    a.renew_once()
    assert a.holding() and lost == []
    clock.now += 2  # 6 s after the last successful write began
    assert not a.holding()
    a.renew_once()
    assert lost == ["a"]


def test_a_leader_that_finds_another_holder_stops_at_once() -> None:
    lease, clock, lost = Lease(), Clock(), []
    a, _ = candidates(lease, clock, lost)
    assert a.attempt()
    assert lease.record is not None
    lease.bump("intruder", 10, 1)
    clock.now += 2
    a.renew_once()
    assert lost == ["a"] and not a.holding()


def test_two_candidates_racing_for_a_free_lease_get_one_winner() -> None:
    lease, clock, lost = Lease(LeaseRecord("", 1, 3, "7")), Clock(), []
    a, b = candidates(lease, clock, lost)
    assert isinstance(a.store, Store) and isinstance(b.store, Store)
    a.store.read(1)
    b.store.read(1)  # both read version 7
    assert a.store.write("a", 10, 1)
    assert not b.store.write("b", 10, 1)  # 409: the version moved on
    assert not b.attempt()


def test_release_hands_the_lease_to_the_standby_at_once() -> None:
    lease, clock, lost = Lease(), Clock(), []
    a, b = candidates(lease, clock, lost)
    assert a.attempt()
    assert not b.attempt()
    a.release()
    assert lease.record is not None and lease.record.holder == "" and not a.holding()
    clock.now += 0.5
    assert b.attempt() and b.holding()
    assert lost == []


def test_a_releasing_leader_may_act_no_more_once_the_lease_can_be_taken() -> None:
    lease, clock, lost = Lease(), Clock(), []
    a, _ = candidates(lease, clock, lost)
    assert a.attempt()
    holding_while_released: list[bool] = []
    write = a.store.write

    def watched(holder: str, duration_seconds: int, timeout: float) -> bool:
        holding_while_released.append(a.holding())
        return write(holder, duration_seconds, timeout)

    a.store.write = watched  # type: ignore[method-assign]
    a.release()
    assert holding_while_released == [False]


def test_release_after_losing_writes_nothing() -> None:
    lease, clock, lost = Lease(), Clock(), []
    a, b = candidates(lease, clock, lost)
    assert a.attempt()
    clock.now += 10
    assert not b.attempt()
    clock.now += 10
    assert b.attempt()
    writes = len(lease.writes)
    a.release()
    assert len(lease.writes) == writes
    assert lease.record is not None and lease.record.holder == "b"


def test_holding_is_true_without_leader_election(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leadership, "_current", None)
    assert leadership.holding()
    lease, clock, lost = Lease(), Clock(), []
    a, _ = candidates(lease, clock, lost)
    monkeypatch.setattr(leadership, "_current", a)
    assert not leadership.holding()
    a.attempt()
    assert leadership.holding()


def test_configuration_defaults_and_the_environment_switch() -> None:
    default = OperatorConfig.load({})
    assert not default.leader_election.enabled
    assert default.leader_election.timing() == TIMING
    assert OperatorConfig.load({"KPO_LEADER_ELECTION": "true"}).leader_election.enabled
    with pytest.raises(ValueError, match="renewDeadlineSeconds"):
        LeaderElectionConfig(lease_duration_seconds=5, renew_deadline_seconds=6)
