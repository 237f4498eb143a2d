"""The shipped alert rules (deploy/prometheus/*.yaml), checked and unit-tested by the real promtool.

The disk alerts' thresholds are Helm values (metrics.prometheusRules.logDirUsedRatio): the files hold the defaults, and
the rules the chart renders with the defaults and with other thresholds are unit-tested too, rendered by the real
``helm template``.

promtool comes from `make provision-prometheus` and helm from `make provision` (both of which `make test` runs first).
Without them these tests skip on a developer's machine, and fail under CI=true: CI provisions them, so a missing binary
there is a broken pipeline, not a reason to pass.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kpo import metrics
from kpo_testbed.paths import REPO_ROOT, Binaries
from kpo_testbed.prometheus import (
    RULE_TESTS_DIR,
    PrometheusBinaries,
    alert_names,
    rule_groups,
    shipped_rule_files,
    write_rule_file,
)

RULE_FILES = shipped_rule_files()
RULES_BY_NAME = {p.name: p for p in RULE_FILES}
METRIC_NAME = re.compile(r"\b(kpo_[a-z0-9_]+)")
CHART = REPO_ROOT / "helm" / "kpo"
DISK_RULES = "kpo-disk-alerts.yaml"


def provisioned(tool: Path, make_target: str, builds_it: str) -> Path:
    if tool.is_file():
        return tool
    if os.environ.get("CI") == "true":
        pytest.fail(f"{tool} is missing: CI must provision it (make {make_target})")
    pytest.skip(f"{tool} is not provisioned ({builds_it})")


@pytest.fixture(scope="module")
def promtool() -> Path:
    return provisioned(PrometheusBinaries.from_cache().promtool, "provision-prometheus",
                       "testbed/provision.sh prometheus builds it")


@pytest.fixture(scope="module")
def helm() -> Path:
    return provisioned(Binaries.from_cache().helm, "provision", "testbed/provision.sh helm builds it")


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


def helm_template(helm: Path, values: dict[str, Any], folder: Path) -> subprocess.CompletedProcess[str]:
    values_file = folder / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    return subprocess.run([str(helm), "template", "kpo", str(CHART), "-n", "monitoring", "-f", str(values_file)],
                          cwd=folder, capture_output=True, text=True, timeout=120, check=False)


def rendered_rules(helm: Path, ratios: dict[str, float], folder: Path) -> dict[str, dict[str, Any]]:
    """The PrometheusRules the chart renders with rules on and ``ratios`` as logDirUsedRatio: name -> spec."""
    values = {"metrics": {"prometheusRules": {"enabled": True, "logDirUsedRatio": ratios}}}
    result = helm_template(helm, values, folder)
    assert result.returncode == 0, result.stderr
    return {doc["metadata"]["name"]: doc["spec"] for doc in yaml.safe_load_all(result.stdout)
            if doc and doc["kind"] == "PrometheusRule"}


def disk_alert_tests(warning: float, critical: float, warns_at: float, pages_at: float, quiet_at: float
                     ) -> dict[str, Any]:
    """promtool tests of the disk alerts with these thresholds: a dir at ``warns_at`` (between them) warns after 15
    minutes and does not page, one at ``pages_at`` pages after 5, one at ``quiet_at`` (under the warning) is quiet.
    Each alert's description names its threshold."""
    def percent(ratio: float) -> str:
        return f"{ratio * 100:g}%"

    def summary(broker: str, ratio: float) -> str:
        return f"Kafka cluster prod: broker {broker}'s log dir /data/a is {percent(ratio)} full"

    warns = (f"Over {warning} of it has been used for 15 minutes. Move replicas off it before it fills: a "
             f"PartitionReassignment with plan goal RelieveCapacity and a threshold under {warning} moves the fewest "
             "bytes that bring every dir under it (to another dir of the broker first, else to a broker of its rack; "
             "execution.logDirThrottle and execution.throttle cap the copies). kpo_broker_disk_used_ratio says how "
             "full the broker is as a whole.")
    pages = (f"Over {critical} of it has been used for 5 minutes. Kafka takes a log dir offline when a write fails "
             "for want of space, with every replica in it. Free it now (retention, or move replicas away).")

    def series(broker: str, ratio: float) -> dict[str, str]:
        return {"series": f'kpo_log_dir_used_ratio{{cluster="prod", broker="{broker}", dir="/data/a"}}',
                "values": f"{ratio}x30"}

    def labels(broker: str, severity: str) -> dict[str, str]:
        return {"severity": severity, "cluster": "prod", "broker": broker, "dir": "/data/a"}

    return {"rule_files": [f"{Path(DISK_RULES).stem}.rules.yaml"], "evaluation_interval": "1m", "tests": [
        {"name": f"{warns_at} warns over {warning}, and does not page under {critical}", "interval": "1m",
         "input_series": [series("1", warns_at)], "alert_rule_test": [
            {"eval_time": "14m", "alertname": "KpoLogDirAboveThreshold", "exp_alerts": []},
            {"eval_time": "16m", "alertname": "KpoLogDirAboveThreshold", "exp_alerts": [
                {"exp_labels": labels("1", "warning"),
                 "exp_annotations": {"summary": summary("1", warns_at), "description": warns}}]},
            {"eval_time": "16m", "alertname": "KpoLogDirNearlyFull", "exp_alerts": []}]},
        {"name": f"{pages_at} pages over {critical}", "interval": "1m",
         "input_series": [series("2", pages_at)], "alert_rule_test": [
            {"eval_time": "6m", "alertname": "KpoLogDirNearlyFull", "exp_alerts": [
                {"exp_labels": labels("2", "critical"),
                 "exp_annotations": {"summary": summary("2", pages_at), "description": pages}}]}]},
        {"name": f"{quiet_at} is under {warning}", "interval": "1m",
         "input_series": [series("3", quiet_at)], "alert_rule_test": [
            {"eval_time": "20m", "alertname": "KpoLogDirAboveThreshold", "exp_alerts": []},
            {"eval_time": "20m", "alertname": "KpoLogDirNearlyFull", "exp_alerts": []}]},
    ]}


