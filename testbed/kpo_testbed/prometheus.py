"""Prometheus beside the test bed: where provision.sh puts prometheus and promtool, and the shipped alert rules.

kpo ships its alerts as PrometheusRule objects for the Prometheus operator, written once in the chart
(helm/kpo/files/prometheus/*.yaml, rendered with ``metrics.prometheusRules.enabled``) and linked from deploy/prometheus/
for ``kubectl apply``. Their ``spec`` is a plain Prometheus rule file, which is what promtool and a bare prometheus
read. :func:`write_rule_file` writes that file, so the rules checked, unit-tested and loaded in e2e are byte for byte
the ones shipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kpo_testbed.paths import REPO_ROOT, cache_root, read_versions

RULES_DIR = REPO_ROOT / "helm" / "kpo" / "files" / "prometheus"
#: promtool unit tests, one ``<rule file stem>.test.yaml`` per shipped rule file.
RULE_TESTS_DIR = REPO_ROOT / "deploy" / "prometheus" / "tests"


@dataclass(frozen=True)
class PrometheusBinaries:
    prometheus: Path
    promtool: Path

    @classmethod
    def from_cache(cls) -> PrometheusBinaries:
        bin_dir = cache_root() / f"prometheus-{read_versions()['PROMETHEUS_VERSION']}" / "bin"
        return cls(prometheus=bin_dir / "prometheus", promtool=bin_dir / "promtool")

    def missing(self) -> list[Path]:
        return [p for p in (self.prometheus, self.promtool) if not p.is_file()]


def shipped_rule_files() -> list[Path]:
    """Every PrometheusRule kpo ships."""
    return sorted(p for p in RULES_DIR.glob("*.yaml") if _load(p).get("kind") == "PrometheusRule")


def rule_groups(prometheus_rule: Path) -> dict[str, Any]:
    """The plain rule file inside a PrometheusRule: ``{"groups": [...]}``."""
    spec = _load(prometheus_rule).get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("groups"), list):
        raise ValueError(f"{prometheus_rule}: a PrometheusRule needs spec.groups")
    return spec


def write_rule_file(prometheus_rule: Path, folder: Path) -> Path:
    """``folder/<stem>.rules.yaml``, the name the promtool unit tests load."""
    target = folder / f"{prometheus_rule.stem}.rules.yaml"
    target.write_text(yaml.safe_dump(rule_groups(prometheus_rule), sort_keys=False, width=1000))
    return target


def alert_names(prometheus_rule: Path) -> list[str]:
    return [rule["alert"] for group in rule_groups(prometheus_rule)["groups"] for rule in group["rules"]
            if "alert" in rule]


def _load(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text())
    return loaded if isinstance(loaded, dict) else {}
