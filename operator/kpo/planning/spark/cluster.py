"""What a request means on one snapshot: which brokers take part, which must be emptied, and what "rack-aware" is.

These are driver-side facts about brokers (a few hundred at most), decided once before any partition is touched, in
plain Python so that the rules are unit-tested without Spark:

- *eligible* brokers take part after the change: alive, not being removed, and, for a ``Rebalance`` that names
  brokers, among those named. Only they send and receive replicas; any other broker keeps what it has.
- *removed* brokers (``RemoveBrokers``) must end with nothing of the selected topics.
- *excluded* brokers (``excludeBrokers``) are not eligible: they receive nothing and keep what they have.
- *no leaders*: brokers (``excludeLeaders``) that must lead no selected partition after the plan.
- *balancing*: whether replicas that need not move may move to even out the brokers. Every goal balances but a
  ``ReplicationFactor`` change, which only places the new replicas unless ``rebalanceExisting`` asks for more: growing
  a topic's replicas should copy the new replicas' bytes, not reshuffle the old ones; nor a ``DemoteBrokers``, which
  only reorders replica lists (:mod:`kpo.planning.spark.demote`).
- *placement domains*: the unit a partition may hold at most one replica of. With rack awareness in force a domain is
  a rack, otherwise a single broker. Rack awareness is in force when it is requested, every eligible broker has a rack
  and there are at least two racks; a partition is then bound to distinct racks when it has no more replicas than
  there are racks (Kafka's rule), and spread as evenly as the racks allow otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kpo.domain.plan_contract import BrokerInfo, Goal, PlanRequest


class PlanError(Exception):
    """A request this snapshot cannot satisfy; the message is what the user reads in the job's metrics."""


@dataclass(frozen=True)
class Cluster:
    racks: dict[int, str | None]
    alive: frozenset[int]
    eligible: frozenset[int]
    removed: frozenset[int]
    rack_mode: bool
    # broker -> domain id for every known broker: a rack's index in rack mode, else the broker id.
    domain_of: dict[int, int]
    balancing: bool = True
    no_leaders: frozenset[int] = frozenset()

    @property
    def domains(self) -> dict[int, tuple[int, ...]]:
        """Eligible brokers by domain, each sorted by id."""
        out: dict[int, list[int]] = {}
        for b in sorted(self.eligible):
            out.setdefault(self.domain_of[b], []).append(b)
        return {d: tuple(bs) for d, bs in sorted(out.items())}

    @property
    def rack_count(self) -> int:
        return len({self.racks[b] for b in self.eligible}) if self.rack_mode else 0

    def strict_racks(self, replication_factor: int) -> bool:
        """Whether a partition with this many replicas must have them in distinct racks."""
        return self.rack_mode and replication_factor <= self.rack_count

    @classmethod
    def of(cls, request: PlanRequest, brokers: Iterable[BrokerInfo], referenced: Iterable[int]) -> Cluster:
        """Decide the broker facts; ``referenced`` are the broker ids the partitions' replicas name."""
        known = {b.id: b for b in brokers}
        racks: dict[int, str | None] = {b: info.rack for b, info in known.items()}
        for b in referenced:
            # A replica on a broker the cluster no longer lists: a dead broker, with no rack we know of.
            racks.setdefault(b, None)
        alive = frozenset(b for b, info in known.items() if info.alive)
        concerned = frozenset(request.brokers)
        unknown = sorted(concerned - racks.keys())
        removed: frozenset[int] = frozenset()
        if request.goal is Goal.REMOVE_BROKERS:
            if unknown:
                raise PlanError(f"brokers {unknown} to remove are not in the cluster: check 'brokers'")
            removed = concerned
            eligible = alive - removed
        elif request.goal is Goal.ADD_BROKERS:
            missing = sorted(concerned - alive)
            if missing:
                raise PlanError(f"brokers {missing} to add are not registered and alive: start them before planning")
            eligible = alive
        elif request.goal is Goal.REBALANCE and concerned:
            if unknown:
                raise PlanError(f"brokers {unknown} are not in the cluster: check 'brokers'")
            eligible = alive & concerned
        else:
            eligible = alive
        if request.goal is Goal.ADD_BROKERS and concerned & set(request.exclude_brokers):
            raise PlanError(f"brokers {sorted(concerned & set(request.exclude_brokers))} are to be added and excluded "
                            "at once: check 'excludeBrokers'")
        eligible -= frozenset(request.exclude_brokers)
        if not eligible:
            raise PlanError("no alive broker is left to hold the replicas")
        rack_mode = (request.rack_aware and all(racks[b] is not None for b in eligible)
                     and len({racks[b] for b in eligible}) >= 2)
        domain_of: dict[int, int]
        if rack_mode:
            index = {rack: i for i, rack in enumerate(sorted({r for r in racks.values() if r is not None}))}
            # A broker without a rack (only ever an ineligible one here) is a domain of its own.
            domain_of = {b: index[r] if r is not None else -1 - b for b, r in racks.items()}
        else:
            domain_of = {b: b for b in racks}
        balancing = ((request.goal is not Goal.REPLICATION_FACTOR or request.rebalance_existing)
                     and request.goal is not Goal.DEMOTE_BROKERS)
        return cls(racks=racks, alive=alive, eligible=eligible, removed=removed, rack_mode=rack_mode,
                   domain_of=domain_of, balancing=balancing, no_leaders=frozenset(request.exclude_leaders))
