"""How long a reassignment will take: the estimate a proposal states before anything moves.

kpo runs its own scheduler (:func:`kpo.domain.scheduling.moves_to_start`) against the fluid model of throttled
replication (:mod:`kpo.domain.fluid`), as ``make bench-exec`` does, with the resource's throttle, order and limits and
the operator's poll interval: the estimate is when the model's last move ends. It needs a throttle: without one kpo
does not know the brokers' bandwidth, and says so rather than guess. It assumes the resource has the cluster to
itself, that nobody writes to the partitions while they move (write rates are not known before the moves start),
that each move copies the partition's size as DescribeLogDirs reports it now, and that Kafka holds every broker to
the throttle at every instant. Beside it, ``at_throttle_seconds`` is the busiest broker's bytes in or out over the
throttle: what the bytes alone take at the throttle.

Neither is a bound on the real run. Writes, other traffic and the poll make it longer; Kafka's windowed quota can
make it much shorter (:mod:`kpo.domain.quota`). The model cannot follow the quota's window, so kpo does not pretend
to: it finds whether some broker's round of fetches, with the moves its scheduler keeps in flight together, carries
more than the throttle passes in the quota window, and if so says in the note that Kafka will likely finish sooner
(``burst``). Otherwise runs measured on the test bed took 0.99-1.14 x the estimate.

Simulating costs about moves x events; past :data:`MAX_SIMULATED` moves only the bytes over the throttle are stated,
so a proposal of 20,000 partitions costs no more than a bounded time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from kpo.domain.fluid import SimMove, Starter, Watcher, floor, simulate
from kpo.domain.incremental import kip455_submissions
from kpo.domain.model import ClusterView, Replicas, TopicPartition
from kpo.domain.quota import Burst, burst
from kpo.domain.refill import Elapsed, RefillPolicy, Work, next_probe
from kpo.domain.scheduling import Execution, Move, Owner, SchedulerConfig, moves_to_start

#: Moves above which only the bytes over the throttle are stated (the simulation's cost grows with moves x events).
MAX_SIMULATED = 1000

DEFAULT_CONFIG = SchedulerConfig()


@dataclass(frozen=True)
class Estimate:
    """Seconds the moves should take in the model (None when kpo cannot say), the busiest broker's bytes over the
    throttle, what the estimate assumes, and the broker whose fetches Kafka's quota will let through faster."""

    seconds: float | None
    at_throttle_seconds: float | None
    note: str = ""
    burst: Burst | None = None


@dataclass(frozen=True)
class SchedulerRun:
    """kpo's scheduler as the fluid model's starter: what to start when moves end, and what is left to start."""

    start: Starter
    waiting: Callable[[], int]
    sim_moves: Sequence[SimMove]


def planned_moves(targets: Mapping[TopicPartition, Replicas], basis: Mapping[TopicPartition, Replicas],
                  view: ClusterView, owner: Owner) -> list[Move]:
    """The moves of a proposal as the scheduler will see them: from the replicas of the snapshot (``basis``, or the
    cluster's now) to the target, the partition's size as DescribeLogDirs reports it, from its current leader."""
    moves = []
    for position, (tp, target) in enumerate(targets.items()):
        state = view.partitions.get(tp)
        current = basis.get(tp) or (state.replicas if state is not None else ())
        leader = state.leader if state is not None and state.leader >= 0 else None
        moves.append(Move(owner=owner, partition=tp, current=tuple(current), target=tuple(target),
                          size_bytes=view.partition_size(tp), position=position, leader=leader))
    return moves


def chain(move: Move, incremental: bool) -> list[Move]:
    """The moves Kafka is asked for, in order: one, or one per KIP-455 step of an Incremental move (KAFKA-6794)."""
    targets = kip455_submissions(move.current, move.target) if incremental else [move.target]
    steps, current = [], move.current
    for target in targets:
        steps.append(Move(owner=move.owner, partition=move.partition, current=current, target=target,
                          size_bytes=move.size_bytes, position=move.position, leader=move.leader,
                          write_rate=move.write_rate))
        current = target
    return steps


def as_sim_move(move: Move, index: int) -> SimMove:
    """The model's view of a move: from its sender to its receivers, its size and its write rate."""
    sender = move.sender if move.sender is not None else -1
    receivers = tuple(b for b in move.target if b not in move.current)
    return SimMove(index, sender, receivers, float(move.size_bytes), move.write_rate)


