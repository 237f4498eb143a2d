"""The planner bench: kpo's plan and Kafka's own placement on the same synthetic clusters, side by side.

``make bench`` (or ``python -m bench.planner.run --scenarios small|all|name,name``) generates each scenario's cluster
(cached under ``~/.cache/kpo/bench/planner``), runs the real planning job through the local backend (spark-submit in
local mode, as the operator does), runs Kafka's placer (``bench/java/KafkaPlacer.java``, compiled at bench time
against the test bed's Kafka jars and cached) on the same input, scores Kafka's answer with the job's own metrics
code (``kpo.planner.evaluate``), and prints one markdown line per scenario with kpo's figure first and Kafka's second
in every cell.

Planning time for kpo is the job's own time (reading the snapshot to writing the plan; the Spark session start is in
the wall time); for Kafka it is the placement itself (``StripedReplicaPlacer.place`` over all topics), without the
JVM start and file I/O. Peak memory is the resident size of the whole process tree (JVM and Python), sampled.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from kpo.domain.plan_contract import Goal, PlanMetrics, PlanRequest
from kpo.planner.runner import LocalSparkConfig, LocalSparkRunner, tree_rss

REPO = Path(__file__).resolve().parents[2]
JAVA_SOURCE = REPO / "bench" / "java" / "KafkaPlacer.java"


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    brokers: int
    existing: int
    racks: int
    partitions: int
    request: PlanRequest
    skew: float = 0.05
    partitions_per_topic: int = 100
    driver_memory: str = "2g"
    java_heap: str = "1g"

    @property
    def replicas(self) -> int:
        return self.partitions * 3


def _request(goal: Goal, brokers: Sequence[int] = (), tolerance: float = 0.05) -> PlanRequest:
    return PlanRequest(goal=goal, brokers=tuple(brokers), tolerance=tolerance)


SCENARIOS = (
    Scenario("scale-out-12-15", "scale-out 12 -> 15 brokers, 3 racks", 15, 12, 3, 3_000,
             _request(Goal.ADD_BROKERS, (13, 14, 15)), partitions_per_topic=50),
    Scenario("scale-out-100-110", "scale-out 100 -> 110 brokers, 10 racks", 110, 100, 10, 50_000,
             _request(Goal.ADD_BROKERS, range(101, 111))),
    Scenario("remove-1-of-48", "remove 1 of 48 brokers, 6 racks", 48, 48, 6, 100_000,
             _request(Goal.REMOVE_BROKERS, (23,))),
    Scenario("remove-3-of-48", "remove 3 of 48 brokers, 6 racks", 48, 48, 6, 100_000,
             _request(Goal.REMOVE_BROKERS, (10, 23, 36))),
    Scenario("skewed-40-t0.05", "skewed rebalance, 40 brokers, 10 racks", 40, 40, 10, 16_667,
             _request(Goal.REBALANCE, tolerance=0.05), skew=0.15),
    Scenario("skewed-40-t0.10", "skewed rebalance, 40 brokers, 10 racks", 40, 40, 10, 16_667,
             _request(Goal.REBALANCE, tolerance=0.10), skew=0.15),
    Scenario("scale-200-1M", "skewed rebalance, 200 brokers, 10 racks, 1M replicas", 200, 200, 10, 333_334,
             _request(Goal.REBALANCE), skew=0.15, driver_memory="4g", java_heap="2g"),
    Scenario("scale-300-3M", "skewed rebalance, 300 brokers, 10 racks, 3M replicas", 300, 300, 10, 1_000_000,
             _request(Goal.REBALANCE), skew=0.15, driver_memory="8g", java_heap="4g"),
)
SETS = {"small": ("scale-out-12-15", "skewed-40-t0.10"), "all": tuple(s.name for s in SCENARIOS)}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kpo" / "bench" / "planner"


def kafka_libs() -> Path:
    sys.path.insert(0, str(REPO / "testbed"))
    from kpo_testbed.paths import Binaries  # noqa: PLC0415 (the test bed's package is not installed)

    libs = Binaries.from_cache().kafka_libs
    if not libs.is_dir():
        raise SystemExit(f"Kafka jars not found in {libs}: run `make provision` first")
    return libs


def compile_placer(libs: Path) -> Path:
    """javac KafkaPlacer.java once per source and Kafka version; the class folder is cached."""
    digest = hashlib.sha256(JAVA_SOURCE.read_bytes() + str(libs).encode()).hexdigest()[:12]
    classes = cache_dir() / f"kafka-placer-{digest}"
    if not (classes / "KafkaPlacer.class").is_file():
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-cp", f"{libs}/*", "-d", str(classes), str(JAVA_SOURCE)], check=True)
    return classes


def generate(scenarios: Sequence[Scenario]) -> dict[str, Path]:
    """Write every scenario's input once (cached by its parameters), in one Spark session that ends before any
    measured run starts."""
    from bench.planner.generate import ClusterSpec, write_cluster  # noqa: PLC0415 (imports pyspark)

    inputs: dict[str, Path] = {}
    missing: list[tuple[Scenario, ClusterSpec, Path]] = []
    for s in scenarios:
        spec = ClusterSpec(brokers=s.brokers, existing=s.existing, racks=s.racks, partitions=s.partitions,
                           partitions_per_topic=s.partitions_per_topic, skew=s.skew)
        key = hashlib.sha256(repr((spec, s.request.to_json())).encode()).hexdigest()[:12]
        folder = cache_dir() / "inputs" / f"{s.name}-{key}"
        inputs[s.name] = folder
        if not (folder / "partitions" / "_SUCCESS").is_file():
            missing.append((s, spec, folder))
    if missing:
        from kpo.planner.job import session  # noqa: PLC0415

        spark = session("kpo-bench-generate")
        try:
            for s, spec, folder in missing:
                print(f"generating {s.name} ({s.replicas:,} replicas) in {folder}", file=sys.stderr)
                write_cluster(spark, spec, s.request, folder)
        finally:
            spark.stop()
    return inputs


@dataclass(frozen=True)
class Side:
    bytes_over_lb: float
    replicas_over_lb: float
    bytes: float
    replicas: float
    leaders: float
    rack_violations: int
    plan_seconds: float
    wall_seconds: float
    peak_mib: float
    bytes_moved: int
    lower_bound: int


def _side(m: PlanMetrics, plan_seconds: float, wall: float, peak: int) -> Side:
    assert m.balance_after is not None
    return Side(bytes_over_lb=m.bytes_to_move / m.lower_bound_bytes if m.lower_bound_bytes else float("nan"),
                replicas_over_lb=m.replicas_to_move / m.lower_bound_replicas if m.lower_bound_replicas
                else float("nan"),
                bytes=m.balance_after.bytes, replicas=m.balance_after.replicas, leaders=m.balance_after.leaders,
                rack_violations=m.rack_violations_after, plan_seconds=plan_seconds, wall_seconds=wall,
                peak_mib=peak / 2**20, bytes_moved=m.bytes_to_move, lower_bound=m.lower_bound_bytes)


def run_kpo(s: Scenario, folder: Path, out: Path) -> Side:
    runner = LocalSparkRunner(LocalSparkConfig(master="local[2]", driver_memory=s.driver_memory))
    outcome = runner.run(folder, out)
    if not outcome.ok or outcome.metrics is None:
        raise RuntimeError(f"kpo failed on {s.name}: {outcome.message}")
    return _side(outcome.metrics, outcome.metrics.planning_seconds, outcome.wall_seconds, outcome.peak_rss_bytes)


def _measured(command: list[str]) -> tuple[str, float, int]:
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    peak = [0]

    def sample() -> None:
        while process.poll() is None:
            peak[0] = max(peak[0], tree_rss(process.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    sampler.join()
    if process.returncode:
        raise RuntimeError(f"{command[0]} failed: {stderr.decode(errors='replace')[-2000:]}")
    return stdout.decode(), time.monotonic() - started, peak[0]


def run_kafka(s: Scenario, folder: Path, out: Path, classes: Path, libs: Path) -> Side:
    out.mkdir(parents=True, exist_ok=True)
    assignment = out / "kafka-assignment.jsonl"
    stdout, wall, peak = _measured(["java", f"-Xmx{s.java_heap}", "-cp", f"{classes}:{libs}/*", "KafkaPlacer",
                                    str(folder), str(assignment)])
    placed = json.loads(stdout.strip().splitlines()[-1])
    runner = LocalSparkRunner(LocalSparkConfig(master="local[2]", driver_memory=s.driver_memory))
    scored = runner.run(folder, out / "evaluation", module="kpo.planner.evaluate",
                        extra_args=("--assignment", str(assignment)))
    if not scored.ok or scored.metrics is None:
        raise RuntimeError(f"scoring Kafka's placement failed on {s.name}: {scored.message}")
    return _side(scored.metrics, float(placed["placementSeconds"]), wall, peak)


def _cell(kpo: float, kafka: float, digits: int = 3) -> str:
    return f"{kpo:.{digits}f} / {kafka:.{digits}f}"


def table(rows: list[tuple[Scenario, Side, Side]]) -> str:
    head = ("| scenario | replicas | LB bytes (TB) | bytes moved / LB | replicas moved / LB | max/mean bytes "
            "| max/mean replicas | max/mean leaders | rack violations | planning s | wall s | peak MiB |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for s, k, f in rows:
        lines.append(
            f"| {s.title} (tol {s.request.tolerance}) | {s.replicas:,} | {k.lower_bound / 1e12:.2f} "
            f"| {_cell(k.bytes_over_lb, f.bytes_over_lb)} | {_cell(k.replicas_over_lb, f.replicas_over_lb)} "
            f"| {_cell(k.bytes, f.bytes)} | {_cell(k.replicas, f.replicas)} | {_cell(k.leaders, f.leaders)} "
            f"| {k.rack_violations} / {f.rack_violations} | {_cell(k.plan_seconds, f.plan_seconds, 1)} "
            f"| {_cell(k.wall_seconds, f.wall_seconds, 1)} | {k.peak_mib:.0f} / {f.peak_mib:.0f} |")
    return "\n".join(lines)


def machine() -> str:
    cpus = os.cpu_count()
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = float("nan")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{platform.machine()}, {cpus} cores, {mem:.0f} GiB RAM, Python {platform.python_version()}, " \
           f"load average at start {load:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.planner.run", description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", default="all", help="small, all, or a comma-separated list of names: "
                        + ", ".join(s.name for s in SCENARIOS))
    parser.add_argument("--results", type=Path, default=None, help="also write the table (markdown) here")
    args = parser.parse_args(argv)
    names = SETS.get(args.scenarios, tuple(n for n in args.scenarios.split(",") if n))
    by_name = {s.name: s for s in SCENARIOS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {sorted(by_name)}")
    chosen = [by_name[n] for n in names]
    libs = kafka_libs()
    classes = compile_placer(libs)
    inputs = generate(chosen)
    started = datetime.now(UTC)
    header = f"Planner bench, {started:%Y-%m-%d %H:%M} UTC, {machine()}"
    print(header, file=sys.stderr)
    rows: list[tuple[Scenario, Side, Side]] = []
    for s in chosen:
        out = cache_dir() / "runs" / s.name
        print(f"{s.name}: kpo ...", file=sys.stderr)
        kpo = run_kpo(s, inputs[s.name], out / "kpo")
        print(f"{s.name}: Kafka's placer ...", file=sys.stderr)
        kafka = run_kafka(s, inputs[s.name], out / "kafka", classes, libs)
        rows.append((s, kpo, kafka))
        (out / "sides.json").write_text(json.dumps({"kpo": asdict(kpo), "kafka": asdict(kafka)}, indent=1))
        print(table(rows[-1:]).splitlines()[-1], file=sys.stderr)
    text = (f"{header}\n\nEach cell: kpo / Kafka's placer (StripedReplicaPlacer, as `kafka-reassign-partitions "
            f"--generate` in Kafka 4.x).\n\n{table(rows)}\n")
    print(text)
    if args.results:
        args.results.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
