"""A Kafka cluster's balance score, from what DescribeCluster, DescribeTopics and DescribeLogDirs say, without Spark.

The operator samples every configured cluster now and then (:mod:`kpo.background.balance_sampler`) and exports the
score as Prometheus gauges, so users can alert on imbalance before they plan a rebalance. The numbers are the ones a
``Rebalance`` plan reports for the cluster before it moves anything:

- per live broker: replica bytes on disk (DescribeLogDirs, moves between log dirs not counted twice), replicas and
  leaders (DescribeTopics), a live broker with nothing counting as zero; each as max/mean and min/mean over the live
  brokers (1.0 when the mean is zero: nothing to balance). Bytes count only the brokers that answered DescribeLogDirs:
  a broker whose answer is missing is not an empty broker.
- rack spread violations: partitions whose replicas sit in fewer racks than ``min(replicas, racks)``, ``racks``
  counting the racks of live brokers; only partitions whose replicas all sit on live brokers with a rack, and none
  at all with fewer than two racks. This is the planner's rack-violation rule
  (:func:`kpo.planning.spark.quality._crowded` before a change), in plain Python.

Beside the balance, the sample keeps each log dir's capacity as its broker reports it (DescribeLogDirs v4+, KIP-827:
total and usable bytes of the dir's file system), so users can alert on a dir filling up: platform teams page on full
disks, not on balance scores. :func:`broker_used_ratio` folds a broker's dirs into one share.

Replicas on brokers that are not live count for no broker. Memory stays per broker: a :class:`BalanceTally` takes
partitions one at a time (the sampler reads them in batches and drops each batch), so a cluster of any size costs a
few numbers per broker once the sample is done.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kpo.domain.model import DirCapacity, Replicas


@dataclass(frozen=True)
class Spread:
    """The highest and lowest broker relative to the mean of the live brokers."""

    max_over_mean: float = 1.0
    min_over_mean: float = 1.0


def spread(values: Iterable[float]) -> Spread:
    found = list(values)
    if not found:
        return Spread()
    mean = sum(found) / len(found)
    if mean <= 0:
        return Spread()
    return Spread(max_over_mean=max(found) / mean, min_over_mean=min(found) / mean)


@dataclass(frozen=True)
class BalanceScore:
    brokers: int  # live brokers the score is over
    partitions: int  # partitions counted (those of the topics sampled)
    bytes: Spread
    bytes_brokers: int  # live brokers whose bytes were measured (answered DescribeLogDirs)
    replicas: Spread
    leaders: Spread
    racks: int  # racks of live brokers
    rack_violations: int
    #: Each live broker's online log dirs and their capacity, by (broker, dir); empty when the brokers report none.
    dirs: Mapping[tuple[int, str], DirCapacity] = field(default_factory=dict)


class BalanceTally:
    """Folds partitions into per-broker counts and the rack-violation count, one partition at a time."""

    def __init__(self, racks: Mapping[int, str | None]) -> None:
        """``racks``: every live broker and its rack (None: no rack)."""
        self._racks = dict(racks)
        self._racks_alive = len({r for r in self._racks.values() if r is not None})
        self.partitions = 0
        self.replicas: Counter[int] = Counter()
        self.leaders: Counter[int] = Counter()
        self.rack_violations = 0
        self.bytes: Counter[int] = Counter()
        self.dirs: dict[tuple[int, str], DirCapacity] = {}

    def add_partition(self, replicas: Replicas, leader: int) -> None:
        self.partitions += 1
        for broker in replicas:
            if broker in self._racks:
                self.replicas[broker] += 1
        if leader in self._racks:
            self.leaders[leader] += 1
        if self._crowded(replicas):
            self.rack_violations += 1

    def add_bytes(self, broker: int, size: int) -> None:
        self.bytes[broker] += size

    def add_dirs(self, capacity: Mapping[tuple[int, str], DirCapacity]) -> None:
        """Dir capacities, by (broker, dir), from a DescribeLogDirs of no topic."""
        self.dirs.update(capacity)

    def _crowded(self, replicas: Replicas) -> bool:
        if self._racks_alive < 2 or not replicas:
            return False
        racks = [self._racks.get(b) for b in replicas]
        if any(r is None for r in racks):
            return False  # a replica on a dead broker, or on one without a rack: its rack is not known
        return len(set(racks)) < min(len(replicas), self._racks_alive)

    def score(self, measured: Iterable[int]) -> BalanceScore:
        """The score, with ``measured`` the live brokers whose bytes were read in full."""
        live = sorted(self._racks)
        answered = set(measured)
        with_bytes = [b for b in live if b in answered]
        return BalanceScore(
            brokers=len(live), partitions=self.partitions,
            bytes=spread(self.bytes[b] for b in with_bytes), bytes_brokers=len(with_bytes),
            replicas=spread(self.replicas[b] for b in live), leaders=spread(self.leaders[b] for b in live),
            racks=self._racks_alive, rack_violations=self.rack_violations,
            dirs={key: c for key, c in sorted(self.dirs.items()) if key[0] in self._racks})


def broker_used_ratio(dirs: Mapping[tuple[int, str], DirCapacity], broker: int) -> float | None:
    """The share of a broker's log dir space in use: used over total bytes, summed over its dirs (``None``: none
    reported). Dirs on one file system report it twice, which leaves the share as it is."""
    mine = [c for (b, _dir), c in dirs.items() if b == broker]
    total = sum(c.total for c in mine)
    return None if total <= 0 else min(1.0, max(0.0, sum(c.total - c.usable for c in mine) / total))


def balance_score(racks: Mapping[int, str | None], partitions: Iterable[tuple[Replicas, int]],
                  broker_bytes: Mapping[int, int]) -> BalanceScore:
    """The score of live brokers ``racks`` (id -> rack), ``partitions`` as (replicas, leader; -1 for none) and the
    bytes of each live broker that answered DescribeLogDirs."""
    tally = BalanceTally(racks)
    for replicas, leader in partitions:
        tally.add_partition(replicas, leader)
    for broker, size in broker_bytes.items():
        tally.add_bytes(broker, size)
    return tally.score(broker_bytes)
