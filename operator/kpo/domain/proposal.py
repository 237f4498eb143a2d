"""A computed reassignment plan as kpo proposes it: the targets, and what they were computed from."""

from __future__ import annotations

from dataclasses import dataclass, field

from kpo.domain.model import Replicas, TopicPartition
from kpo.domain.plan_contract import Goal, PlanMetrics


@dataclass(frozen=True)
class Proposal:
    """A computed plan: the targets, and the replicas each planned partition had in the snapshot (its basis).

    ``id`` is the digest of the targets, so the same plan computed twice has the same id, and an approval names
    exactly the content it approves.
    """

    id: str
    generation: int
    targets: dict[TopicPartition, Replicas]
    basis: dict[TopicPartition, Replicas]
    #: The disk goals': the log dir of each replica of a partition ("any" where it stays), for those naming one.
    log_dirs: dict[TopicPartition, tuple[str, ...]] = field(default_factory=dict)
    #: RelieveCapacity: why the plan is only the best reachable state (the job's message naming the dirs still above
    #: the threshold), kept with the proposal so every tick of Proposed says so; empty when the threshold is met.
    unreached: str = ""


def threshold_unreached(goal: Goal, metrics: PlanMetrics | None) -> str:
    """A RelieveCapacity plan that leaves some dir above the threshold (``bandReached: false``): the job's message,
    which names those dirs; empty for any other plan."""
    if goal is not Goal.RELIEVE_CAPACITY or metrics is None or metrics.band_reached is not False:
        return ""
    return metrics.message or "some log dirs stay above the threshold: the plan is the best reachable state"
