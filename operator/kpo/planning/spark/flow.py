"""Maximum flow on the broker graph (Dinic's algorithm), for handing leadership on along chains of brokers.

A broker with too many leaders can only hand one to a broker that holds a follower of one of its partitions. When no
such broker has room, leadership must travel along a chain: the overloaded broker hands a partition to a broker that
is in balance, which hands another partition on to an underloaded broker. Which chains exist is a maximum-flow
question on a graph of brokers (an edge ``g -> t`` carries as many leaders as there are partitions led by ``g`` with a
follower on ``t``), small enough -- at most a few hundred nodes -- to solve exactly on the driver.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping


class _Network:
    def __init__(self) -> None:
        self.head: dict[object, list[int]] = {}
        self.to: list[object] = []
        self.cap: list[int] = []

    def add(self, u: object, v: object, capacity: int) -> int:
        for node in (u, v):
            self.head.setdefault(node, [])
        self.head[u].append(len(self.to))
        self.to.append(v)
        self.cap.append(capacity)
        self.head[v].append(len(self.to))
        self.to.append(u)
        self.cap.append(0)
        return len(self.to) - 2

    def _levels(self, source: object, sink: object) -> dict[object, int] | None:
        level = {source: 0}
        queue = deque([source])
        while queue:
            u = queue.popleft()
            for e in self.head[u]:
                v = self.to[e]
                if self.cap[e] > 0 and v not in level:
                    level[v] = level[u] + 1
                    queue.append(v)
        return level if sink in level else None

    def _push(self, u: object, sink: object, limit: int, level: dict[object, int], cursor: dict[object, int]) -> int:
        if u == sink:
            return limit
        edges = self.head[u]
        while cursor[u] < len(edges):
            e = edges[cursor[u]]
            v = self.to[e]
            if self.cap[e] > 0 and level.get(v) == level[u] + 1:
                pushed = self._push(v, sink, min(limit, self.cap[e]), level, cursor)
                if pushed:
                    self.cap[e] -= pushed
                    self.cap[e ^ 1] += pushed
                    return pushed
            cursor[u] += 1
        return 0

    def max_flow(self, source: object, sink: object) -> int:
        if source not in self.head or sink not in self.head:
            return 0
        total = 0
        while (level := self._levels(source, sink)) is not None:
            cursor = dict.fromkeys(self.head, 0)
            while pushed := self._push(source, sink, 1 << 62, level, cursor):
                total += pushed
        return total


def handovers(give: Mapping[int, int], take: Mapping[int, int], links: Mapping[tuple[int, int], int],
              ) -> dict[tuple[int, int], int]:
    """How many leaderships to pass along each link ``(from, to)``: as many as possible from the brokers in ``give``
    (up to their count) to those in ``take`` (up to theirs), through any brokers in between.

    Chains are at most as long as the graph allows; paths found in breadth-first order are the shortest, so leadership
    changes hands as few times as possible.
    """
    net = _Network()
    source, sink = ("source",), ("sink",)
    # Edges in a fixed order: the flow found depends on it, and the plan must not depend on how Spark listed them.
    for b, n in sorted(give.items()):
        if n > 0:
            net.add(source, b, n)
    for b, n in sorted(take.items()):
        if n > 0:
            net.add(b, sink, n)
    arcs = {pair: net.add(pair[0], pair[1], n) for pair, n in sorted(links.items()) if n > 0 and pair[0] != pair[1]}
    net.max_flow(source, sink)
    flows = {pair: links[pair] - net.cap[e] for pair, e in arcs.items()}
    return _cancel_cycles({pair: f for pair, f in flows.items() if f > 0})


def _cancel_cycles(flows: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """Drop flow that goes both ways between two brokers: it would swap leaders for nothing."""
    out = dict(flows)
    for a, b in flows:
        back = out.get((b, a), 0)
        if a < b and back and out.get((a, b), 0):
            common = min(out[(a, b)], back)
            out[(a, b)] -= common
            out[(b, a)] -= common
    return {pair: f for pair, f in out.items() if f > 0}