def scheduler_run(chains: Sequence[Sequence[Move]], executions: Mapping[Owner, Execution], config: SchedulerConfig,
                  sim_move: Callable[[Move, int], SimMove] = as_sim_move) -> SchedulerRun:
    """Feed the scheduler the pending and running moves on every call, as the operator does: only the first step of
    each chain is pending at first, and the next one once the previous has ended. ``sim_move`` gives the model's
    view of each step (the bench's knows write rates the scheduler is not told)."""
    sim_of: dict[Move, SimMove] = {}
    later: dict[Move, Move] = {}
    pending: list[Move] = []
    for steps in chains:
        for step in steps:
            sim_of[step] = sim_move(step, len(sim_of))
        later.update(pairwise(steps))
        if steps:
            pending.append(steps[0])
    move_of = {sim.index: move for move, sim in sim_of.items()}
    in_flight: set[Move] = set()

    def start(now: float, finished: list[SimMove], running: list[SimMove]) -> list[SimMove]:
        nonlocal pending
        in_flight.difference_update(move_of[sim.index] for sim in finished)
        pending += [later[move_of[sim.index]] for sim in finished if move_of[sim.index] in later]
        chosen = moves_to_start(pending, [move_of[sim.index] for sim in running], executions, config)
        started = set(chosen)
        in_flight.update(started)
        pending = [move for move in pending if move not in started]
        return [sim_of[move] for move in chosen]

    def waiting() -> int:
        # What a freed slot could start: moves not started yet, and steps in flight that are not their chain's last.
        return len(pending) + sum(1 for move in in_flight if move in later)

    return SchedulerRun(start, waiting, list(sim_of.values()))


def refill_watcher(run: SchedulerRun, policy: RefillPolicy | None, throttle: float, pass_seconds: float
                   ) -> Watcher | None:
    """The operator's refill between polls (:func:`kpo.domain.refill.next_probe`) as the model's watcher."""
    if policy is None or policy.first_probe <= 0:
        return None

    def watch(since_poll: float, since_pass: float, quiet: int, left: dict[int, float]) -> float | None:
        work = Work(in_flight={TopicPartition("sim", index): bytes_left for index, bytes_left in left.items()},
                    waiting=run.waiting(), throttle=throttle)
        return next_probe(work, Elapsed(since_poll, since_pass, pass_seconds, quiet), policy)

    return watch


def estimate(moves: Sequence[Move], execution: Execution, *, poll_interval: float, incremental: bool = False,
             config: SchedulerConfig = DEFAULT_CONFIG, refill: RefillPolicy | None = None,
             pass_seconds: float = 0.1, limit: int = MAX_SIMULATED) -> Estimate:
    """How long ``moves`` (all of one resource) should take under ``execution`` (see the module text); with
    ``refill``, a slot freed between polls is refilled as the operator does, one pass (``pass_seconds``) later."""
    copying = [move for move in moves if move.receivers]
    if not copying:
        return Estimate(0.0, 0.0, "nothing to copy: only the order of replica lists changes")
    throttle = execution.throttle
    if not throttle:
        return Estimate(None, None, "no estimate without execution.throttle: kpo does not know the brokers' "
                        "replication bandwidth")
    chains = [chain(move, incremental) for move in copying]
    run = scheduler_run(chains, {copying[0].owner: execution}, config)
    at_throttle = floor(run.sim_moves, throttle)
    if len(run.sim_moves) > limit:
        # Without the simulation kpo does not know which moves run together: all of them at once is the most.
        found = burst(run.sim_moves, throttle)
        return Estimate(None, at_throttle, _with_burst(
            f"{len(run.sim_moves)} moves: more than the {limit} kpo simulates; only the bytes over the throttle are "
            "stated", found, may=True), found)
    worst: list[Burst] = []

    def start(now: float, finished: list[SimMove], running: list[SimMove]) -> list[SimMove]:
        # The moves in flight together after each start: the rounds of fetches Kafka will see.
        chosen = run.start(now, finished, running)
        found = burst([*running, *chosen], throttle)
        if found is not None and (not worst or found.fetch_bytes - found.window_bytes
                                  > worst[0].fetch_bytes - worst[0].window_bytes):
            worst[:] = [found]
        return chosen

    result = simulate(start, throttle, poll_interval, refill_watcher(run, refill, throttle, pass_seconds),
                      pass_seconds)
    found = worst[0] if worst else None
    if result.makespan == float("inf"):
        return Estimate(None, at_throttle, f"{result.stalled} move(s) can never catch up in the model", found)
    return Estimate(result.makespan, at_throttle, _with_burst(
        f"at {throttle:.0f} B/s per broker and direction, polling every {poll_interval:g} s, with no writes during "
        "the moves", found, may=False), found)


