"""The planner bench: kpo's plan and Kafka's own placement on the same synthetic clusters, side by side.

``make bench`` (or ``python -m bench.planner.run --scenarios small|shapes|all|name,name``) generates each scenario's
cluster (cached under ``~/.cache/kpo/bench/planner``), runs the real planning job through the local backend
(spark-submit in local mode, as the operator does), runs Kafka's placer (``bench/java/KafkaPlacer.java``, compiled at
bench time against the test bed's Kafka jars and cached) on the same input, scores Kafka's answer with the job's own
metrics code (``kpo.planning.spark.evaluate``), and prints one markdown line per scenario with kpo's figure first and
Kafka's second in every cell.

The hard shapes of issue 15 (``shapes``: RF above the number of racks, uneven racks with mixed replication factors
and a dead broker, offline partitions, a replication-factor increase) also run a plain-Python greedy planner
(``bench.planner.greedy``) scored the same way, and get a table of their own: kpo / greedy / Kafka in every cell,
with min/mean bytes, whether the band was reached, the partitions not spread as evenly as the racks allow
(counted here from each assignment) and the offline partitions each side left out.

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
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from bench.planner import greedy
from kpo.domain.plan_contract import Goal, PlanMetrics, PlanRequest
from kpo.planning.spark.runner import LocalSparkConfig, LocalSparkRunner, tree_rss

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
    # kpo runs at the operator's defaults (planner.local: master local[*], driver memory 1g) unless a scenario says
    # otherwise; scoring the other sides' answers is not measured and gets what it needs.
    driver_memory: str | None = None
    scoring_memory: str = "2g"
    java_heap: str = "1g"
    # The generator's shape knobs (bench.planner.generate.ClusterSpec); the defaults are the original scenarios'.
    replication_factors: tuple[int, ...] = (3,)
    rack_sizes: tuple[int, ...] = ()
    dead: tuple[int, ...] = ()
    # Sizes and a dominant topic (issue 27), and the generator's seed.
    sizes: str = "lognormal"
    pareto_alpha: float = 1.2
    sigma: float = 1.0
    popularity_sigma: float = 0.75
    dominant_share: float = 0.0
    seed: int = 7
    # A hard shape of issue 15: the greedy reference runs too, and the row goes to the shapes table.
    shape: bool = False

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
    Scenario("rf-above-racks", "RF 2 -> 4 over 3 racks, 12 brokers, rebalanceExisting", 12, 12, 3, 5_000,
             PlanRequest(goal=Goal.REPLICATION_FACTOR, replication_factor=4, rebalance_existing=True),
             partitions_per_topic=50, replication_factors=(2,), shape=True),
    Scenario("uneven-racks-mixed-rf-dead", "racks of 6, 6 and 2 brokers, RF 1/2/3 topics, broker 3 dead (removed)",
             14, 14, 3, 10_000, _request(Goal.REMOVE_BROKERS, (3,)), partitions_per_topic=50,
             replication_factors=(1, 2, 3), rack_sizes=(6, 6, 2), dead=(3,), shape=True),
    Scenario("offline-partitions", "12 brokers, 3 racks, RF 1/2/3 topics, brokers 5 and 6 dead (removed)",
             12, 12, 3, 8_000, _request(Goal.REMOVE_BROKERS, (5, 6)), partitions_per_topic=50,
             replication_factors=(1, 2, 3), dead=(5, 6), shape=True),
    Scenario("rf-increase", "RF 2 -> 3, 12 brokers, 3 racks, add only (the default)", 12, 12, 3, 8_000,
             PlanRequest(goal=Goal.REPLICATION_FACTOR, replication_factor=3), skew=0.15, partitions_per_topic=50,
             replication_factors=(2,), shape=True),
    # Issue 27: shapes where a plain greedy used to do better than kpo (issue 27's table), medium sized.
    Scenario("racks-23456-pareto", "5 racks of 2/3/4/5/6 brokers, RF 3, Pareto sizes, rebalance", 20, 20, 5, 6_000,
             _request(Goal.REBALANCE), partitions_per_topic=50, rack_sizes=(2, 3, 4, 5, 6), sizes="pareto",
             shape=True),
    Scenario("dominant-topic", "12 brokers, 3 racks, one topic of 4 partitions holds 80 % of the bytes, rebalance",
             12, 12, 3, 3_000, _request(Goal.REBALANCE), partitions_per_topic=50, dominant_share=0.8, shape=True),
    Scenario("uneven-remove-1-of-small", "racks of 6, 6 and 2 brokers, RF 3, remove broker 14 (small rack)", 14, 14, 3,
             6_000, _request(Goal.REMOVE_BROKERS, (14,)), partitions_per_topic=50, rack_sizes=(6, 6, 2),
             shape=True),
    Scenario("uneven-remove-small-rack", "racks of 6, 6 and 2 brokers, RF 3, remove the small rack (13, 14)", 14, 14,
             3, 6_000, _request(Goal.REMOVE_BROKERS, (13, 14)), partitions_per_topic=50, rack_sizes=(6, 6, 2),
             shape=True),
    Scenario("uneven-no-huge", "racks of 6, 6 and 2 brokers, RF 1/2/3, no huge partition, rebalance", 14, 14, 3,
             6_000, _request(Goal.REBALANCE), partitions_per_topic=50, rack_sizes=(6, 6, 2),
             replication_factors=(1, 2, 3), sigma=0.5, popularity_sigma=0.3, shape=True),
    Scenario("uneven-543-rf23", "racks of 5, 4 and 3 brokers, RF 2/3, rebalance", 12, 12, 3, 6_000,
             _request(Goal.REBALANCE), partitions_per_topic=50, rack_sizes=(5, 4, 3), replication_factors=(2, 3),
             skew=0.15, shape=True),
    Scenario("uneven-842-rf23", "racks of 8, 4 and 2 brokers, RF 2/3, rebalance, tolerance 0.1", 14, 14, 3, 6_000,
             _request(Goal.REBALANCE, tolerance=0.10), partitions_per_topic=50, rack_sizes=(8, 4, 2),
             replication_factors=(2, 3), skew=0.15, shape=True),
    # The same uneven racks above the job's greedy-candidate limit (100,000 replicas): the rounds alone plan it.
    Scenario("uneven-842-rf23-300k", "racks of 8, 4 and 2 brokers, RF 2/3, rebalance, tolerance 0.1, 300k replicas",
             14, 14, 3, 120_000, _request(Goal.REBALANCE, tolerance=0.10), partitions_per_topic=200,
             rack_sizes=(8, 4, 2), replication_factors=(2, 3), skew=0.15, shape=True),
    Scenario("uneven-543-rf23-300k", "racks of 5, 4 and 3 brokers, RF 2/3, rebalance, 300k replicas", 12, 12, 3,
             120_000, _request(Goal.REBALANCE), partitions_per_topic=200, rack_sizes=(5, 4, 3),
             replication_factors=(2, 3), skew=0.15, shape=True),
    Scenario("skewed-8racks-1M", "heavily skewed rebalance, 200 brokers, 8 racks, Pareto sizes, 1M replicas", 200,
             200, 8, 333_334, _request(Goal.REBALANCE), skew=0.5, sizes="pareto", pareto_alpha=2.0,
             scoring_memory="4g", java_heap="2g"),
    Scenario("scale-200-1M", "skewed rebalance, 200 brokers, 10 racks, 1M replicas", 200, 200, 10, 333_334,
             _request(Goal.REBALANCE), skew=0.15, scoring_memory="4g", java_heap="2g"),
    Scenario("scale-300-3M", "skewed rebalance, 300 brokers, 10 racks, 3M replicas", 300, 300, 10, 1_000_000,
             _request(Goal.REBALANCE), skew=0.15, scoring_memory="8g", java_heap="4g"),
)
ISSUE_27 = ("racks-23456-pareto", "dominant-topic", "uneven-remove-1-of-small", "uneven-remove-small-rack",
            "uneven-no-huge", "uneven-543-rf23", "uneven-842-rf23")
ISSUE_27_LARGE = ("uneven-842-rf23-300k", "uneven-543-rf23-300k")
SETS = {"small": ("scale-out-12-15", "skewed-40-t0.10"),
        "shapes": tuple(s.name for s in SCENARIOS if s.shape and s.name not in ISSUE_27 + ISSUE_27_LARGE),
        "shapes27": ISSUE_27, "shapes27-large": ISSUE_27_LARGE,
        "skewed-1M": ("skewed-8racks-1M",),
        "all": tuple(s.name for s in SCENARIOS)}


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
                           partitions_per_topic=s.partitions_per_topic, skew=s.skew,
                           replication_factors=s.replication_factors, rack_sizes=s.rack_sizes, dead=s.dead,
                           sizes=s.sizes, pareto_alpha=s.pareto_alpha, sigma=s.sigma,
                           popularity_sigma=s.popularity_sigma, dominant_share=s.dominant_share, seed=s.seed)
        key = hashlib.sha256(repr((spec, s.request.to_json())).encode()).hexdigest()[:12]
        folder = cache_dir() / "inputs" / f"{s.name}-{key}"
        inputs[s.name] = folder
        if not (folder / "partitions" / "_SUCCESS").is_file():
            missing.append((s, spec, folder))
    if missing:
        from kpo.planning.spark.job import session  # noqa: PLC0415

        spark = session("kpo-bench-generate")
        try:
            for s, spec, folder in missing:
                print(f"generating {s.name} ({s.partitions:,} partitions) in {folder}", file=sys.stderr)
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
    bytes_min: float = float("nan")
    band_reached: bool | None = None
    note: str = ""
    # Counted by the bench from the assignment (shapes only): partitions not spread as evenly as the racks allow,
    # offline partitions left as they are (of all offline ones).
    uneven_spread: int = -1
    offline_left_out: int = -1
    # kpo only: which plan the job kept (its rounds' or its greedy candidate's, issue 27).
    chosen: str = ""
    # kpo only: CPU seconds (user + system) of the job's process tree, which the machine's load hardly changes.
    cpu_seconds: float = float("nan")


def _side(m: PlanMetrics, plan_seconds: float, wall: float, peak: int) -> Side:
    assert m.balance_after is not None
    return Side(bytes_min=m.balance_after.bytes_min, band_reached=m.band_reached, note=m.message,
                bytes_over_lb=m.bytes_to_move / m.lower_bound_bytes if m.lower_bound_bytes else float("nan"),
                replicas_over_lb=m.replicas_to_move / m.lower_bound_replicas if m.lower_bound_replicas
                else float("nan"),
                bytes=m.balance_after.bytes, replicas=m.balance_after.replicas, leaders=m.balance_after.leaders,
                rack_violations=m.rack_violations_after, plan_seconds=plan_seconds, wall_seconds=wall,
                peak_mib=peak / 2**20, bytes_moved=m.bytes_to_move, lower_bound=m.lower_bound_bytes)


Assignment = dict[greedy.Key, tuple[int, ...]]


def run_kpo(s: Scenario, folder: Path, out: Path) -> tuple[Side, Assignment]:
    """kpo's figures and its plan (the changed partitions)."""
    defaults = LocalSparkConfig()
    runner = LocalSparkRunner(LocalSparkConfig(driver_memory=s.driver_memory or defaults.driver_memory))
    # The bench runs one child at a time, so the children's CPU time across the run is the job's (spark-submit execs
    # the JVM, which waits for its Python driver).
    before = _children_cpu()
    outcome = runner.run(folder, out)
    cpu = _children_cpu() - before
    if not outcome.ok or outcome.metrics is None or outcome.plan is None:
        raise RuntimeError(f"kpo failed on {s.name}: {outcome.message}")
    targets = {(tp.topic, tp.partition): tuple(r) for tp, r in outcome.plan.targets().items()}
    side = _side(outcome.metrics, outcome.metrics.planning_seconds, outcome.wall_seconds, outcome.peak_rss_bytes)
    return replace(side, chosen=outcome.metrics.chosen_plan, cpu_seconds=cpu), targets


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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


