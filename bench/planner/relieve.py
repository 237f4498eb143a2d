"""The capacity-relief bench (issue 30): kpo's RelieveCapacity plan against a full Rebalance plan of kpo on the same
cluster, and against the least any relief moves.

``make bench-relieve`` (or ``python -m bench.planner.relieve [--scenarios a,b] [--results FILE]``). The question a
platform team asks (Cruise Control's users in CC#2228): when some disks pass 80 %, how much must move to bring every
disk under it, and how much does a full rebalance move instead, for what fullest disk after?

Both plans are kpo's own planning job through the local backend (spark-submit in local mode, the operator's
defaults), on the same input; both are scored here by the same code. A dir's use after a plan is its file system's
use before, less the bytes of the replicas that leave it, plus those that arrive. A Rebalance plan names no dir for a
new replica: it is placed as Kafka places one, in the broker's dir holding the fewest partitions. The lower bound is
the excess over the threshold of every dir above it (each must shed at least that much).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.planner.run import _children_cpu, cache_dir, machine, update_results
from kpo.domain.plan_contract import BrokerInfo, DirSpace, Goal, PartitionRecord, PlanRequest
from kpo.planning.spark.runner import LocalSparkConfig, LocalSparkRunner
from kpo.planning.spark.workdir import write_input

RESULTS = Path(__file__).with_name("RESULTS.md")
SECTION = "relieve"
THRESHOLD = 0.8


@dataclass(frozen=True)
class ReliefScenario:
    name: str
    title: str
    brokers: int
    racks: int
    dirs: int
    partitions: int
    #: How much more likely a replica is to sit in dir 0, 1, ... (JBOD filled unevenly).
    weights: tuple[float, ...]
    #: Brokers that take this many times more replicas than the others (a hot spot: new topics landed there).
    hot: tuple[int, ...]
    hot_factor: float
    #: The mean use of the cluster's dirs before the plan.
    fill: float
    seed: int = 30


SCENARIOS = (
    ReliefScenario("relieve-24x3", "24 brokers x 3 dirs in 3 racks, 30k partitions RF 3, dirs filled 5:3:2, brokers "
                   "1 and 9 hot (x1.6), 60 % mean use", 24, 3, 3, 30_000, (5, 3, 2), (1, 9), 1.6, 0.6),
    ReliefScenario("relieve-48x4", "48 brokers x 4 dirs in 3 racks, 100k partitions RF 3, dirs filled 4:2:2:1, "
                   "brokers 1, 2, 17 hot (x1.5), 55 % mean use", 48, 3, 4, 100_000, (4, 2, 2, 1), (1, 2, 17), 1.5,
                   0.55),
)


def _dirs(n: int) -> tuple[str, ...]:
    return tuple(f"/var/lib/kafka/data-{i}" for i in range(n))


def generate(s: ReliefScenario, folder: Path) -> Path:
    """The scenario's snapshot with a RelieveCapacity request (cached: a pure function of the scenario). Every dir
    is its own disk of one size, chosen so that the cluster's mean use is ``fill``; the replicas stay rack-aware."""
    if (folder / "request.json").exists():
        return folder
    rng = random.Random(s.seed)
    dirs = _dirs(s.dirs)
    rack = {b: f"rack-{b % s.racks}" for b in range(1, s.brokers + 1)}
    weight = {b: s.hot_factor if b in s.hot else 1.0 for b in rack}
    records, used = [], defaultdict(int)
    for p in range(s.partitions):
        racks = rng.sample(sorted(set(rack.values())), 3)
        replicas = tuple(rng.choices([b for b in rack if rack[b] == r], [weight[b] for b in rack if rack[b] == r])[0]
                         for r in racks)
        size = int(rng.paretovariate(1.5) * 50_000_000)
        placed = tuple(rng.choices(dirs, weights=s.weights)[0] for _ in replicas)
        for b, d in zip(replicas, placed, strict=True):
            used[(b, d)] += size
        records.append(PartitionRecord(topic=f"topic-{p // 100}", partition=p % 100, replicas=replicas,
                                       leader=replicas[0], isr=replicas, size_bytes=size, log_dirs=placed))
    total = int(sum(used.values()) / (len(rack) * s.dirs) / s.fill)
    brokers = [BrokerInfo(id=b, rack=rack[b], log_dirs=dirs, capacity=tuple(
        DirSpace(log_dir=d, total_bytes=total, usable_bytes=max(total - used[(b, d)], 0)) for d in dirs))
        for b in rack]
    return write_input(folder, PlanRequest(goal=Goal.RELIEVE_CAPACITY, threshold=THRESHOLD), brokers, records)


