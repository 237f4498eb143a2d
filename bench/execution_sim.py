"""Execution benchmark: kpo's scheduler against all-at-once and batch-with-barrier on the same move sets.

Three ways to run one reassignment, each simulated with the fluid model of `bench.fluid`:

- **kpo**: `kpo.domain.scheduling.moves_to_start`, the operator's own decision function, called at t = 0 and at the
  first poll after every completion, with `maxMovesPerBroker` as given, each CR's order, and the partitions' write
  rates and the throttle for its catch-up guard; in the whole-partition scenario kpo uses the Incremental strategy.
  A second kpo column runs it without write rates (all reported as 0), which switches the guard off;
- **all at once**: what kafka-reassign-partitions does, every move submitted at t = 0;
- **batch with barrier**: the usual wrapper script, batches in spec order, the next batch submitted only once the
  whole previous one has finished. A batch holds brokers x maxMovesPerBroker / 2 moves, as many as kpo keeps in
  flight when every move touches two brokers, so both run at the same concurrency.

Each is reported as total time divided by the floor (max over brokers of bytes in or out, divided by the throttle),
next to the stronger floor that also counts the bytes written while moving. Run it with `make bench-exec`; it is
seeded and deterministic (only the wall-time column varies).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from bench.fluid import SimMove, SimResult, Starter, floor, floor_with_writes, simulate
from bench.scenarios import THROTTLE, PlannedMove, Scenario, all_scenarios
from kpo.domain.model import TopicPartition
from kpo.domain.scheduling import Execution, Limits, Move, Owner, SchedulerConfig, moves_to_start


def sim_move(planned: PlannedMove, index: int, one_at_a_time: bool = False) -> SimMove:
    receivers = tuple(broker for broker in planned.target if broker not in planned.current)
    return SimMove(index, planned.current[0], receivers, planned.size, planned.write_rate, one_at_a_time)


def kpo_starter(
    scenario: Scenario, max_moves_per_broker: int, catch_up_headroom: float = 2.0, knows_write_rates: bool = True
) -> Starter:
    """Feeds the scheduler the pending and running moves on every call, as the operator does.

    Without `knows_write_rates` every move reports a write rate of 0, so the catch-up guard never holds one back.
    """
    owners = [
        Owner(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=cr), "bench", f"cr-{cr}")
        for cr in range(len(scenario.orders))
    ]
    limits = Limits(max_moves_per_broker=max_moves_per_broker)
    executions = {
        owner: Execution(order=order, limits=limits, throttle=scenario.throttle)
        for owner, order in zip(owners, scenario.orders, strict=True)
    }
    config = SchedulerConfig(catch_up_headroom=catch_up_headroom)
    sim_of: dict[Move, SimMove] = {}
    for index, planned in enumerate(scenario.moves):
        move = Move(
            owner=owners[planned.cr],
            partition=TopicPartition(f"topic-{planned.cr}", planned.partition),
            current=planned.current,
            target=planned.target,
            size_bytes=round(planned.size),
            position=planned.position,
            write_rate=planned.write_rate if knows_write_rates else 0.0,
        )
        sim_of[move] = sim_move(planned, index, scenario.incremental)
    domain_of = {sim.index: move for move, sim in sim_of.items()}
    pending = list(sim_of)

    def start(now: float, finished: list[SimMove], running: list[SimMove]) -> list[SimMove]:
        nonlocal pending
        chosen = moves_to_start(pending, [domain_of[move.index] for move in running], executions, config)
        started = set(chosen)
        pending = [move for move in pending if move not in started]
        return [sim_of[move] for move in chosen]

    return start


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


def run(scenario: Scenario, max_moves_per_broker: int, poll_interval: float) -> dict[str, str]:
    began = time.perf_counter()
    moves = [sim_move(planned, index) for index, planned in enumerate(scenario.moves)]
    bound = floor(moves, scenario.throttle)
    with_writes = floor_with_writes(moves, scenario.throttle)
    kpo = simulate(kpo_starter(scenario, max_moves_per_broker), scenario.throttle, poll_interval)
    blind = simulate(kpo_starter(scenario, max_moves_per_broker, knows_write_rates=False), scenario.throttle,
                     poll_interval)
    everything = simulate(all_at_once_starter(moves), scenario.throttle, poll_interval)
    batch = max(1, scenario.brokers * max_moves_per_broker // 2)
    batches = simulate(barrier_starter(moves, batch), scenario.throttle, poll_interval)
    return {
        "scenario": scenario.name,
        "moves": str(len(moves)),
        "floor": f"{bound / 3600:.2f} h",
        "floor incl. writes / floor": f"{with_writes / bound:.3f}",
        "kpo / floor": ratio(kpo, bound),
        "kpo / floor incl. writes": ratio(kpo, with_writes),
        "kpo, write rates unknown / floor": ratio(blind, bound),
        "all-at-once / floor": ratio(everything, bound),
        "barrier / floor": ratio(batches, bound),
        "simulation wall time": f"{time.perf_counter() - began:.1f} s",
    }


def sweep(scenario: Scenario, limits: Sequence[int], poll_interval: float) -> dict[str, str]:
    """kpo alone at several maxMovesPerBroker values."""
    moves = [sim_move(planned, index) for index, planned in enumerate(scenario.moves)]
    bound = floor(moves, scenario.throttle)
    row = {"scenario": scenario.name}
    for limit in limits:
        row[f"maxMovesPerBroker {limit}"] = ratio(
            simulate(kpo_starter(scenario, limit), scenario.throttle, poll_interval), bound
        )
    return row


def markdown(rows: list[dict[str, str]]) -> str:
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row[column] for column in header) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seed", type=int, default=6794)
    parser.add_argument("--max-moves-per-broker", type=int, default=4)
    parser.add_argument("--poll-interval", type=float, default=2.0, help="seconds between completion checks")
    parser.add_argument("--sweep", type=int, nargs="*", default=[1, 2, 4, 8], help="maxMovesPerBroker values for kpo")
    parser.add_argument("--scenario", help="run only the scenarios whose name contains this")
    args = parser.parse_args()
    scenarios = [s for s in all_scenarios(args.seed) if args.scenario is None or args.scenario in s.name]
    print(
        f"Throttle {THROTTLE / 2**20:g} MiB/s per broker in and out; kpo maxMovesPerBroker={args.max_moves_per_broker};"
        f" barrier batches of brokers x {args.max_moves_per_broker} / 2 moves; completions seen every"
        f" {args.poll_interval:g} s; seed {args.seed}.\n"
    )
    print(markdown([run(scenario, args.max_moves_per_broker, args.poll_interval) for scenario in scenarios]))
    if args.sweep:
        print("\nkpo / floor by maxMovesPerBroker:\n")
        print(markdown([sweep(scenario, args.sweep, args.poll_interval) for scenario in scenarios]))


if __name__ == "__main__":
    main()
