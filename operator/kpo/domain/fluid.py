"""A fluid model of throttled Kafka replica movement, for comparing ways to execute a reassignment.

The bench (``make bench-exec``) compares schedules with it, and the operator estimates how long a proposal will take
with it (:mod:`kpo.domain.estimate`), so the figure a user approves comes from the model the bench validates.

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
  A runner may also keep looking between polls (a `Watcher`, kpo's refill between polls): a look that finds a move
  ended starts more `refill_latency` seconds later (the time one pass of the runner takes). Polls stay on their grid.
  An Incremental move (KAFKA-6794) is a chain of one-replica moves the runner starts one after the other.

Not modelled: retention deleting old segments while a replica catches up (it only shortens the copy), leader changes
during a move, disk contention beyond the throttle, the bytes in-sync followers replicate anyway (outside the
throttle), and the time Kafka needs to accept a submission (milliseconds against the minutes a move takes).

The floor a schedule is measured against is the bound from the bytes alone: every byte a broker sends or receives
passes its throttle, so no schedule ends before max over brokers of max(bytes in, bytes out) / throttle. That is a
floor of this model, not of Kafka: Kafka's quota is a rate over a window of 11 s that lets a fetch of up to 1 MiB
per partition through before it charges it, and forgets what exceeds the window, so a real run with many
partitions in flight can beat it (:mod:`kpo.domain.quota`; docs/api.md, "What the estimate promises"). Counting the
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

#: Called after every poll and every refill: (seconds since the poll began, seconds since the last pass, looks since
#: that pass that found no move ended, bytes left of each running move by index); returns the seconds until the next
#: look, or None to stop looking until the next poll.
Watcher = Callable[[float, float, int, dict[int, float]], float | None]


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

    def __init__(self, start: Starter, throttle: float, poll_interval: float, watch: Watcher | None = None,
                 refill_latency: float = 0.0) -> None:
        self.start = start
        self.throttle = throttle
        self.poll_interval = poll_interval
        self.watch = watch
        self.refill_latency = refill_latency
        self.poll_began = 0.0
        self.pass_ended = 0.0
        self.quiet_looks = 0
        self.next_look: float | None = None
        self.refill_at: float | None = None
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
        """Report what ended, and start what `start` returns; a runner that watches looks again until the next poll.

        With a watcher the polls run on their grid for as long as moves run (a poll with no move ended starts no
        move, but begins a new round of looks)."""
        self.next_poll = None
        self.next_look = self.refill_at = None
        if self.finished or self.now == 0.0 or self.watch is None:
            self.start_moves()
        if self.watch is not None:
            self.poll_began = self.pass_ended = self.now
            self.quiet_looks = 0
            self.ask()
            if self.running and self.poll_interval > 0:
                self.next_poll = (math.floor(self.now / self.poll_interval + 1e-9) + 1) * self.poll_interval

    def ask(self) -> None:
        assert self.watch is not None
        left: dict[int, float] = {}
        for flow in self.flows:
            left[flow.move.index] = max(left.get(flow.move.index, 0.0), flow.lag)
        delay = self.watch(self.now - self.poll_began, self.now - self.pass_ended, self.quiet_looks, left)
        self.next_look = None if delay is None else self.now + delay

    def look(self) -> None:
        """A look between polls: a move ended means a refill after one pass; otherwise look again later."""
        self.next_look = None
        if self.finished:
            self.refill_at = self.now + self.refill_latency
            return
        self.quiet_looks += 1
        self.ask()

    def refill(self) -> None:
        self.refill_at = None
        self.start_moves()
        self.pass_ended = self.now
        self.quiet_looks = 0
        self.ask()

    def next_event(self) -> float | None:
        due = [t for t in (self.next_poll, self.refill_at, self.next_look) if t is not None]
        return min(due) if due else None

    def fire_due(self) -> None:
        """Polls first, then refills, then looks: each may schedule the others."""
        while (due := self.next_event()) is not None and due <= self.now:
            if self.next_poll is not None and self.next_poll <= self.now:
                self.poll()
            elif self.refill_at is not None and self.refill_at <= self.now:
                self.refill()
            else:
                self.look()

    def start_moves(self) -> None:
        reported, self.finished = self.finished, []
        for move in self.start(self.now, reported, list(self.running.values())):
            self.running[move.index] = move
            self.open_flows[move.index] = len(move.receivers)
            if not move.receivers:  # nothing to copy: the controller completes it at once
                self.end(move)
                continue
            self.flows.extend(_Flow(move, receiver, lag=move.size) for receiver in move.receivers)

    def skip_idle_polls(self, next_end: float) -> None:
        """With a watcher, polls before the last one ahead of the next flow end change nothing (no move ends, and a
        poll's looks end before the next poll): go straight to that one. Only saves simulation time."""
        if self.watch is None or self.next_poll is None or self.next_look is not None or self.refill_at is not None:
            return
        if self.finished or math.isinf(next_end) or self.poll_interval <= 0:
            return
        last_before_end = math.floor((self.now + next_end) / self.poll_interval) * self.poll_interval
        self.next_poll = max(self.next_poll, last_before_end)

    def advance(self) -> bool:
        """Move time to the next flow end or poll; False when no flow can ever end (the rest stall)."""
        _max_min_rates(self.flows, self.throttle)
        to_finish = [
            flow.lag / (flow.rate - flow.move.write_rate) if flow.rate > flow.move.write_rate else math.inf
            for flow in self.flows
        ]
        step = min(to_finish)
        if math.isinf(step) and not self.finished:
            return False  # no flow can end, and a poll or look only starts moves once one has
        self.skip_idle_polls(step)
        if (due := self.next_event()) is not None:
            step = min(step, due - self.now)
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


def simulate(start: Starter, throttle: float, poll_interval: float, watch: Watcher | None = None,
             refill_latency: float = 0.0) -> SimResult:
    """Run moves as `start` decides until it starts no more and every move has ended, or nothing can progress.

    `start` is called at t = 0 and then at the first poll tick (a multiple of `poll_interval`) after any move ended,
    and, with a `watch`, `refill_latency` after a look between polls that found a move ended. The makespan is the
    time the last move ended.
    """
    run = _Simulation(start, throttle, poll_interval, watch, refill_latency)
    while True:
        run.fire_due()
        if not run.flows:
            due = run.next_event()
            if due is None:
                return SimResult(max(run.finish_times.values(), default=0.0), run.finish_times)
            run.now = max(run.now, due)
        elif not run.advance():
            return SimResult(math.inf, run.finish_times, stalled=len(run.running))