@dataclass(frozen=True)
class Score:
    bytes_moved: int
    replicas_moved: int
    fullest_dir: float  # the fullest dir's use after the plan, of its capacity
    dirs_above: int  # dirs above the threshold after the plan
    fullest_broker: float  # the fullest broker's use after, of its capacity


def score(folder: Path, plan_file: Path) -> tuple[Score, Score, int]:
    """The plan's score, the cluster's as it is (nothing moved), and the lower bound."""
    brokers = json.loads((folder / "brokers.json").read_text())
    total = {(b["id"], c["logDir"]): c["totalBytes"] for b in brokers for c in b["capacity"]}
    used = {(b["id"], c["logDir"]): c["totalBytes"] - c["usableBytes"] for b in brokers for c in b["capacity"]}
    count: dict[tuple[int, str], int] = defaultdict(int)
    before: dict[tuple[str, int], tuple[list[int], list[str], int]] = {}
    for line in (folder / "partitions" / "part-00000.json").open():
        r = json.loads(line)
        before[(r["topic"], r["partition"])] = (r["replicas"], r["log_dirs"], r["size_bytes"])
        for b, d in zip(r["replicas"], r["log_dirs"], strict=True):
            count[(b, d)] += 1
    start = _measure(total, used, 0, 0)
    least = sum(max(u - int(total[k] * THRESHOLD), 0) for k, u in used.items())
    moved = replicas = 0
    for entry in json.loads(plan_file.read_text())["partitions"]:
        old, old_dirs, size = before[(entry["topic"], entry["partition"])]
        where = dict(zip(old, old_dirs, strict=True))
        for b, named in zip(entry["replicas"], entry["log_dirs"], strict=True):
            if b in where and named in ("any", where[b]):
                continue
            # A new replica with no dir named goes where Kafka puts one: the broker's dir with the fewest partitions.
            d = named if named != "any" else min((k[1] for k in total if k[0] == b), key=lambda x: (count[(b, x)], x))
            if b in where:
                used[(b, where[b])] -= size
                count[(b, where[b])] -= 1
            used[(b, d)] += size
            count[(b, d)] += 1
            moved, replicas = moved + size, replicas + 1
        for b in set(old) - set(entry["replicas"]):
            used[(b, where[b])] -= size
            count[(b, where[b])] -= 1
    return _measure(total, used, moved, replicas), start, least


def _measure(total: dict[tuple[int, str], int], used: dict[tuple[int, str], int], moved: int, replicas: int) -> Score:
    per_broker_used: dict[int, int] = defaultdict(int)
    per_broker_total: dict[int, int] = defaultdict(int)
    for (b, d), t in total.items():
        per_broker_used[b] += used[(b, d)]
        per_broker_total[b] += t
    return Score(moved, replicas, max(used[k] / total[k] for k in total),
                 sum(1 for k in total if used[k] > total[k] * THRESHOLD),
                 max(per_broker_used[b] / per_broker_total[b] for b in per_broker_total))


@dataclass(frozen=True)
class Row:
    scenario: ReliefScenario
    replicas: int
    lower_bound: int
    start: Score
    relief: Score
    rebalance: Score
    relief_wall: float
    relief_cpu: float
    relief_peak: int
    rebalance_wall: float
    rebalance_cpu: float
    rebalance_peak: int
    relief_note: str


