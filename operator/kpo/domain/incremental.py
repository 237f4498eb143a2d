"""Incremental replica moves (KAFKA-6794): one new replica at a time instead of all at once.

Kafka's reassignment adds every new replica of a partition at once and drops the old ones only when all of them are in
sync. Moving a partition with replication factor 3 to three new brokers therefore runs six replicas, three of them
fetching from the leader at the same time, and the throttle has to be sized for the worst of it. KAFKA-6794 proposed
to walk there in small steps instead, and kpo's `Incremental` strategy does so:

- each step adds at most one new replica (the first target replica not yet present, in target order), so at most one
  replica per partition is ever catching up;
- each step drops at most one excess replica, and only once the partition already holds more replicas than the target
  asks for, so the partition never falls below the redundancy it started with;
- excess replicas are dropped in the order they appear, the current leader last, so leadership stays put until the
  very end and the partition sees at most one leader election;
- the last step is the target itself, in its order (the first replica is the preferred leader).

The ticket's worked example: (0,1,2) -> (0,1,2,3) -> (0,2,3,4) -> (0,3,4,5) -> (3,4,5).

A step that both drops and adds is one step of the ticket's algorithm, but not one KIP-455 submission: during a
reassignment Kafka keeps target + removing replicas, so submitting (0,2,3,4) while (0,1,2,3) is in place would hold
five replicas until 4 catches up. `kip455_submissions` therefore splits such a step into a pure removal (which the
controller completes at once, the dropped replica being redundant) followed by the addition, so the replica set Kafka
reports never exceeds max(RF_old, RF_new) + 1.
"""

from __future__ import annotations

from collections.abc import Sequence

Replicas = tuple[int, ...]


def _validated(name: str, replicas: Sequence[int]) -> Replicas:
    as_tuple = tuple(replicas)
    if not as_tuple:
        raise ValueError(f"{name} replicas must not be empty")
    if len(set(as_tuple)) != len(as_tuple):
        raise ValueError(f"{name} replicas {list(as_tuple)} name a broker twice")
    return as_tuple


def _excess_to_drop(current: Replicas, target: Replicas, leader: int) -> int | None:
    """The next replica to drop: the first one outside the target, the leader only when nothing else is left."""
    excess = [broker for broker in current if broker not in target]
    if not excess:
        return None
    followers = [broker for broker in excess if broker != leader]
    return followers[0] if followers else leader


def incremental_steps(current: Sequence[int], target: Sequence[int], leader: int | None = None) -> list[Replicas]:
    """The replica lists to move through, one after the other, from `current` to `target` (KAFKA-6794).

    `leader` is the partition's current leader; it defaults to the first current replica (the preferred leader, which
    is the leader in a healthy cluster). The result excludes `current` and ends with `target`; it is empty when there
    is nothing to do. Each step is meant to be submitted once the previous one is fully in sync.
    """
    start = _validated("current", current)
    goal = _validated("target", target)
    leader_broker = start[0] if leader is None else leader
    if leader_broker not in start:
        raise ValueError(f"leader {leader_broker} is not one of the current replicas {list(start)}")
    steps: list[Replicas] = []
    replicas = start
    while replicas != goal:
        if set(replicas) == set(goal):
            steps.append(goal)  # only the order differs: one last reordering step
            break
        dropped = _excess_to_drop(replicas, goal, leader_broker) if len(replicas) > len(goal) else None
        added = next((broker for broker in goal if broker not in replicas), None)
        kept = tuple(broker for broker in replicas if broker != dropped)
        replicas = kept + ((added,) if added is not None else ())
        if set(replicas) == set(goal):
            replicas = goal
        steps.append(replicas)
    return steps


def live_replicas(in_place: Sequence[int], submitted: Sequence[int]) -> Replicas:
    """The replica set Kafka holds while a KIP-455 reassignment from `in_place` to `submitted` runs.

    The controller keeps the removing replicas (in place but not submitted) until every adding one is in sync.
    """
    return tuple(submitted) + tuple(broker for broker in in_place if broker not in submitted)


def kip455_submissions(current: Sequence[int], target: Sequence[int], leader: int | None = None) -> list[Replicas]:
    """The reassignment targets to submit one after the other, so no live replica set exceeds max(RF) + 1.

    These are `incremental_steps` with every step that both drops and adds split in two: the removal first (it needs
    no data movement and completes at once), then the addition.
    """
    submissions: list[Replicas] = []
    in_place = _validated("current", current)
    for step in incremental_steps(in_place, target, leader):
        removed = [broker for broker in in_place if broker not in step]
        added = [broker for broker in step if broker not in in_place]
        if removed and added:
            shrunk = tuple(broker for broker in in_place if broker not in removed)
            submissions.append(shrunk)
        submissions.append(step)
        in_place = step
    return submissions