def _score(s: Scenario, folder: Path, out: Path, assignment: Path, who: str) -> PlanMetrics:
    """An assignment scored by the job's own metrics code, exactly as kpo's plan is."""
    runner = LocalSparkRunner(LocalSparkConfig(master="local[2]", driver_memory=s.scoring_memory))
    scored = runner.run(folder, out / "evaluation", module="kpo.planning.spark.evaluate",
                        extra_args=("--assignment", str(assignment)))
    if not scored.ok or scored.metrics is None:
        raise RuntimeError(f"scoring {who} failed on {s.name}: {scored.message}")
    return scored.metrics


def run_kafka(s: Scenario, folder: Path, out: Path, classes: Path, libs: Path) -> Side:
    out.mkdir(parents=True, exist_ok=True)
    assignment = out / "kafka-assignment.jsonl"
    stdout, wall, peak = _measured(["java", f"-Xmx{s.java_heap}", "-cp", f"{classes}:{libs}/*", "KafkaPlacer",
                                    str(folder), str(assignment)])
    placed = json.loads(stdout.strip().splitlines()[-1])
    metrics = _score(s, folder, out, assignment, "Kafka's placement")
    return _side(metrics, float(placed["placementSeconds"]), wall, peak)


def run_greedy(s: Scenario, folder: Path, out: Path) -> Side:
    """The plain-Python greedy reference (its own process, so its memory is measured alone), scored alike."""
    out.mkdir(parents=True, exist_ok=True)
    assignment = out / "greedy-assignment.jsonl"
    stdout, wall, peak = _measured([sys.executable, "-m", "bench.planner.greedy", str(folder), str(assignment)])
    placed = json.loads(stdout.strip().splitlines()[-1])
    metrics = _score(s, folder, out, assignment, "the greedy reference")
    return _side(metrics, float(placed["placementSeconds"]), wall, peak)


