"""Execution benchmark: kpo's scheduler against all-at-once and batch-with-barrier on the same move sets.

Three ways to run one reassignment, each simulated with the fluid model of `kpo.domain.fluid`:

- **kpo**: `kpo.domain.scheduling.moves_to_start`, the operator's own decision function, called at t = 0, at the
  first poll after every completion, and between polls as the operator's refill does: after every poll and pass,
  `kpo.domain.refill.next_probe` (the operator's own decision too) says when to look again, and a look that finds
  a move ended refills one pass later (`--pass-seconds`). With `maxMovesPerBroker` as given, each CR's order, and
  the partitions' write rates and the throttle for its catch-up guard; in the whole-partition scenario kpo uses the
  Incremental strategy. A second kpo column runs it with polls only (no looks between polls, the operator before
  refill between polls), a third without write rates (all reported as 0), which switches the guard off. Limits are
  the operator's defaults unless given: 5 moves per broker, 2 per broker and direction. The simulator runs the
  looks for all CRs together (one watcher), where the operator runs one per CR;
- **all at once**: what kafka-reassign-partitions does, every move submitted at t = 0;
- **batch with barrier**: the usual wrapper script, batches in spec order, the next batch submitted only once the
  whole previous one has finished. A batch holds as many moves as kpo keeps in flight at most when every move
  copies from one broker to one other (brokers x min(per-direction limit, per-broker limit / 2)), so both run at the
  same concurrency.

Each is reported as total time divided by the floor (max over brokers of bytes in or out, divided by the throttle),
next to the stronger floor that also counts the bytes written while moving. Run it with `make bench-exec`; it is
seeded and deterministic (only the wall-time column varies).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bench.scenarios import THROTTLE, PlannedMove, Scenario, all_scenarios
from kpo.domain.estimate import SchedulerRun, refill_watcher, scheduler_run
from kpo.domain.fluid import SimMove, SimResult, Starter, floor, floor_with_writes, simulate
from kpo.domain.incremental import kip455_submissions
from kpo.domain.model import TopicPartition
from kpo.domain.refill import RefillPolicy
from kpo.domain.scheduling import Execution, Limits, Move, Owner, SchedulerConfig


def sim_move(planned: PlannedMove, index: int) -> SimMove:
    receivers = tuple(broker for broker in planned.target if broker not in planned.current)
    return SimMove(index, planned.current[0], receivers, planned.size, planned.write_rate)


@dataclass(frozen=True)
class Refill:
    """kpo's refill between polls as the simulator runs it: the operator's policy, and how long one pass takes."""

    policy: RefillPolicy | None
    pass_seconds: float = 0.1


@dataclass
class KpoRunner:
    """kpo in the simulator: the scheduler's starter, and the watcher of its refill between polls."""

    run: SchedulerRun
    throttle: float

    def simulate(self, throttle: float, poll_interval: float, refill: Refill) -> SimResult:
        watch = refill_watcher(self.run, refill.policy, self.throttle, refill.pass_seconds)
        return simulate(self.run.start, throttle, poll_interval, watch, refill.pass_seconds)


def kpo_starter(
    scenario: Scenario, limits: Limits, catch_up_headroom: float = 2.0, knows_write_rates: bool = True
) -> KpoRunner:
    """Feeds the scheduler the pending and running moves on every call, as the operator does
    (:func:`kpo.domain.estimate.scheduler_run`, which the operator's estimates use too).

    With the Incremental strategy a partition's move is the chain of its KIP-455 submissions (`kip455_submissions`),
    and only the next step of each chain is pending, once the previous one has ended: the operator asks the scheduler
    for one step at a time too. Without `knows_write_rates` every move reports a write rate of 0, so the catch-up guard
    never holds one back (the model still writes at the scenario's rates).
    """
    owners = [
        Owner(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=cr), "bench", f"cr-{cr}")
        for cr in range(len(scenario.orders))
    ]
    executions = {
        owner: Execution(order=order, limits=limits, throttle=scenario.throttle)
        for owner, order in zip(owners, scenario.orders, strict=True)
    }
    config = SchedulerConfig(catch_up_headroom=catch_up_headroom)
    planned_of: dict[Move, PlannedMove] = {}
    chains: list[list[Move]] = []
    for planned in scenario.moves:
        submissions = kip455_submissions(planned.current, planned.target) if scenario.incremental else [planned.target]
        steps = []
        current = planned.current
        for target in submissions:
            move = Move(
                owner=owners[planned.cr],
                partition=TopicPartition(f"topic-{planned.cr}", planned.partition),
                current=current,
                target=target,
                size_bytes=round(planned.size),
                position=planned.position,
                write_rate=planned.write_rate if knows_write_rates else 0.0,
            )
            planned_of[move] = PlannedMove(planned.cr, planned.position, planned.partition, current, target,
                                           planned.size, planned.write_rate)
            steps.append(move)
            current = target
        chains.append(steps)
    run = scheduler_run(chains, executions, config, lambda move, index: sim_move(planned_of[move], index))
    return KpoRunner(run, scenario.throttle)


def all_at_once_starter(moves: Sequence[SimMove]) -> Starter:
    def start(now: float, finished: list[SimMove], running: list[SimMove]) -> list[SimMove]:
        return list(moves) if now == 0.0 else []

    return start


def barrier_starter(moves: Sequence[SimMove], batch: int) -> Starter:
    batches = [list(moves[i : i + batch]) for i in range(0, len(moves), batch)]

    def start(now: float, finished: list[SimMove], running: list[SimMove]) -> list[SimMove]:
        return batches.pop(0) if batches and not running else []

    return start