def _plan(folder: Path, out: Path) -> tuple[float, float, int, str]:
    before = _children_cpu()
    outcome = LocalSparkRunner(LocalSparkConfig()).run(folder, out)
    if not outcome.ok or outcome.metrics is None:
        raise RuntimeError(f"kpo failed on {folder}: {outcome.message}")
    return outcome.wall_seconds, _children_cpu() - before, outcome.peak_rss_bytes, outcome.metrics.message


def run(s: ReliefScenario) -> Row:
    base = cache_dir() / "relieve" / s.name
    folder = generate(s, base / "input")
    rebalance_in = base / "rebalance-input"
    if not (rebalance_in / "request.json").exists():
        rebalance_in.mkdir(parents=True, exist_ok=True)
        for name in ("brokers.json", "partitions"):
            target = rebalance_in / name
            if not target.exists():
                target.symlink_to(folder / name)
        (rebalance_in / "request.json").write_text(PlanRequest(goal=Goal.REBALANCE).to_json())
    relief_wall, relief_cpu, relief_peak, note = _plan(folder, base / "relieve-out")
    rebalance_wall, rebalance_cpu, rebalance_peak, _ = _plan(rebalance_in, base / "rebalance-out")
    relief, start, least = score(folder, base / "relieve-out" / "plan.json")
    rebalance, _, _ = score(folder, base / "rebalance-out" / "plan.json")
    return Row(s, sum(1 for _ in (folder / "partitions" / "part-00000.json").open()) * 3, least, start, relief,
               rebalance, relief_wall, relief_cpu, relief_peak, rebalance_wall, rebalance_cpu, rebalance_peak, note)


def table(rows: Sequence[Row]) -> str:
    lines = [f"| scenario | replicas | dirs above {THRESHOLD:.0%} before / fullest dir | bytes moved / lower bound "
             "(RelieveCapacity / Rebalance) | replicas moved | fullest dir after | dirs above after | fullest broker "
             "after | wall s (CPU s) | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lb = max(r.lower_bound, 1)
        lines.append(
            f"| {r.scenario.title} | {r.replicas} | {r.start.dirs_above} / {r.start.fullest_dir:.3f} | "
            f"{r.relief.bytes_moved / lb:.3f} / {r.rebalance.bytes_moved / lb:.3f} (LB {r.lower_bound / 2**30:.1f} "
            f"GiB) | {r.relief.replicas_moved} / {r.rebalance.replicas_moved} | {r.relief.fullest_dir:.3f} / "
            f"{r.rebalance.fullest_dir:.3f} | {r.relief.dirs_above} / {r.rebalance.dirs_above} | "
            f"{r.relief.fullest_broker:.3f} / {r.rebalance.fullest_broker:.3f} | {r.relief_wall:.1f} "
            f"({r.relief_cpu:.1f}) / {r.rebalance_wall:.1f} ({r.rebalance_cpu:.1f}) | "
            f"{r.relief_peak / 2**20:.0f} / {r.rebalance_peak / 2**20:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.planner.relieve", description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", default=",".join(s.name for s in SCENARIOS))
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args(argv)
    by_name = {s.name: s for s in SCENARIOS}
    chosen = [by_name[n] for n in args.scenarios.split(",") if n]
    header = f"Capacity-relief bench, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine()}"
    print(header, file=sys.stderr)
    rows = []
    for s in chosen:
        print(f"{s.name} ...", file=sys.stderr)
        rows.append(run(s))
        print(table(rows[-1:]).splitlines()[-1], file=sys.stderr)
        if rows[-1].relief_note:
            print(f"  RelieveCapacity: {rows[-1].relief_note}", file=sys.stderr)
    notes = "".join(f"\n- {r.scenario.name}, RelieveCapacity's note: {r.relief_note}" for r in rows if r.relief_note)
    text = (f"{header}\n\nEach cell: RelieveCapacity (threshold {THRESHOLD:.0%}) / a full Rebalance (tolerance 5 %), "
            f"both kpo's plans on the same input.\n\n{table(rows)}\n{notes}\n")
    print(text)
    if args.results is not None:
        update_results(args.results, SECTION, "## Capacity relief (issue 30)\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
