"""Leader election's timing rules, pure: when a candidate may take the Lease, and how long a leader may act on it.

Two operator replicas share one ``coordination.k8s.io/v1`` Lease; the one named in ``holderIdentity`` runs the
executors and handlers, the other waits. The rules are client-go's (controller-runtime's leader election), so a
Kubernetes operator's user meets no surprise:

- **Nobody's clock is trusted but one's own.** A candidate never compares ``renewTime`` with its own clock (the two
  machines' clocks may disagree). It notes, on its own monotonic clock, when it last saw the Lease *change* (any write
  changes ``resourceVersion``); the holder is dead once ``leaseDurationSeconds`` have passed since, with no change.
- **Take:** when there is no Lease (create it), when nobody holds it (``holderIdentity`` empty: the last holder
  released it on shutdown, so the standby takes over at once), or when it expired as above.
- **Renew:** the holder writes it every ``retry_period``; every write is conditional on the ``resourceVersion`` it
  read, so of two candidates writing at once exactly one succeeds.
- **Stop acting:** a leader holds only while its last successful write began less than ``renew_deadline`` ago.
  ``renew_deadline < lease_duration``: a candidate takes over no sooner than ``lease_duration`` after it saw that
  write, which is after the write began, so the old leader has stopped ``lease_duration - renew_deadline`` seconds
  (the margin for clock rates and scheduling) before the new one may start. A leader that reads a Lease held by
  someone else, or no Lease at all, has lost it at once.

The I/O lives in :mod:`kpo.k8s.lease`, the loop around these rules in :mod:`kpo.leadership`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# client-go's rule: a renewal must have room for a retry (and its jitter) before the deadline.
JITTER_FACTOR = 1.2


@dataclass(frozen=True)
class LeaseTiming:
    """Seconds. Defaults: a standby takes over 10-12 s after a leader dies without releasing (it polls every 2 s),
    at once after a release; a leader with 2 failed renewals in a row stops at 6 s."""

    lease_duration: float = 10.0
    renew_deadline: float = 6.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if self.retry_period <= 0:
            raise ValueError(f"retryPeriodSeconds must be positive, not {self.retry_period}")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"renewDeadlineSeconds ({self.renew_deadline}) must exceed {JITTER_FACTOR} x "
                             f"retryPeriodSeconds ({self.retry_period}): a failed renewal needs room for a retry")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(f"leaseDurationSeconds ({self.lease_duration}) must exceed renewDeadlineSeconds "
                             f"({self.renew_deadline}): the old leader must stop before a standby may start")


@dataclass(frozen=True)
class LeaseRecord:
    """What a candidate reads of the Lease: who holds it, for how long, and its version (``resourceVersion``)."""

    holder: str
    duration_seconds: float
    transitions: int
    version: str


class Step(StrEnum):
    CREATE = "Create"    # no Lease yet: create it, held by us
    ACQUIRE = "Acquire"  # free or expired: write ourselves in (a new transition)
    RENEW = "Renew"      # ours: write a new renewTime
    WAIT = "Wait"        # someone else's, still fresh
    LOST = "Lost"        # we were leading and the Lease is no longer ours: stop acting at once


def observed_at(previous: LeaseRecord | None, previous_at: float, current: LeaseRecord | None, now: float) -> float:
    """When (on our clock) the Lease last changed: ``previous_at`` if it reads as before, else ``now``."""
    return previous_at if current == previous else now


def step(record: LeaseRecord | None, me: str, seen_at: float, now: float, *, leading: bool) -> Step:
    """What a candidate does with the Lease it just read; ``seen_at`` is when it saw this version first."""
    if record is None:
        return Step.LOST if leading else Step.CREATE
    if record.holder == me:
        return Step.RENEW
    if leading:
        return Step.LOST
    if not record.holder or now >= seen_at + record.duration_seconds:
        return Step.ACQUIRE
    return Step.WAIT


def holding(renewed_at: float | None, now: float, timing: LeaseTiming) -> bool:
    """Whether a leader whose last successful write began at ``renewed_at`` may still act."""
    return renewed_at is not None and now - renewed_at < timing.renew_deadline


def next_wait(renewed_at: float | None, now: float, timing: LeaseTiming) -> float:
    """How long the renewal loop sleeps: a retry period, but never past the deadline, so a lost Lease is noticed on
    time even when every renewal fails."""
    if renewed_at is None:
        return timing.retry_period
    return max(0.0, min(timing.retry_period, renewed_at + timing.renew_deadline - now))


def request_timeout(renewed_at: float | None, now: float, timing: LeaseTiming) -> float:
    """The longest one Lease request may take: a retry period, and for a leader no longer than its deadline allows
    (at least a tenth of a second, so a last attempt is still made)."""
    if renewed_at is None:
        return timing.retry_period
    return max(0.1, min(timing.retry_period, renewed_at + timing.renew_deadline - now))
