"""Auto-propose on broker changes: when does a newly registered broker earn an ``AddBrokers`` proposal, and what does
that proposal look like.

The signal is KRaft's own broker registration, read with DescribeCluster: a broker that is registered and unfenced
but holds no replica of any topic is new capacity nobody uses yet. Nothing else says "this broker was just added":
Kafka places only new topics' replicas on it, and a platform team scaling out from three brokers to six expects
existing partitions to follow, as Cruise Control's self-healing or Strimzi's auto-rebalance on scale-up does. The
decision is stateless over restarts (an empty broker is still empty after the operator restarts) except for one
thing kept in memory: since when each empty broker has been seen empty, so that brokers registering a few seconds
apart in one scale-out are proposed together once all of them have been there ``settle_seconds`` (and a broker that
registers and leaves at once is never proposed).

A broker already named by an auto-proposal of that cluster (in any phase, Succeeded or Stopped included) is covered
and never proposed again while that resource exists: the user's decision on it stands. Deleting the resource makes a
still-empty broker eligible again; ``ignoreBrokers`` in the configuration declines a broker for good.

The proposal is a PartitionReassignment with a generated ``AddBrokers`` plan that waits at ``Proposed`` (approval
``Manual``) unless the configuration says ``Automatic``: kpo never moves data unasked by default.

The other direction, opt-in (``removeDeadAfterSeconds``): a broker that still holds replicas but has not been
registered and alive for that long is taken for gone, as Cruise Control's self-healing takes a broker that failed
for longer than its threshold, and gets a ``RemoveBrokers`` proposal that copies its replicas to live brokers. A
broker that comes back before then is forgotten. (Kafka 4.1's registration has no "marked for removal"; Kafka 4.3's
cordoned log directories, KIP-1066, would be the planned-removal signal.)
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

AUTO_PROPOSE_LABEL = "kpo.dev/auto-propose"
CLUSTER_LABEL = "kpo.dev/cluster"
ADD_BROKERS = "add-brokers"
REMOVE_BROKERS = "remove-brokers"
GOALS = {ADD_BROKERS: "AddBrokers", REMOVE_BROKERS: "RemoveBrokers"}
# A scale-out whose brokers keep registering would otherwise wait for ever: the first one is proposed after this many
# settle periods at most, with whatever other brokers have settled by then.
MAX_SETTLE_PERIODS = 4


@dataclass(frozen=True)
class Sightings:
    """One look at a cluster: the brokers still waiting (each with the time it was first seen empty, or gone) and
    the brokers to propose now (empty when nothing is due)."""

    waiting_since: dict[int, float]
    due: frozenset[int]


def newcomers(empty_since: Mapping[int, float], live: Collection[int], holding: Collection[int], *,
              covered: Collection[int], ignored: Collection[int], settle_seconds: float, now: float) -> Sightings:
    """Which registered brokers to propose adding, given the brokers holding a replica and those already covered.

    ``empty_since`` is the previous look's answer. A cluster where no broker holds a replica has nothing to move onto
    a newcomer: nothing is due there.
    """
    empty = set(live) - set(holding) - set(covered) - set(ignored)
    since = {b: empty_since.get(b, now) for b in sorted(empty)}
    if not since or not set(holding) & set(live):
        return Sightings(since, frozenset())
    settled = {b for b, first in since.items() if now - first >= settle_seconds}
    oldest = min(since.values())
    if settled == set(since) or (settled and now - oldest >= MAX_SETTLE_PERIODS * settle_seconds):
        return Sightings({b: t for b, t in since.items() if b not in settled}, frozenset(settled))
    return Sightings(since, frozenset())


def departures(dead_since: Mapping[int, float], dead_holding: Collection[int], *, covered: Collection[int],
               ignored: Collection[int], after_seconds: float, now: float) -> Sightings:
    """Which brokers to propose removing: those that hold replicas and have not been alive for ``after_seconds``.

    ``dead_holding`` are the brokers named in replica lists that DescribeCluster does not list; ``dead_since`` is
    the previous look's answer (a broker alive again drops out of it)."""
    dead = set(dead_holding) - set(covered) - set(ignored)
    since = {b: dead_since.get(b, now) for b in sorted(dead)}
    due = frozenset(b for b, first in since.items() if now - first >= after_seconds)
    return Sightings({b: t for b, t in since.items() if b not in due}, due)


