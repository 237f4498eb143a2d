"""The local backend: the job under spark-submit in local mode, as the operator runs it.

These start real child processes (a JVM each, ~10 s): one plan that succeeds, one the job refuses, one that runs out
of time. They check what the operator relies on: the parsed plan, the job's own words on failure, a non-zero exit,
and that a timeout ends the whole process group.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from kpo.domain.model import TopicPartition
from kpo.planning.spark.runner import DRIVER_JAVA_OPTIONS, LocalSparkConfig, LocalSparkRunner

DATA = Path(__file__).parent / "data" / "planner"
RUNNER = LocalSparkRunner(LocalSparkConfig(master="local[2]", driver_memory="1g", timeout_seconds=300,
                                           conf={"spark.sql.shuffle.partitions": "2"}))


def test_a_plan_comes_back_parsed(tmp_path: Path) -> None:
    outcome = RUNNER.run(DATA / "remove-broker", tmp_path / "out")
    assert outcome.ok, outcome.message
    assert outcome.exit_code == 0
    assert outcome.plan is not None and outcome.metrics is not None
    assert outcome.plan.targets()[TopicPartition("orders", 2)] == (2, 1)
    assert outcome.metrics.replicas_left_on_removed_brokers == 0
    assert outcome.peak_rss_bytes > 0


def test_a_refused_request_fails_with_the_jobs_message(tmp_path: Path) -> None:
    folder = tmp_path / "input"
    shutil.copytree(DATA / "remove-broker", folder)
    (folder / "request.json").write_text(json.dumps({"goal": "RemoveBrokers", "brokers": [7]}))
    outcome = RUNNER.run(folder, tmp_path / "out")
    assert not outcome.ok
    assert outcome.exit_code == 1
    assert "brokers [7] to remove are not in the cluster" in outcome.message
    assert outcome.metrics is not None and outcome.metrics.status == "failed"
    assert outcome.plan is None


def test_a_job_past_its_timeout_is_ended_with_its_children(tmp_path: Path) -> None:
    runner = LocalSparkRunner(LocalSparkConfig(master="local[1]", driver_memory="512m", timeout_seconds=3))
    job = runner.start(DATA / "remove-broker", tmp_path / "out")
    outcome = job.wait()
    assert not outcome.ok
    assert "did not finish within its timeout" in outcome.message
    try:
        os.killpg(job.pid, 0)
    except ProcessLookupError:
        pass
    else:
        raise AssertionError("the job's process group is still alive")


def _conf(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_driver_jvm_runs_with_the_planners_java_options_unless_the_conf_sets_its_own(tmp_path: Path) -> None:
    default = _conf(LocalSparkRunner().command(tmp_path / "in", tmp_path / "out"))
    assert default["spark.driver.extraJavaOptions"] == DRIVER_JAVA_OPTIONS
    assert "-XX:TieredStopAtLevel=1" in DRIVER_JAVA_OPTIONS.split()
    own = LocalSparkRunner(LocalSparkConfig(conf={"spark.driver.extraJavaOptions": "-Xss4m"}))
    assert _conf(own.command(tmp_path / "in", tmp_path / "out"))["spark.driver.extraJavaOptions"] == "-Xss4m"