def counted(side: Side, changed: Mapping[greedy.Key, Sequence[int]], folder: Path) -> Side:
    """``side`` with the figures the bench counts from the assignment itself (spread, offline left out)."""
    request, brokers, partitions = greedy.read_input(folder)
    original = {p.key: p for p in partitions}
    alive = frozenset(b.id for b in brokers if b.alive)
    offline = [k for k, p in original.items() if greedy.selected(request, p.topic) and
               greedy.is_offline(p.replicas, alive)]
    left = sum(1 for k in offline if tuple(changed.get(k, original[k].replicas)) == original[k].replicas)
    uneven = greedy.uneven_partitions(changed, original, request, brokers)
    return replace(side, uneven_spread=uneven, offline_left_out=left)


def replicas_after(changed: Mapping[greedy.Key, Sequence[int]], folder: Path) -> int:
    _, _, partitions = greedy.read_input(folder)
    return sum(len(changed.get(p.key, p.replicas)) for p in partitions)


def _cell(kpo: float, kafka: float, digits: int = 3) -> str:
    return f"{kpo:.{digits}f} / {kafka:.{digits}f}"


def table(rows: list[tuple[Scenario, Side, Side]]) -> str:
    head = ("| scenario | replicas | LB bytes (TB) | bytes moved / LB | replicas moved / LB | max/mean bytes "
            "| max/mean replicas | max/mean leaders | rack violations | planning s | wall s | kpo CPU s | peak MiB |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for s, k, f in rows:
        lines.append(
            f"| {s.title} (tol {s.request.tolerance}) | {s.replicas:,} | {k.lower_bound / 1e12:.2f} "
            f"| {_cell(k.bytes_over_lb, f.bytes_over_lb)} | {_cell(k.replicas_over_lb, f.replicas_over_lb)} "
            f"| {_cell(k.bytes, f.bytes)} | {_cell(k.replicas, f.replicas)} | {_cell(k.leaders, f.leaders)} "
            f"| {k.rack_violations} / {f.rack_violations} | {_cell(k.plan_seconds, f.plan_seconds, 1)} "
            f"| {_cell(k.wall_seconds, f.wall_seconds, 1)} | {k.cpu_seconds:.1f} "
            f"| {k.peak_mib:.0f} / {f.peak_mib:.0f} |")
    return "\n".join(lines)


def _cells(values: Sequence[float], digits: int = 3) -> str:
    return " / ".join(f"{v:.{digits}f}" for v in values)


def _reached(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def shapes_table(rows: list[tuple[Scenario, int, Side, Side, Side]]) -> str:
    """The hard shapes: each cell kpo / greedy / Kafka."""
    head = ("| scenario | replicas | LB bytes (TB) | bytes moved (TB) | bytes moved / LB | min/mean bytes "
            "| max/mean bytes | band reached | rack violations | uneven spread | offline left out (of) | planning s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for s, replicas, k, g, f in rows:
        sides = (k, g, f)
        offline_total = max(side.offline_left_out for side in sides)
        # The job states the lower bound for the band an assignment reached, so each side may have its own.
        bounds = {x.lower_bound for x in sides}
        lb = f"{k.lower_bound / 1e12:.2f}" if len(bounds) == 1 else _cells([x.lower_bound / 1e12 for x in sides], 2)
        lines.append(
            f"| {s.title} (tol {s.request.tolerance}) | {replicas:,} | {lb} "
            f"| {_cells([x.bytes_moved / 1e12 for x in sides], 2)} | {_cells([x.bytes_over_lb for x in sides])} "
            f"| {_cells([x.bytes_min for x in sides])} "
            f"| {_cells([x.bytes for x in sides])} | {' / '.join(_reached(x.band_reached) for x in sides)} "
            f"| {' / '.join(str(x.rack_violations) for x in sides)} "
            f"| {' / '.join(str(x.uneven_spread) for x in sides)} "
            f"| {' / '.join(str(x.offline_left_out) for x in sides)} ({offline_total}) "
            f"| {_cells([x.plan_seconds for x in sides], 1)} |")
    return "\n".join(lines)


def shapes_notes(rows: list[tuple[Scenario, int, Side, Side, Side]]) -> str:
    notes = []
    for s, _, k, g, _f in rows:
        for who, side in (("kpo", k), ("greedy", g)):
            if side.note:
                notes.append(f"- {s.name}, {who}: {side.note}")
        if k.chosen == "greedy":
            notes.append(f"- {s.name}, kpo: the job kept its greedy candidate's plan (better than its rounds' plan)")
    return "\n".join(notes)


SECTION_SCALE = "scale"
SECTION_SHAPES = "shapes"
SECTION_SHAPES_27 = "shapes27"


def update_results(path: Path, section: str, text: str) -> None:
    """Replace one section of RESULTS.md (between its markers), or append it; other sections stay as they are."""
    begin, end = f"<!-- bench:{section} -->", f"<!-- /bench:{section} -->"
    block = f"{begin}\n{text.strip()}\n{end}"
    current = path.read_text() if path.exists() else ""
    if begin in current and end in current:
        head, rest = current.split(begin, 1)
        _, tail = rest.split(end, 1)
        path.write_text(head + block + tail)
    else:
        path.write_text((current.rstrip() + "\n\n" if current.strip() else "") + block + "\n")


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
    parser.add_argument("--scenarios", default="all", help="small, shapes, all, or a comma-separated list of names: "
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
    shaped: list[tuple[Scenario, int, Side, Side, Side]] = []
    for s in chosen:
        folder, out = inputs[s.name], cache_dir() / "runs" / s.name
        print(f"{s.name}: kpo ...", file=sys.stderr)
        kpo, kpo_plan = run_kpo(s, folder, out / "kpo")
        print(f"{s.name}: Kafka's placer ...", file=sys.stderr)
        kafka = run_kafka(s, folder, out / "kafka", classes, libs)
        if not s.shape:
            rows.append((s, kpo, kafka))
            (out / "sides.json").write_text(json.dumps({"kpo": asdict(kpo), "kafka": asdict(kafka)}, indent=1))
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr)
            continue
        print(f"{s.name}: greedy reference ...", file=sys.stderr)
        reference = run_greedy(s, folder, out / "greedy")
        kpo = counted(kpo, kpo_plan, folder)
        reference = counted(reference, greedy.read_assignment(out / "greedy" / "greedy-assignment.jsonl"), folder)
        kafka = counted(kafka, greedy.read_assignment(out / "kafka" / "kafka-assignment.jsonl"), folder)
        shaped.append((s, replicas_after(kpo_plan, folder), kpo, reference, kafka))
        (out / "sides.json").write_text(json.dumps({"kpo": asdict(kpo), "greedy": asdict(reference),
                                                    "kafka": asdict(kafka)}, indent=1))
        print(shapes_table(shaped[-1:]).splitlines()[-1], file=sys.stderr)
    sections = []
    if rows:
        sections.append((SECTION_SCALE, f"{header}\n\nEach cell: kpo / Kafka's placer (StripedReplicaPlacer, as "
                         f"`kafka-reassign-partitions --generate` in Kafka 4.x).\n\n{table(rows)}\n"))
    for section, title, group in ((SECTION_SHAPES, "Hard shapes (issue 15)",
                                   [r for r in shaped if r[0].name not in ISSUE_27 + ISSUE_27_LARGE]),
                                  (SECTION_SHAPES_27, "Shapes of issue 27: uneven racks, Pareto sizes, a dominant "
                                   "topic",
                                   [r for r in shaped if r[0].name in ISSUE_27 + ISSUE_27_LARGE])):
        if not group:
            continue
        notes = shapes_notes(group)
        sections.append((section, f"## {title}\n\n{header}\n\nEach cell: kpo / greedy "
                         f"reference (`bench/planner/greedy.py`) / Kafka's placer; all three scored by "
                         f"`kpo.planning.spark.evaluate`; the columns are explained in README.md. Planning seconds "
                         f"depend on "
                         f"the machine's load; the other figures are a function of the input.\n\n"
                         f"{shapes_table(group)}\n\nLoad average at the end of the run: {os.getloadavg()[0]:.1f}.\n"
                         + (f"\nWhere the band was not reached (kpo's own note; for the greedy, the note "
                            f"`kpo.planning.spark.evaluate` wrote on its assignment):\n\n{notes}\n" if notes else "")))
    for section, text in sections:
        print(text)
        if args.results:
            update_results(args.results, section, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
