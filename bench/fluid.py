"""A fluid model of throttled Kafka replica movement, for comparing ways to execute a reassignment.

The model, and why each part is there:

- **Brokers and the throttle.** Every broker has `throttle` bytes/s of outgoing replication bandwidth (Kafka's
  `leader.replication.throttled.rate`) and as much incoming (`follower.replication.throttled.rate`), independent of
  each other. Only the catch-up traffic of moving replicas counts against them; in-sync replicas are not throttled.
- **Flows.** A move of a partition creates one flow per new replica, from the partition's leader (new replicas fetch
  from the leader) to the new replica's broker. Replicas that stay, or are only removed, move no data.
- **Sharing.** At every instant the flows share the brokers' bandwidth max-min fairly: each flow is limited by its
  leader's outgoing and its receiver's incoming capacity, and no flow can get more without taking from one that has
  less. That is what a throttled fetcher serving many partitions does on average (each fetch hands every partition a
  bounded slice), and it is the only assumption about fairness the model makes.
- **Writes during the move.** A partition keeps receiving `write_rate` bytes/s from producers while it moves, so a
  new replica must copy the log it started with plus everything written until it catches up: its lag obeys
  d(lag)/dt = write_rate - rate and the flow ends when the lag reaches zero. A partition written near the throttle
  therefore takes much longer, and when its share of a broker falls below its write rate it makes no progress at all
  (its lag grows) while still using that share; a move of such a partition can stall for good if its broker is shared
  with enough others. The simulation reports that as an infinite time rather than hiding it.
- **A move ends** when all its new replicas have caught up. Whoever runs the moves learns of it at the next poll
  (`poll_interval` seconds: kpo polls ListPartitionReassignments, a script polls --verify), and only then starts more.
  An Incremental move (KAFKA-6794) is a chain of one-replica moves the runner starts one after the other.

Not modelled: retention deleting old segments while a replica catches up (it only shortens the copy), leader changes
during a move, disk contention beyond the throttle, the bytes in-sync followers replicate anyway (outside the
throttle), and the time Kafka needs to accept a submission (milliseconds against the minutes a move takes).

The floor a schedule is measured against is the bound from the bytes alone: every byte a broker sends or receives
passes its throttle, so no schedule ends before max over brokers of max(bytes in, bytes out) / throttle. Counting the
writes gives a stronger bound: a move whose partition is written at w bytes/s copies at least size * T / (T - w)
bytes even if it has its brokers to itself, which `floor_with_writes` sums the same way.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SimMove:
    """One partition to move: data flows from `leader` to each broker in `receivers`."""

    index: int
    leader: int
    receivers: tuple[int, ...]
    size: float
    write_rate: float


@dataclass
class _Flow:
    move: SimMove
    receiver: int
    lag: float
    rate: float = 0.0


@dataclass
class SimResult:
    """When the last move ended (infinite if some never can), and when each one did."""

    makespan: float
    finish_times: dict[int, float] = field(default_factory=dict)
    #: Moves whose new replicas can never catch up, because every flow left is below its partition's write rate.
    stalled: int = 0


#: Called at t = 0 and at every poll after a completion with (now, moves finished since the last call, moves still
#: running); returns the moves to start now.
Starter = Callable[[float, list[SimMove], list[SimMove]], list[SimMove]]


def floor(moves: Sequence[SimMove], throttle: float) -> float:
    """max over brokers of max(bytes in, bytes out) / throttle, from the partitions' sizes alone."""
    return _busiest_broker(moves, throttle, lambda move: move.size)


def floor_with_writes(moves: Sequence[SimMove], throttle: float) -> float:
    """The same bound counting the minimum bytes written during each move: size * T / (T - w)."""
    return _busiest_broker(moves, throttle, lambda move: move.size * throttle / (throttle - move.write_rate))


def _busiest_broker(moves: Sequence[SimMove], throttle: float, bytes_of: Callable[[SimMove], float]) -> float:
    sent: Counter[int] = Counter()
    received: Counter[int] = Counter()
    for move in moves:
        for receiver in move.receivers:
            sent[move.leader] += bytes_of(move)  # type: ignore[assignment]
            received[receiver] += bytes_of(move)  # type: ignore[assignment]
    return max([*sent.values(), *received.values(), 0.0]) / throttle