def promtool_test(promtool: Path, spec: dict[str, Any], tests: dict[str, Any], folder: Path
                  ) -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` of ``tests`` on the rendered disk rules ``spec``, both written to ``folder``."""
    (folder / f"{Path(DISK_RULES).stem}.rules.yaml").write_text(yaml.safe_dump(spec, sort_keys=False, width=1000))
    (folder / "disk-thresholds.test.yaml").write_text(yaml.safe_dump(tests, sort_keys=False, width=1000))
    return run(promtool, "test", "rules", "disk-thresholds.test.yaml", cwd=folder)


def test_each_disk_alert_says_its_threshold_in_its_description() -> None:
    """The chart replaces the threshold of an alert's expr in its description too: the file must say it there."""
    rule_file = RULES_BY_NAME[DISK_RULES]
    rules = {rule["alert"]: rule for group in rule_groups(rule_file)["groups"] for rule in group["rules"]}
    assert {name: rules[name]["expr"] for name in ("KpoLogDirAboveThreshold", "KpoLogDirNearlyFull")} == {
        "KpoLogDirAboveThreshold": "kpo_log_dir_used_ratio > 0.85",
        "KpoLogDirNearlyFull": "kpo_log_dir_used_ratio > 0.95"}, "the files hold the chart's default thresholds"
    for rule in rules.values():
        threshold = rule["expr"].rpartition(" > ")[2]
        assert re.search(rf"\b{re.escape(threshold)}\b", rule["annotations"]["description"]), rule["alert"]
    chart = yaml.safe_load((CHART / "values.yaml").read_text())["metrics"]["prometheusRules"]["logDirUsedRatio"]
    assert chart == {"warning": 0.85, "critical": 0.95}


def test_with_the_default_thresholds_the_chart_renders_every_rule_file_unchanged(helm: Path, tmp_path: Path) -> None:
    rendered = rendered_rules(helm, {}, tmp_path)
    assert sorted(rendered.values(), key=str) == sorted((rule_groups(p) for p in RULE_FILES), key=str)


@pytest.mark.parametrize(("ratios", "warning", "critical", "warns_at", "pages_at", "quiet_at"), [
    ({}, 0.85, 0.95, 0.9, 0.97, 0.84),
    # Both lower: 0.8 and 0.92 fire here and would not with the defaults.
    ({"warning": 0.7, "critical": 0.9}, 0.7, 0.9, 0.8, 0.92, 0.69),
    ({"warning": 0.5}, 0.5, 0.95, 0.6, 0.96, 0.45),
], ids=["defaults", "both-lower", "warning-only"])
def test_the_disk_alerts_the_chart_renders_fire_at_the_thresholds_of_its_values(
        helm: Path, promtool: Path, tmp_path: Path, ratios: dict[str, float], warning: float, critical: float,
        warns_at: float, pages_at: float, quiet_at: float) -> None:
    spec = rendered_rules(helm, ratios, tmp_path)["kpo-disk"]
    exprs = {rule["alert"]: rule["expr"] for group in spec["groups"] for rule in group["rules"]}
    assert exprs == {"KpoLogDirAboveThreshold": f"kpo_log_dir_used_ratio > {warning}",
                     "KpoLogDirNearlyFull": f"kpo_log_dir_used_ratio > {critical}"}
    result = promtool_test(promtool, spec, disk_alert_tests(warning, critical, warns_at, pages_at, quiet_at), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


def test_promtool_tests_of_rendered_thresholds_can_fail(helm: Path, promtool: Path, tmp_path: Path) -> None:
    """The rendered rules with the defaults, tested as if the values had lowered them: the 0.8 dir does not warn."""
    spec = rendered_rules(helm, {}, tmp_path)["kpo-disk"]
    result = promtool_test(promtool, spec, disk_alert_tests(0.7, 0.9, 0.8, 0.92, 0.69), tmp_path)
    assert result.returncode != 0, result.stdout
    assert "KpoLogDirAboveThreshold" in result.stdout + result.stderr


@pytest.mark.parametrize(("ratios", "message"), [
    ({"warning": 1.2}, "at '/metrics/prometheusRules/logDirUsedRatio/warning': maximum"),
    ({"critical": 0}, "at '/metrics/prometheusRules/logDirUsedRatio/critical': exclusiveMinimum"),
    ({"warning": "0.8"}, "at '/metrics/prometheusRules/logDirUsedRatio/warning': got string, want number"),
    ({"warn": 0.8}, "additional properties 'warn' not allowed"),
    ({"warning": 0.96}, "metrics.prometheusRules.logDirUsedRatio.warning (0.96) must be below "
                        "metrics.prometheusRules.logDirUsedRatio.critical (0.95)"),
    ({"warning": 0.9, "critical": 0.9}, "metrics.prometheusRules.logDirUsedRatio.warning (0.9) must be below"),
], ids=["above-1", "zero", "a-string", "misspelt", "warning-above-critical", "equal"])
def test_the_chart_refuses_thresholds_out_of_range_or_out_of_order(helm: Path, tmp_path: Path,
                                                                   ratios: dict[str, Any], message: str) -> None:
    # Refused with the rules off as well: a wrong value fails the install, not the day the rules are turned on.
    result = helm_template(helm, {"metrics": {"prometheusRules": {"logDirUsedRatio": ratios}}}, tmp_path)
    assert result.returncode != 0, result.stdout
    assert message in result.stderr, result.stderr
