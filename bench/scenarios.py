"""Seeded move sets for the execution benchmark: the reassignments operators actually run.

Partition sizes are heavy-tailed (lognormal or Pareto), because a few huge partitions next to many small ones is
what makes batching hurt: a batch lasts as long as its largest member. Most partitions are written slowly, a few
("hot", 3 % by default) at 30-50 % of the throttle, which is what makes sharing a broker hurt: their share of the
bandwidth can drop below their write rate. Every scenario is a pure function of its seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from kpo.domain.scheduling import Order

MiB = 1024.0**2
GiB = 1024.0**3
THROTTLE = 64 * MiB  # bytes/s per broker, in and out


@dataclass(frozen=True)
class PlannedMove:
    """One partition of a reassignment, as a PartitionReassignment lists it, with what the simulator needs."""

    cr: int
    position: int
    partition: int
    current: tuple[int, ...]
    target: tuple[int, ...]
    size: float
    write_rate: float


@dataclass(frozen=True)
class Scenario:
    name: str
    brokers: int
    moves: tuple[PlannedMove, ...]
    #: The execution order of each CR, by index (moves[i].cr).
    orders: tuple[Order, ...]
    throttle: float = THROTTLE
    #: Whether kpo runs these moves with the Incremental strategy (KAFKA-6794), one new replica at a time.
    incremental: bool = False


SizeDraw = Callable[[random.Random], float]


def lognormal_sizes(rng: random.Random) -> float:
    return rng.lognormvariate(math.log(1 * GiB), 1.5)


def pareto_sizes(rng: random.Random) -> float:
    return 256 * MiB * rng.paretovariate(1.2)


@dataclass(frozen=True)
class _Partition:
    replicas: tuple[int, ...]
    size: float
    write_rate: float


def _cluster(
    rng: random.Random, brokers: range, partitions: int, sizes: SizeDraw, hot_share: float
) -> list[_Partition]:
    cluster = []
    for _ in range(partitions):
        replicas = tuple(rng.sample(list(brokers), 3))
        if rng.random() < hot_share:
            write_rate = rng.uniform(0.3, 0.5) * THROTTLE
        else:
            write_rate = min(rng.lognormvariate(math.log(0.2 * MiB), 1.0), 0.2 * THROTTLE)
        cluster.append(_Partition(replicas, sizes(rng), write_rate))
    return cluster


def _replace(replicas: tuple[int, ...], old: int, new: int) -> tuple[int, ...]:
    return tuple(new if broker == old else broker for broker in replicas)


def _planned(index: int, number: int, partition: _Partition, target: tuple[int, ...], cr: int = 0) -> PlannedMove:
    return PlannedMove(cr, index, number, partition.replicas, target, partition.size, partition.write_rate)


def small_sizes(rng: random.Random) -> float:
    return rng.lognormvariate(math.log(20 * MiB), 1.0)


def rebalance(seed: int, sizes: SizeDraw, name: str, *, moves: int = 600, hot_share: float = 0.03,
              partitions: int = 3000) -> Scenario:
    """12 brokers; one replica of each chosen partition goes to another broker."""
    rng = random.Random(seed)
    brokers = range(12)
    cluster = _cluster(rng, brokers, partitions, sizes, hot_share)
    planned = []
    for index, number in enumerate(rng.sample(range(len(cluster)), moves)):
        partition = cluster[number]
        old = rng.choice(partition.replicas)
        new = rng.choice([b for b in brokers if b not in partition.replicas])
        planned.append(_planned(index, number, partition, _replace(partition.replicas, old, new)))
    return Scenario(name, len(brokers), tuple(planned), (Order.LARGEST_FIRST,))


def add_brokers(seed: int) -> Scenario:
    """9 brokers grow to 12: a quarter of all replicas move to the three new brokers, evenly."""
    rng = random.Random(seed)
    cluster = _cluster(rng, range(9), 1600, pareto_sizes, 0.03)
    planned = []
    for index, number in enumerate(rng.sample(range(len(cluster)), 1200)):
        partition = cluster[number]
        new = 9 + index % 3
        planned.append(_planned(index, number, partition, _replace(partition.replicas, rng.choice(partition.replicas),
                                                                   new)))
    return Scenario("add 3 brokers to 9 (pareto)", 12, tuple(planned), (Order.LARGEST_FIRST,))


def drain_broker(seed: int) -> Scenario:
    """12 brokers; every replica on broker 0 moves to another broker (the leader sends, wherever it is)."""
    rng = random.Random(seed)
    brokers = range(12)
    cluster = _cluster(rng, brokers, 2400, lognormal_sizes, 0.03)
    planned: list[PlannedMove] = []
    for number, partition in enumerate(cluster):
        if 0 not in partition.replicas:
            continue
        new = rng.choice([b for b in brokers if b not in partition.replicas])
        planned.append(_planned(len(planned), number, partition, _replace(partition.replicas, 0, new)))
    return Scenario("drain broker 0 of 12 (lognormal)", 12, tuple(planned), (Order.LARGEST_FIRST,))


def whole_partition_moves(seed: int) -> Scenario:
    """12 brokers; each chosen partition moves all three replicas to three other brokers (three flows per move)."""
    rng = random.Random(seed)
    brokers = range(12)
    cluster = _cluster(rng, brokers, 3000, lognormal_sizes, 0.03)
    planned = []
    for index, number in enumerate(rng.sample(range(len(cluster)), 300)):
        partition = cluster[number]
        target = tuple(rng.sample([b for b in brokers if b not in partition.replicas], 3))
        planned.append(_planned(index, number, partition, target))
    return Scenario(
        "whole-partition moves, 3 new replicas each (kpo: Incremental)",
        12,
        tuple(planned),
        (Order.LARGEST_FIRST,),
        incremental=True,
    )


def three_crs(seed: int) -> Scenario:
    """Three PartitionReassignments at once, AsGiven, SmallestFirst and LargestFirst, 200 moves each."""
    single = rebalance(seed, lognormal_sizes, "three CRs", moves=600)
    planned = [
        PlannedMove(index // 200, index % 200, move.partition, move.current, move.target, move.size, move.write_rate)
        for index, move in enumerate(single.moves)
    ]
    orders = (Order.AS_GIVEN, Order.SMALLEST_FIRST, Order.LARGEST_FIRST)
    return Scenario("three CRs (AsGiven, SmallestFirst, LargestFirst)", 12, tuple(planned), orders)


def all_scenarios(seed: int) -> list[Scenario]:
    return [
        rebalance(seed, lognormal_sizes, "rebalance 12 brokers (lognormal)"),
        rebalance(seed + 1, pareto_sizes, "rebalance 12 brokers (pareto)"),
        rebalance(seed + 2, lognormal_sizes, "rebalance, 10 % hot partitions", hot_share=0.10),
        add_brokers(seed + 3),
        drain_broker(seed + 4),
        whole_partition_moves(seed + 5),
        three_crs(seed + 6),
        rebalance(seed + 7, small_sizes, "rebalance, 3000 small partitions (20 MiB median)", moves=3000,
                  partitions=6000),
    ]