def _max_min_rates(flows: Sequence[_Flow], throttle: float) -> None:
    """Set every flow's rate to its max-min fair share of the brokers' in and out capacity (progressive filling).

    Flows between the same two brokers get the same share, so the filling works on (leader, receiver) groups.
    """
    groups: dict[tuple[int, int], list[_Flow]] = defaultdict(list)
    for flow in flows:
        groups[(flow.move.leader, flow.receiver)].append(flow)
    remaining: dict[tuple[str, int], float] = {}
    users: Counter[tuple[str, int]] = Counter()
    for (sender, receiver), members in groups.items():
        for resource in (("out", sender), ("in", receiver)):
            remaining.setdefault(resource, throttle)
            users[resource] += len(members)
    unfrozen = set(groups)
    while unfrozen:
        bottleneck, share = min(
            ((resource, remaining[resource] / count) for resource, count in users.items() if count > 0),
            key=lambda item: item[1],
        )
        for key in [key for key in unfrozen if bottleneck in (("out", key[0]), ("in", key[1]))]:
            unfrozen.discard(key)
            for flow in groups[key]:
                flow.rate = share
            for resource in (("out", key[0]), ("in", key[1])):
                remaining[resource] = max(0.0, remaining[resource] - share * len(groups[key]))
                users[resource] -= len(groups[key])


class _Simulation:
    """The state of one run: flows in progress, moves running, and when the next poll happens."""

    def __init__(self, start: Starter, throttle: float, poll_interval: float) -> None:
        self.start = start
        self.throttle = throttle
        self.poll_interval = poll_interval
        self.now = 0.0
        self.flows: list[_Flow] = []
        self.open_flows: Counter[int] = Counter()
        self.running: dict[int, SimMove] = {}
        self.finished: list[SimMove] = []
        self.finish_times: dict[int, float] = {}
        self.next_poll: float | None = 0.0

    def poll_soon(self) -> None:
        if self.next_poll is None:
            interval = self.poll_interval
            tick = math.ceil(self.now / interval) * interval if interval > 0 else self.now
            self.next_poll = max(tick, self.now)

    def end(self, move: SimMove) -> None:
        self.finish_times[move.index] = self.now
        self.finished.append(self.running.pop(move.index))
        self.poll_soon()

    def poll(self) -> None:
        """Report what ended, and start what `start` returns."""
        self.next_poll = None
        reported, self.finished = self.finished, []
        for move in self.start(self.now, reported, list(self.running.values())):
            self.running[move.index] = move
            self.open_flows[move.index] = len(move.receivers)
            if not move.receivers:  # nothing to copy: the controller completes it at once
                self.end(move)
                continue
            self.flows.extend(_Flow(move, receiver, lag=move.size) for receiver in move.receivers)

    def advance(self) -> bool:
        """Move time to the next flow end or poll; False when no flow can ever end (the rest stall)."""
        _max_min_rates(self.flows, self.throttle)
        to_finish = [
            flow.lag / (flow.rate - flow.move.write_rate) if flow.rate > flow.move.write_rate else math.inf
            for flow in self.flows
        ]
        step = min(to_finish)
        if self.next_poll is not None:
            step = min(step, self.next_poll - self.now)
        if math.isinf(step):
            return False
        self.now += step
        still_open: list[_Flow] = []
        for flow, remaining in zip(self.flows, to_finish, strict=True):
            if remaining > step * (1 + 1e-9):
                flow.lag -= (flow.rate - flow.move.write_rate) * step
                still_open.append(flow)
                continue
            index = flow.move.index
            self.open_flows[index] -= 1
            if self.open_flows[index] == 0:
                self.end(flow.move)
        self.flows = still_open
        return True


def simulate(start: Starter, throttle: float, poll_interval: float) -> SimResult:
    """Run moves as `start` decides until it starts no more and every move has ended, or nothing can progress.

    `start` is called at t = 0 and then at the first poll tick (a multiple of `poll_interval`) after any move ended.
    The makespan is the time the last move ended.
    """
    run = _Simulation(start, throttle, poll_interval)
    while True:
        if run.next_poll is not None and run.next_poll <= run.now:
            run.poll()
        if not run.flows:
            if run.next_poll is None:
                return SimResult(max(run.finish_times.values(), default=0.0), run.finish_times)
            run.now = run.next_poll
        elif not run.advance():
            return SimResult(math.inf, run.finish_times, stalled=len(run.running))
