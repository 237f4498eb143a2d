"""The operator's settings and the code that runs with them agree on their defaults."""

from __future__ import annotations

from kpo.config import LocalPlannerSettings
from kpo.planning.spark.runner import LocalSparkConfig


def test_the_local_runner_defaults_are_the_operators() -> None:
    settings, runner = LocalPlannerSettings(), LocalSparkConfig()
    assert (runner.master, runner.driver_memory, runner.timeout_seconds) == (
        settings.master, settings.driver_memory, settings.timeout_seconds)
