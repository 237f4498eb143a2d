"""Where the new partitions of a growing topic go (TopicPartitionCount's balanced, rack-aware placement).

CreatePartitions without an assignment lets the controller place the new partitions, and it does so without looking at
how loaded the brokers already are. kpo places them itself, so that growing a topic evens the cluster out instead of
piling more replicas on the brokers that already carry the most:

- replicas of one partition sit on distinct brokers, and on distinct racks whenever the cluster has at least RF racks
  (with fewer racks, as many racks as there are, each used as few times as possible);
- each replica goes to the broker with the fewest replicas so far, counting the ones already placed; among equals, the
  broker whose rack carries the fewest replicas per broker, then the lowest id, so the result is deterministic;
- the leader (first replica) of each new partition is the chosen broker that leads the fewest partitions so far, and
  afterwards leadership of the new partitions is handed along chains of replicas until no broker leads two more than
  another one could take over, so leader counts end as even as the chosen replica sets allow.

Counting a rack's load per broker is what keeps counts even when racks are even: the greedy then fills racks in turn,
so starting from equal counts on equally sized racks, no broker ends more than one replica above another. Brokers
without a rack each count as a rack of their own (there is nothing to keep apart).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence
from fractions import Fraction

from kpo.domain.model import Broker, Replicas


def _rack_of(broker: Broker) -> str:
    return broker.rack if broker.rack is not None else f"\x00broker-{broker.id}"


def _pick_replicas(
    brokers: Sequence[Broker], replica_counts: Counter[int], replication_factor: int, distinct_racks: bool
) -> list[Broker]:
    racks = Counter(_rack_of(broker) for broker in brokers)
    rack_load: Counter[str] = Counter()
    for broker in brokers:
        rack_load[_rack_of(broker)] += replica_counts[broker.id]
    chosen: list[Broker] = []
    used_racks: Counter[str] = Counter()
    for _ in range(replication_factor):
        candidates = [broker for broker in brokers if broker not in chosen]
        if distinct_racks:
            candidates = [broker for broker in candidates if _rack_of(broker) not in used_racks]
        best = min(
            candidates,
            key=lambda broker: (
                used_racks[_rack_of(broker)],  # with fewer racks than RF: spread over racks first
                replica_counts[broker.id],
                Fraction(rack_load[_rack_of(broker)], racks[_rack_of(broker)]),
                broker.id,
            ),
        )
        chosen.append(best)
        used_racks[_rack_of(best)] += 1
    return chosen


def place_new_partitions(
    brokers: Sequence[Broker],
    replica_counts: Mapping[int, int],
    leader_counts: Mapping[int, int],
    replication_factor: int,
    new_partitions: int,
) -> list[Replicas]:
    """One replica list per new partition, in partition order, the preferred leader first.

    `replica_counts` and `leader_counts` are the brokers' current counts (brokers missing from them count as 0);
    only the brokers in `brokers` receive replicas.
    """
    if replication_factor < 1:
        raise ValueError(f"the replication factor must be at least 1, got {replication_factor}")
    if new_partitions < 0:
        raise ValueError(f"the number of new partitions must not be negative, got {new_partitions}")
    ordered = sorted(brokers, key=lambda broker: broker.id)
    if len({broker.id for broker in ordered}) != len(ordered):
        raise ValueError("a broker id is listed twice")
    if replication_factor > len(ordered):
        raise ValueError(
            f"replication factor {replication_factor} needs at least {replication_factor} brokers, "
            f"only {len(ordered)} are available"
        )
    distinct_racks = len({_rack_of(broker) for broker in ordered}) >= replication_factor
    replicas_on: Counter[int] = Counter({broker.id: replica_counts.get(broker.id, 0) for broker in ordered})
    leaders_on: Counter[int] = Counter({broker.id: leader_counts.get(broker.id, 0) for broker in ordered})
    placements: list[Replicas] = []
    for _ in range(new_partitions):
        chosen = _pick_replicas(ordered, replicas_on, replication_factor, distinct_racks)
        leader = min(chosen, key=lambda broker: (leaders_on[broker.id], replicas_on[broker.id], broker.id))
        replicas = (leader.id, *(broker.id for broker in chosen if broker != leader))
        for broker_id in replicas:
            replicas_on[broker_id] += 1
        leaders_on[leader.id] += 1
        placements.append(replicas)
    return _balance_leaders(placements, leaders_on)


def _leader_shift_path(
    placements: Sequence[Replicas], leaders_on: Counter[int], source: int
) -> list[tuple[int, int]] | None:
    """A chain of leadership hand-overs from `source` to a broker leading at least two fewer partitions.

    Breadth-first over "broker A leads new partition p, of which broker B is a replica". The result lists
    (partition index, new leader) pairs from `source` on; None when no such chain exists.
    """
    led_by: dict[int, list[int]] = {}
    for index, replicas in enumerate(placements):
        led_by.setdefault(replicas[0], []).append(index)
    reached_by: dict[int, tuple[int, int]] = {}
    queue = deque([source])
    seen = {source}
    while queue:
        broker = queue.popleft()
        for index in led_by.get(broker, []):
            for follower in placements[index][1:]:
                if follower in seen:
                    continue
                seen.add(follower)
                reached_by[follower] = (broker, index)
                if leaders_on[follower] <= leaders_on[source] - 2:
                    path: list[tuple[int, int]] = []
                    hop = follower
                    while hop != source:
                        previous, partition_index = reached_by[hop]
                        path.append((partition_index, hop))
                        hop = previous
                    return path[::-1]
                queue.append(follower)
    return None


def _balance_leaders(placements: list[Replicas], leaders_on: Counter[int]) -> list[Replicas]:
    """Hand leadership of new partitions along improving chains until none is left.

    The greedy choice of leaders can leave a broker two leaders above another although a chain of hand-overs would even
    them out. A leader assignment without such a chain minimises the spread of leader counts (the optimality condition
    of semi-matchings, Harvey et al. 2003); every hand-over chain lowers the sum of squared counts, so the loop ends.
    """
    balanced = list(placements)
    while True:
        path = None
        fewest = min(leaders_on.values(), default=0)
        overloaded = [broker for broker in leaders_on if leaders_on[broker] >= fewest + 2]
        for source in sorted(overloaded, key=lambda broker: (-leaders_on[broker], broker)):
            path = _leader_shift_path(balanced, leaders_on, source)
            if path is not None:
                break
        if path is None:
            return balanced
        leaders_on[balanced[path[0][0]][0]] -= 1
        leaders_on[path[-1][1]] += 1
        for index, new_leader in path:
            replicas = balanced[index]
            balanced[index] = (new_leader, *(broker for broker in replicas if broker != new_leader))
