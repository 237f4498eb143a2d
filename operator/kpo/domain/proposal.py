"""A computed reassignment plan as kpo proposes it: the targets, and what they were computed from."""

from __future__ import annotations

from dataclasses import dataclass, field

from kpo.domain.model import Replicas, TopicPartition


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