def proposal_name(cluster: str, brokers: Collection[int], kind: str = ADD_BROKERS) -> str:
    """``auto-<kind>-<cluster>-<ids>``, a valid object name whatever the cluster is called."""
    safe = re.sub(r"[^a-z0-9-]+", "-", cluster.lower()).strip("-") or "cluster"
    ids = "-".join(str(b) for b in sorted(brokers))
    return f"auto-{kind}-{safe}-{ids}"[:253].rstrip("-")


def covered_brokers(proposals: Collection[Mapping[str, Any]], kind: str = ADD_BROKERS) -> frozenset[int]:
    """The brokers named by existing auto-proposals of ``kind`` (their ``spec.plan.brokers``)."""
    out: set[int] = set()
    for body in proposals:
        if ((body.get("metadata") or {}).get("labels") or {}).get(AUTO_PROPOSE_LABEL) != kind:
            continue
        plan = (body.get("spec") or {}).get("plan") or {}
        out.update(int(b) for b in plan.get("brokers") or ())
    return frozenset(out)


def add_brokers_proposal(*, cluster: str, namespace: str, brokers: Collection[int], racks: Mapping[int, str | None],
                         automatic: bool, plan: Mapping[str, Any], execution: Mapping[str, Any],
                         seen_at: str) -> dict[str, Any]:
    """The PartitionReassignment that proposes filling ``brokers``: the configured plan and execution template with
    goal ``AddBrokers`` and the brokers, labelled so the next look finds it."""
    where = ", ".join(f"{b} (rack {racks.get(b) or 'none'})" for b in sorted(brokers))
    return _proposal(ADD_BROKERS, cluster=cluster, namespace=namespace, brokers=brokers, automatic=automatic,
                     plan=plan, execution=execution,
                     reason=f"broker(s) {where} registered with no replicas; first seen empty at {seen_at}")


def remove_brokers_proposal(*, cluster: str, namespace: str, brokers: Collection[int], automatic: bool,
                            plan: Mapping[str, Any], execution: Mapping[str, Any], seen_at: str) -> dict[str, Any]:
    """The PartitionReassignment that proposes moving every replica off ``brokers``, gone since ``seen_at``."""
    return _proposal(REMOVE_BROKERS, cluster=cluster, namespace=namespace, brokers=brokers, automatic=automatic,
                     plan=plan, execution=execution,
                     reason=f"broker(s) {', '.join(str(b) for b in sorted(brokers))} hold replicas but have not "
                            f"been registered and alive since {seen_at}")


def _proposal(kind: str, *, cluster: str, namespace: str, brokers: Collection[int], automatic: bool,
              plan: Mapping[str, Any], execution: Mapping[str, Any], reason: str) -> dict[str, Any]:
    ids = sorted(brokers)
    spec: dict[str, Any] = {
        "clusterRef": cluster,
        "plan": {**plan, "goal": GOALS[kind], "brokers": ids},
        "approval": {"mode": "Automatic" if automatic else "Manual"},
    }
    if execution:
        spec["execution"] = dict(execution)
    return {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {
            "name": proposal_name(cluster, ids, kind),
            "namespace": namespace,
            "labels": {AUTO_PROPOSE_LABEL: kind, CLUSTER_LABEL: label_value(cluster),
                       "app.kubernetes.io/managed-by": "kpo"},
            "annotations": {"kpo.dev/reason": reason},
        },
        "spec": spec,
    }


def label_value(cluster: str) -> str:
    """A cluster name as a label value (63 characters of ``[A-Za-z0-9_.-]``, alphanumeric at both ends)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", cluster)[:63].strip("-_.") or "cluster"


def proposed_message(brokers: Collection[int], automatic: bool, kind: str = ADD_BROKERS) -> str:
    ids = sorted(brokers)
    then = ("approval Automatic: it runs as soon as it is planned" if automatic else
            "it waits at Proposed: approve it by copying status.proposal.id to spec.approval.proposalId, or delete "
            "it and add the broker(s) to autoPropose ignoreBrokers to decline")
    why = "registered with no replicas" if kind == ADD_BROKERS else "hold replicas but are gone"
    return f"broker(s) {ids} {why}: proposed {GOALS[kind]} {ids}; {then}"