def _with_burst(note: str, found: Burst | None, *, may: bool) -> str:
    if found is None:
        return note
    likely = "may" if may else "will likely"
    return f"{note}; Kafka {likely} finish sooner than the throttle alone allows: {found.describe()}"


def dir_estimate(moves: Mapping[tuple[TopicPartition, int], str], sizes: Mapping[tuple[TopicPartition, int], int],
                 rate: float | None) -> Estimate:
    """How long copies between the log dirs of their brokers (the disk goals) should take: each broker copies at
    most ``rate`` bytes/s in all (``replica.alter.log.dirs.io.max.bytes.per.second`` caps the broker, not a
    replica), brokers copy side by side, so the busiest broker's bytes over the rate. Writes meanwhile are not
    counted."""
    if not moves:
        return Estimate(0.0, 0.0, "nothing to copy")
    if not rate:
        return Estimate(None, None, "no estimate without execution.logDirThrottle: kpo does not know how fast the "
                        "brokers' disks copy")
    per_broker: dict[int, int] = {}
    for tp, broker in moves:
        per_broker[broker] = per_broker.get(broker, 0) + sizes.get((tp, broker), 0)
    busiest = max(per_broker, key=lambda b: (per_broker[b], -b))
    seconds = per_broker[busiest] / rate
    return Estimate(seconds, seconds, f"copies between log dirs at execution.logDirThrottle; broker {busiest} copies "
                    f"the most ({per_broker[busiest]} bytes); writes meanwhile not counted")


@dataclass(frozen=True)
class MixedMoves:
    """A proposal that moves replicas between brokers and between the dirs of a broker (RelieveCapacity): the
    partitions whose replica list changes (Kafka's reassignment, at execution.throttle), the copies of replicas that
    stay on their broker into a dir the plan names (AlterReplicaLogDirs, at execution.logDirThrottle), and the new
    replicas the plan gives a dir: their broker is told the dir before the move and creates them there."""

    reassigned: dict[TopicPartition, Replicas]
    dir_copies: dict[tuple[TopicPartition, int], str]
    landing: dict[tuple[TopicPartition, int], str]


def split_moves(targets: Mapping[TopicPartition, Replicas], basis: Mapping[TopicPartition, Replicas],
                log_dirs: Mapping[TopicPartition, tuple[str, ...]]) -> MixedMoves:
    """Split a proposal's targets (and the dirs they name) into reassignments, copies between dirs and new replicas
    with a named dir (see :class:`MixedMoves`)."""
    reassigned = {tp: tuple(r) for tp, r in targets.items() if tuple(r) != tuple(basis.get(tp, r))}
    dir_copies: dict[tuple[TopicPartition, int], str] = {}
    landing: dict[tuple[TopicPartition, int], str] = {}
    for tp, dirs in log_dirs.items():
        before = set(basis.get(tp, targets.get(tp, ())))
        for broker, wanted in zip(targets.get(tp, ()), dirs, strict=False):
            if wanted != "any":
                (dir_copies if broker in before else landing)[(tp, broker)] = wanted
    return MixedMoves(reassigned, dir_copies, landing)


def combined_estimate(replicas: Estimate, dirs: Estimate, *, landing: int = 0) -> Estimate:
    """Reassignments and copies between dirs of one proposal: they share the move limits (maxMoves), and a new
    replica's copy into its named dir follows its reassignment, so the time stated is the sum (the two may overlap:
    Kafka copies between brokers and within a broker side by side); the bytes at the throttles, the longer of the
    two (the two throttles are separate)."""
    note = f"between brokers: {replicas.note}; between the dirs of a broker: {dirs.note}"
    if landing:
        note += (f"; {landing} new replica(s) created in the dir the plan names (told to their broker before the "
                 "move): no copy between dirs after")
    seconds = None if replicas.seconds is None or dirs.seconds is None else replicas.seconds + dirs.seconds
    at_throttle = None if replicas.at_throttle_seconds is None or dirs.at_throttle_seconds is None \
        else max(replicas.at_throttle_seconds, dirs.at_throttle_seconds)
    return Estimate(seconds, at_throttle, note, replicas.burst)
