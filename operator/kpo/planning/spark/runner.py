"""The ``local`` planning backend: the job under ``spark-submit`` in local mode, as a supervised child process.

This is the embedded default: the operator needs no Spark cluster, only the pyspark package it already has
(pyspark ships ``spark-submit``) and a Java runtime. The runner starts the job in its own process group, bounds it by
a timeout, keeps the tail of its stderr, samples the memory of its process tree, and turns the result into a
:class:`JobOutcome`: the parsed plan and metrics on success; on failure the job's own message from ``metrics.json``,
or, when the job died before writing it (a JVM that could not start, a kill), the exit status and the last lines it
printed.

Nothing here imports pyspark, so the operator can import the runner without starting a JVM; the run itself may be
awaited in a thread (``asyncio.to_thread(runner.run, ...)``) or polled (:meth:`LocalSparkRunner.start`).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kpo.domain.plan_contract import METRICS_FILE, ContractError, PlanMetrics, ReassignmentPlan
from kpo.planning.spark.workdir import read_output

STDERR_TAIL_LINES = 40

# The driver JVM of a planning job (1M replicas: about a minute) spent more CPU compiling than planning: Spark
# generates new classes for every query of every round, and the optimising JIT (C2) compiled ~30,000 methods (9 min
# of compiler thread time under load, JFR), G1 added ~20 s of pauses at 1g. With the client compiler only and the
# parallel collector the same plan took 72 CPU seconds instead of 138 (bench/planner/RESULTS.md). A ``spark_conf``
# that sets ``spark.driver.extraJavaOptions`` replaces these.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"


def pyspark_home() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed: the local planning backend needs it")
    return Path(next(iter(spec.submodule_search_locations)))


def job_script(module: str = "kpo.planning.spark.job") -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"cannot find {module}")
    return Path(spec.origin)


@dataclass(frozen=True)
class LocalSparkConfig:
    # The operator's defaults (config.LocalPlannerSettings), so a runner built without settings plans as kpo does.
    master: str = "local[*]"
    driver_memory: str = "1g"
    timeout_seconds: float = 1800.0
    conf: Mapping[str, str] = field(default_factory=dict)
    python: str = sys.executable
    java_home: str | None = None


@dataclass(frozen=True)
class JobOutcome:
    ok: bool
    message: str
    exit_code: int | None
    metrics: PlanMetrics | None
    plan: ReassignmentPlan | None
    wall_seconds: float
    peak_rss_bytes: int
    stderr_tail: str


class RunningJob:
    """A started job. ``wait`` or ``poll`` for its outcome; ``cancel`` ends its whole process group."""

    def __init__(self, process: subprocess.Popen[bytes], output: Path, stderr_path: Path, timeout: float,
                 with_plan: bool = True) -> None:
        self._process = process
        self._with_plan = with_plan
        self._output = output
        self._stderr_path = stderr_path
        self._started = time.monotonic()
        self._deadline = self._started + timeout
        self._memory = _TreeMemory(process.pid)
        self._memory.start()
        self._timed_out = False

    @property
    def pid(self) -> int:
        return self._process.pid

    def poll(self) -> JobOutcome | None:
        if self._process.poll() is None:
            if time.monotonic() < self._deadline:
                return None
            self._timed_out = True
            self.cancel()
        return self._finish()

    def wait(self) -> JobOutcome:
        try:
            self._process.wait(timeout=max(0.0, self._deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._timed_out = True
            self.cancel()
        return self._finish()

    def cancel(self, grace_seconds: float = 10.0) -> None:
        """SIGTERM the job's process group (the JVM and its Python workers), SIGKILL after ``grace_seconds``."""
        if self._process.poll() is not None:
            return
        for sig, pause in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self._process.pid, sig)
            except ProcessLookupError:
                return
            try:
                self._process.wait(timeout=pause)
                break
            except subprocess.TimeoutExpired:
                continue
        # spark-submit may go before its children (the JVM's Python workers): end the rest of the group too, and
        # wait until it is gone, so a cancelled job leaves nothing behind.
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            time.sleep(0.1)

    def _finish(self) -> JobOutcome:
        self._process.wait()
        self._memory.stop()
        wall = time.monotonic() - self._started
        tail = _tail(self._stderr_path)
        self._stderr_path.unlink(missing_ok=True)
        code = self._process.returncode
        if self._timed_out:
            return JobOutcome(False, f"the planning job did not finish within its timeout; last output: {tail}",
                              code, None, None, wall, self._memory.peak, tail)
        try:
            out = read_output(self._output, with_plan=self._with_plan)
        except (ContractError, OSError) as err:
            return JobOutcome(False, f"the planning job's output is unreadable: {err}", code, None, None, wall,
                              self._memory.peak, tail)
        if out.metrics is None:
            message = f"the planning job exited with code {code} without writing {METRICS_FILE}; last output: {tail}"
            return JobOutcome(False, message, code, None, None, wall, self._memory.peak, tail)
        if code != 0 or not out.metrics.ok:
            message = out.metrics.message or f"the planning job exited with code {code}"
            return JobOutcome(False, message, code, out.metrics, None, wall, self._memory.peak, tail)
        return JobOutcome(True, "", code, out.metrics, out.plan, wall, self._memory.peak, tail)


