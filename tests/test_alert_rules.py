"""The shipped alert rules (deploy/prometheus/*.yaml), checked and unit-tested by the real promtool.

promtool comes from `make provision-prometheus` (which `make test` runs first). Without it these tests skip on a
developer's machine, and fail under CI=true: CI provisions it, so a missing binary there is a broken pipeline, not a
reason to pass.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kpo import metrics
from kpo_testbed.prometheus import (
    RULE_TESTS_DIR,
    PrometheusBinaries,
    alert_names,
    rule_groups,
    shipped_rule_files,
    write_rule_file,
)

RULE_FILES = shipped_rule_files()
METRIC_NAME = re.compile(r"\b(kpo_[a-z0-9_]+)")


@pytest.fixture(scope="module")
def promtool() -> Path:
    tool = PrometheusBinaries.from_cache().promtool
    if tool.is_file():
        return tool
    if os.environ.get("CI") == "true":
        pytest.fail(f"{tool} is missing: CI must provision it (make provision-prometheus)")
    pytest.skip(f"{tool} is not provisioned (testbed/provision.sh prometheus builds it)")


def run(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(promtool), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def unit_tests_of(rule_file: Path) -> Path:
    return RULE_TESTS_DIR / f"{rule_file.stem}.test.yaml"


def staged(rule_file: Path, folder: Path) -> Path:
    """The plain rule file and a copy of its promtool tests side by side in ``folder``; the copy's path."""
    write_rule_file(rule_file, folder)
    return Path(shutil.copy(unit_tests_of(rule_file), folder))


def test_kpo_ships_both_rule_files() -> None:
    assert {p.name for p in RULE_FILES} >= {"kpo-balance-alerts.yaml", "kpo-execution-alerts.yaml"}


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules_passes(promtool: Path, rule_file: Path, tmp_path: Path) -> None:
    plain = write_rule_file(rule_file, tmp_path)
    result = run(promtool, "check", "rules", plain.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_names(rule_file))} rules found" in result.stdout, result.stdout


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=lambda p: p.name)
def test_promtool_unit_tests_pass(promtool: Path, rule_file: Path, tmp_path: Path) -> None:
    tests = staged(rule_file, tmp_path)
    result = run(promtool, "test", "rules", tests.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=lambda p: p.name)
def test_every_alert_has_a_test_that_fires_it_and_one_that_does_not(rule_file: Path) -> None:
    fires: set[str] = set()
    quiet: set[str] = set()
    for group in yaml.safe_load(unit_tests_of(rule_file).read_text())["tests"]:
        for check in group.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    alerts = set(alert_names(rule_file))
    assert alerts - fires == set(), "alerts no test fires"
    assert alerts - quiet == set(), "alerts no test shows quiet on healthy series"


def test_a_broken_rule_fails_its_unit_tests(promtool: Path, tmp_path: Path) -> None:
    """The unit tests can fail: the stalled-move alert with a threshold nothing reaches is caught."""
    rule_file = next(p for p in RULE_FILES if p.name == "kpo-execution-alerts.yaml")
    tests = staged(rule_file, tmp_path)
    plain = tmp_path / f"{rule_file.stem}.rules.yaml"
    text = plain.read_text()
    assert "kpo_stalled_moves > 0" in text
    plain.write_text(text.replace("kpo_stalled_moves > 0", "kpo_stalled_moves > 5"))
    result = run(promtool, "test", "rules", tests.name, cwd=tmp_path)
    assert result.returncode != 0, result.stdout
    assert "KpoMovesStalled" in result.stdout + result.stderr


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=lambda p: p.name)
def test_rules_use_only_metrics_kpo_exports(rule_file: Path) -> None:
    # The registry's families (a counter's without _total), samples or not: the exposition leaves out a labelled
    # counter before its first increment.
    exported = {family.name for family in metrics.REGISTRY.collect()}
    used = {name for group in rule_groups(rule_file)["groups"] for rule in group["rules"]
            for name in METRIC_NAME.findall(rule["expr"])}
    assert used, "no kpo metric in the rules"
    unknown = {name for name in used if name.removesuffix("_total") not in exported}
    assert unknown == set(), f"the rules use metrics kpo does not export: {sorted(unknown)}"