def ratio(result: SimResult, bound: float) -> str:
    if math.isinf(result.makespan):
        rest = max(result.finish_times.values(), default=0.0) / bound
        return f"never ends: {result.stalled} moves stall (the rest end at {rest:.2f})"
    return f"{result.makespan / bound:.3f}"


def run(scenario: Scenario, limits: Limits, batch: int, poll_interval: float, refill: Refill) -> dict[str, str]:
    began = time.perf_counter()
    moves = [sim_move(planned, index) for index, planned in enumerate(scenario.moves)]
    bound = floor(moves, scenario.throttle)
    with_writes = floor_with_writes(moves, scenario.throttle)
    kpo = kpo_starter(scenario, limits).simulate(scenario.throttle, poll_interval, refill)
    polls_only = kpo_starter(scenario, limits).simulate(scenario.throttle, poll_interval, Refill(None))
    blind = kpo_starter(scenario, limits, knows_write_rates=False).simulate(scenario.throttle, poll_interval, refill)
    everything = simulate(all_at_once_starter(moves), scenario.throttle, poll_interval)
    batches = simulate(barrier_starter(moves, batch), scenario.throttle, poll_interval)
    return {
        "scenario": scenario.name,
        "moves": str(len(moves)),
        "floor": f"{bound / 3600:.2f} h",
        "floor incl. writes / floor": f"{with_writes / bound:.3f}",
        "kpo / floor": ratio(kpo, bound),
        "kpo / floor incl. writes": ratio(kpo, with_writes),
        "kpo, polls only / floor": ratio(polls_only, bound),
        "kpo, write rates unknown / floor": ratio(blind, bound),
        "all-at-once / floor": ratio(everything, bound),
        "barrier / floor": ratio(batches, bound),
        "simulation wall time": f"{time.perf_counter() - began:.1f} s",
    }


def sweep(scenario: Scenario, settings: Sequence[tuple[str, Limits]], poll_interval: float, refill: Refill
          ) -> dict[str, str]:
    """kpo alone under several limits."""
    moves = [sim_move(planned, index) for index, planned in enumerate(scenario.moves)]
    bound = floor(moves, scenario.throttle)
    row = {"scenario": scenario.name}
    for name, limits in settings:
        row[name] = ratio(kpo_starter(scenario, limits).simulate(scenario.throttle, poll_interval, refill), bound)
    return row


def markdown(rows: list[dict[str, str]]) -> str:
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row[column] for column in header) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seed", type=int, default=6794)
    # The operator's defaults (kpo.config.ExecutionDefaults): 5 per broker, 2 per broker and direction.
    parser.add_argument("--max-moves-per-broker", type=int, default=5)
    parser.add_argument("--max-moves-per-broker-direction", type=int, default=2)
    parser.add_argument("--poll-interval", type=float, default=2.0, help="seconds between polls (operator ticks)")
    # The operator's defaults (kpo.config.RefillConfig): first look 0.25 s after a pass, 1.5 x longer per quiet look.
    parser.add_argument("--first-probe", type=float, default=0.25,
                        help="seconds from a pass to kpo's first look between polls; 0: polls only")
    parser.add_argument("--probe-growth", type=float, default=1.5)
    parser.add_argument("--pass-seconds", type=float, default=0.1,
                        help="how long one pass of the operator (observe, decide, act) takes after a look")
    parser.add_argument("--sweep", type=int, nargs="*", default=[1, 2, 4, 8],
                        help="limits for kpo alone, each run once per broker and once per broker and direction")
    parser.add_argument("--scenario", help="run only the scenarios whose name contains this")
    args = parser.parse_args()
    scenarios = [s for s in all_scenarios(args.seed) if args.scenario is None or args.scenario in s.name]
    limits = Limits(max_moves_per_broker=args.max_moves_per_broker,
                    max_moves_per_broker_direction=args.max_moves_per_broker_direction)
    # Every move copies out of one broker direction and into another, so at most brokers x limit moves run at once
    # under the direction limit (two directions per broker, two per move), and brokers x limit / 2 under the other.
    per_broker = min(args.max_moves_per_broker_direction, args.max_moves_per_broker / 2)
    print(
        f"Throttle {THROTTLE / 2**20:g} MiB/s per broker in and out; kpo maxMovesPerBroker={args.max_moves_per_broker},"
        f" maxMovesPerBrokerDirection={args.max_moves_per_broker_direction}; barrier batches of as many moves as kpo"
        f" runs at most; polls every {args.poll_interval:g} s; kpo looks between polls from {args.first_probe:g} s"
        f" after a pass (x{args.probe_growth:g} per quiet look), a pass taking {args.pass_seconds:g} s; seed"
        f" {args.seed}.\n"
    )
    policy = RefillPolicy(args.poll_interval, first_probe=args.first_probe, growth=args.probe_growth) \
        if args.first_probe > 0 else None
    refill = Refill(policy, args.pass_seconds)
    rows = [run(scenario, limits, max(1, int(scenario.brokers * per_broker)), args.poll_interval, refill)
            for scenario in scenarios]
    print(markdown(rows))
    if args.sweep:
        settings = [(f"maxMovesPerBroker {n}", Limits(max_moves_per_broker=n)) for n in args.sweep]
        settings += [(f"maxMovesPerBrokerDirection {n}", Limits(max_moves_per_broker_direction=n)) for n in args.sweep]
        print("\nkpo / floor under one limit at a time:\n")
        print(markdown([sweep(scenario, settings, args.poll_interval, refill) for scenario in scenarios]))


if __name__ == "__main__":
    main()