class LocalSparkRunner:
    def __init__(self, config: LocalSparkConfig | None = None) -> None:
        self.config = config or LocalSparkConfig()

    def command(self, input_dir: Path, output_dir: Path, *, module: str = "kpo.planning.spark.job",
                extra_args: tuple[str, ...] = ()) -> list[str]:
        cfg = self.config
        conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS, **cfg.conf}
        confs = [arg for key, value in sorted(conf.items()) for arg in ("--conf", f"{key}={value}")]
        return [str(pyspark_home() / "bin" / "spark-submit"), "--master", cfg.master,
                "--driver-memory", cfg.driver_memory, *confs, str(job_script(module)),
                "--input", str(input_dir), "--output", str(output_dir), *extra_args]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"PYSPARK_PYTHON": self.config.python, "PYSPARK_DRIVER_PYTHON": self.config.python,
                    "SPARK_HOME": str(pyspark_home())})
        if self.config.java_home:
            env["JAVA_HOME"] = self.config.java_home
        return env

    def start(self, input_dir: Path, output_dir: Path, *, module: str = "kpo.planning.spark.job",
              extra_args: tuple[str, ...] = ()) -> RunningJob:
        output_dir.mkdir(parents=True, exist_ok=True)
        (output_dir / METRICS_FILE).unlink(missing_ok=True)  # a stale answer must never pass for this run's
        fd, stderr_name = tempfile.mkstemp(prefix="kpo-planner-", suffix=".log")
        with os.fdopen(fd, "wb") as stderr:
            process = subprocess.Popen(
                self.command(input_dir, output_dir, module=module, extra_args=extra_args),
                stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=self.environment(),
                start_new_session=True)
        return RunningJob(process, output_dir, Path(stderr_name), self.config.timeout_seconds,
                          with_plan=module == "kpo.planning.spark.job")

    def run(self, input_dir: Path, output_dir: Path, *, module: str = "kpo.planning.spark.job",
            extra_args: tuple[str, ...] = ()) -> JobOutcome:
        return self.start(input_dir, output_dir, module=module, extra_args=extra_args).wait()


def _tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


class _TreeMemory:
    """Peak resident memory of a process and all its descendants, sampled from /proc (Linux; 0 elsewhere)."""

    def __init__(self, root: int, interval: float = 0.25) -> None:
        self._root = root
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name=f"rss-{root}", daemon=True)
        self.peak = 0

    def start(self) -> None:
        if Path("/proc").is_dir():
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(self._root))
            self._stop.wait(self._interval)


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and its descendants right now."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text().split()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        rss[pid] = int(statm[1]) * os.sysconf("SC_PAGE_SIZE")
    members = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in members and pid not in members:
                members.add(pid)
                grew = True
    return sum(rss.get(pid, 0) for pid in members)
