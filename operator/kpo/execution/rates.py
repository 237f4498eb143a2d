"""Bytes/s written to each partition, from the growth of its largest replica between two looks at the cluster.

The scheduler needs them: a new replica catches up only while its share of the throttle exceeds the partition's write
rate, and a slot refilled at once would starve a hot partition for ever. Every look at the cluster reads the replica
sizes anyway (DescribeLogDirs), so this costs no extra call. After a restart the first look knows no rates yet.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping

from kpo.domain.model import TopicPartition


class WriteRates:
    def __init__(self) -> None:
        self._last: dict[TopicPartition, tuple[int, float]] = {}
        self._rates: dict[TopicPartition, float] = {}
        self._lock = threading.Lock()

    def observe(self, sizes: Mapping[TopicPartition, int], now: float | None = None) -> dict[TopicPartition, float]:
        at = time.monotonic() if now is None else now
        with self._lock:
            for tp, size in sizes.items():
                before = self._last.get(tp)
                if before is not None and at - before[1] >= 1.0:
                    # Retention and compaction shrink logs: a shrinking partition is not read as negative writes.
                    self._rates[tp] = max(0.0, (size - before[0]) / (at - before[1]))
                if before is None or at - before[1] >= 1.0:
                    self._last[tp] = (size, at)
            # Partitions no look covers any more are forgotten: the memory stays the size of the work.
            for gone in [tp for tp in self._last if tp not in sizes]:
                del self._last[gone]
                self._rates.pop(gone, None)
            return {tp: self._rates[tp] for tp in sizes if tp in self._rates}

    def rate(self, tp: TopicPartition) -> float:
        with self._lock:
            return self._rates.get(tp, 0.0)

    def of(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, float]:
        with self._lock:
            return {tp: self._rates[tp] for tp in partitions if tp in self._rates}
