"""The disk-plan bench (issue 30): kpo's RemoveDisks and RebalanceDisks plans against the least any plan moves and a
plain largest-first greedy, on the same synthetic JBOD clusters.

``make bench-disks`` (or ``python -m bench.planner.disks [--scenarios a,b] [--results FILE]``). Kafka has no planner
for the log dirs of existing replicas (it puts a new replica in the dir holding the fewest partitions, and
kafka-reassign-partitions moves a replica between dirs only where told), so the comparators are:

- the **lower bound**: the bytes any plan reaching the goal must copy, as the job states it (a drain: every selected
  byte in the drained dirs; a rebalance: per broker, the more of what its dirs hold above the band and what they
  lack below it);
- a **greedy** a user would script, in plain Python (``--greedy``, a process of its own so its time and memory are
  its own): a drain hands the drained dirs' replicas, largest first, each to the broker's emptiest remaining dir; a
  rebalance moves, while some dir of a broker is outside the band, the largest replica of its fullest dir that
  narrows the gap to its emptiest dir.

Both plans are scored here by the same code: bytes moved, and per broker the fullest and emptiest dir over the
broker's mean (the worst broker's). kpo runs as the operator runs it: the real planning job through the local
backend (spark-submit in local mode, the operator's defaults); its wall time includes the Spark start, its planning
time does not. Peak memory is the resident size of the whole process tree, sampled.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
import time
from bisect import bisect_right, insort
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.planner.run import _children_cpu, _measured, cache_dir, machine, update_results
from kpo.domain.plan_contract import BrokerInfo, Goal, LogDirRef, PartitionRecord, PlanRequest
from kpo.planning.spark.runner import LocalSparkConfig, LocalSparkRunner
from kpo.planning.spark.workdir import write_input

RESULTS = Path(__file__).with_name("RESULTS.md")
SECTION = "disks"
#: A replica: (topic, partition, broker) -> (dir, bytes).
Replica = tuple[str, int, int]


@dataclass(frozen=True)
class DiskScenario:
    name: str
    title: str
    brokers: int
    dirs: int
    partitions: int
    request: PlanRequest
    #: How much more likely a replica is to sit in dir 0, 1, ... (JBOD filled unevenly).
    weights: tuple[float, ...]
    seed: int = 30


def _dirs(n: int) -> tuple[str, ...]:
    return tuple(f"/var/lib/kafka/data-{i}" for i in range(n))


SCENARIOS = (
    DiskScenario("drain-12x4", "RemoveDisks: data-0 of brokers 1-3, 12 brokers x 4 dirs, 30k partitions RF 3",
                 12, 4, 30_000, PlanRequest(goal=Goal.REMOVE_DISKS, disks=tuple(
                     LogDirRef(broker=b, log_dir=_dirs(4)[0]) for b in (1, 2, 3))), (1, 1, 1, 1)),
    DiskScenario("rebalance-12x4", "RebalanceDisks, tolerance 5 %, 12 brokers x 4 dirs (filled 5:2:2:1), 30k "
                 "partitions RF 3", 12, 4, 30_000, PlanRequest(goal=Goal.REBALANCE_DISKS, tolerance=0.05),
                 (5, 2, 2, 1)),
    DiskScenario("rebalance-48x4", "RebalanceDisks, tolerance 5 %, 48 brokers x 4 dirs (filled 5:2:2:1), 150k "
                 "partitions RF 3", 48, 4, 150_000, PlanRequest(goal=Goal.REBALANCE_DISKS, tolerance=0.05),
                 (5, 2, 2, 1)),
)


def generate(s: DiskScenario, folder: Path) -> Path:
    """The scenario's input in the job's storage contract (cached: a pure function of the scenario)."""
    if (folder / "request.json").exists():
        return folder
    rng = random.Random(s.seed)
    dirs = _dirs(s.dirs)
    brokers = [BrokerInfo(id=b, log_dirs=dirs) for b in range(1, s.brokers + 1)]
    records = []
    for p in range(s.partitions):
        replicas = tuple(rng.sample(range(1, s.brokers + 1), 3))
        records.append(PartitionRecord(
            topic=f"topic-{p // 100}", partition=p % 100, replicas=replicas, leader=replicas[0], isr=replicas,
            size_bytes=int(rng.paretovariate(1.5) * 50_000_000),
            log_dirs=tuple(rng.choices(dirs, weights=s.weights)[0] for _ in replicas)))
    return write_input(folder, s.request, brokers, records)


def read_cluster(folder: Path) -> tuple[PlanRequest, dict[int, tuple[str, ...]], dict[Replica, tuple[str, int]]]:
    request = PlanRequest.from_json((folder / "request.json").read_text())
    brokers = {b["id"]: tuple(b["logDirs"]) for b in json.loads((folder / "brokers.json").read_text())}
    replicas: dict[Replica, tuple[str, int]] = {}
    for line in (folder / "partitions" / "part-00000.json").open():
        r = json.loads(line)
        for broker, log_dir in zip(r["replicas"], r["log_dirs"], strict=True):
            replicas[(r["topic"], r["partition"], broker)] = (log_dir, r["size_bytes"])
    return request, brokers, replicas


def greedy(folder: Path) -> dict[Replica, str]:
    """The greedy plan (see the module text): replica -> its new dir."""
    request, brokers, replicas = read_cluster(folder)
    by_dir: dict[tuple[int, str], list[tuple[int, Replica]]] = defaultdict(list)
    for key, (log_dir, size) in replicas.items():
        by_dir[(key[2], log_dir)].append((size, key))
    used = {(b, d): sum(size for size, _ in by_dir[(b, d)]) for b, dirs in brokers.items() for d in dirs}
    moves: dict[Replica, str] = {}
    if request.goal is Goal.REMOVE_DISKS:
        drained = {(d.broker, d.log_dir) for d in request.disks}
        for broker in sorted({b for b, _ in drained}):
            heap = [(used[(broker, d)], d) for d in brokers[broker] if (broker, d) not in drained]
            heapq.heapify(heap)
            leaving = sorted((r for d in brokers[broker] if (broker, d) in drained for r in by_dir[(broker, d)]),
                             reverse=True)
            for size, key in leaving:
                held, target = heapq.heappop(heap)
                moves[key] = target
                heapq.heappush(heap, (held + size, target))
        return moves
    band = request.tolerance
    for broker, dirs in brokers.items():
        if len(dirs) < 2:
            continue
        sizes = {d: sorted(by_dir[(broker, d)]) for d in dirs}
        load = {d: used[(broker, d)] for d in dirs}
        mean = sum(load.values()) / len(dirs)
        while True:
            high, low = max(dirs, key=lambda d: load[d]), min(dirs, key=lambda d: load[d])
            if load[high] <= mean * (1 + band) and load[low] >= mean * (1 - band):
                break
            # The largest replica of the fullest dir that still narrows the gap (at most half of it).
            i = bisect_right(sizes[high], ((load[high] - load[low]) // 2, ("~", sys.maxsize, sys.maxsize))) - 1
            if i < 0:
                break
            size, key = sizes[high].pop(i)
            insort(sizes[low], (size, key))
            load[high] -= size
            load[low] += size
            moves[key] = low
    return moves


@dataclass(frozen=True)
class Score:
    bytes_moved: int
    replicas_moved: int
    worst_high: float  # the fullest dir of the worst broker, over its broker's mean dir
    worst_low: float
    band_reached: bool


def score(folder: Path, moves: Mapping[Replica, str]) -> Score:
    request, brokers, replicas = read_cluster(folder)
    load: dict[tuple[int, str], int] = {(b, d): 0 for b, dirs in brokers.items() for d in dirs}
    moved = 0
    for key, (log_dir, size) in replicas.items():
        now = moves.get(key, log_dir)
        load[(key[2], now)] += size
        if now != log_dir:
            moved += size
    drained = {(d.broker, d.log_dir) for d in request.disks}
    concerned = {b for b, _ in drained} if drained else {b for b, dirs in brokers.items() if len(dirs) > 1}
    high, low = 1.0, 1.0
    for broker in concerned:
        kept = [load[(broker, d)] for d in brokers[broker] if (broker, d) not in drained]
        mean = sum(kept) / len(kept)
        high, low = max(high, max(kept) / mean), min(low, min(kept) / mean)
    left = sum(load[k] for k in drained)
    reached = left == 0 if drained else high - 1 <= request.tolerance and 1 - low <= request.tolerance
    return Score(moved, sum(1 for k, d in moves.items() if d != replicas[k][0]), high, low, reached)


def kpo_moves(plan_file: Path) -> dict[Replica, str]:
    plan = json.loads(plan_file.read_text())
    return {(e["topic"], e["partition"], broker): d for e in plan["partitions"]
            for broker, d in zip(e["replicas"], e["log_dirs"], strict=True) if d != "any"}


@dataclass(frozen=True)
class Row:
    scenario: DiskScenario
    replicas: int
    lower_bound: int
    kpo: Score
    greedy: Score
    kpo_wall: float
    kpo_planning: float
    kpo_cpu: float
    kpo_peak: int
    greedy_wall: float
    greedy_peak: int


def run(s: DiskScenario) -> Row:
    folder = generate(s, cache_dir() / "disks" / s.name / "input")
    out = cache_dir() / "disks" / s.name / "kpo"
    before = _children_cpu()
    outcome = LocalSparkRunner(LocalSparkConfig()).run(folder, out)
    cpu = _children_cpu() - before
    if not outcome.ok or outcome.metrics is None:
        raise RuntimeError(f"kpo failed on {s.name}: {outcome.message}")
    answer = cache_dir() / "disks" / s.name / "greedy.json"
    _, greedy_wall, greedy_peak = _measured([sys.executable, "-m", "bench.planner.disks", "--greedy", str(folder),
                                             "--out", str(answer)])
    theirs = {(t, int(p), int(b)): d for t, p, b, d in json.loads(answer.read_text())}
    return Row(s, sum(1 for _ in (folder / "partitions" / "part-00000.json").open()) * 3,
               outcome.metrics.lower_bound_bytes, score(folder, kpo_moves(out / "plan.json")), score(folder, theirs),
               outcome.wall_seconds, outcome.metrics.planning_seconds, cpu, outcome.peak_rss_bytes, greedy_wall,
               greedy_peak)


def table(rows: Sequence[Row]) -> str:
    lines = ["| scenario | replicas | bytes moved / lower bound (kpo / greedy) | replicas moved (kpo / greedy) | "
             "worst broker: fullest dir / mean (kpo / greedy) | emptiest dir / mean | goal reached | kpo wall s "
             "(planning s, CPU s) | greedy s | peak RSS MB (kpo / greedy) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lb = max(r.lower_bound, 1)
        lines.append(
            f"| {r.scenario.title} | {r.replicas} | {r.kpo.bytes_moved / lb:.3f} / {r.greedy.bytes_moved / lb:.3f} "
            f"(LB {r.lower_bound / 2**30:.1f} GiB) | {r.kpo.replicas_moved} / {r.greedy.replicas_moved} | "
            f"{r.kpo.worst_high:.3f} / {r.greedy.worst_high:.3f} | {r.kpo.worst_low:.3f} / {r.greedy.worst_low:.3f} "
            f"| {'yes' if r.kpo.band_reached else 'no'} / {'yes' if r.greedy.band_reached else 'no'} | "
            f"{r.kpo_wall:.1f} ({r.kpo_planning:.1f}, {r.kpo_cpu:.1f}) | {r.greedy_wall:.1f} | "
            f"{r.kpo_peak / 2**20:.0f} / {r.greedy_peak / 2**20:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.planner.disks", description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", default=",".join(s.name for s in SCENARIOS))
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument("--greedy", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.greedy is not None:
        started = time.monotonic()
        moves = greedy(args.greedy)
        args.out.write_text(json.dumps([[*k, d] for k, d in moves.items()]))
        print(json.dumps({"seconds": time.monotonic() - started}))
        return 0
    by_name = {s.name: s for s in SCENARIOS}
    chosen = [by_name[n] for n in args.scenarios.split(",") if n]
    header = f"Disk-plan bench, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine()}"
    print(header, file=sys.stderr)
    rows = []
    for s in chosen:
        print(f"{s.name} ...", file=sys.stderr)
        rows.append(run(s))
        print(table(rows[-1:]).splitlines()[-1], file=sys.stderr)
    text = f"{header}\n\nEach cell: kpo / the greedy of bench/planner/disks.py.\n\n{table(rows)}\n"
    print(text)
    if args.results is not None:
        update_results(args.results, SECTION, "## Disk plans (issue 30)\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
