"""The Flux health checks kpo ships (deploy/flux/health-checks.yaml): one entry per kind, all alike. Their behaviour is
tested where Flux evaluates them, in e2e/test_flux.py (real kustomize-controller)."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
HEALTH_CHECKS = ROOT / "deploy" / "flux" / "health-checks.yaml"
KINDS = {"PartitionReassignment", "PreferredLeaderElection", "TopicPartitionCount"}


def test_every_kind_has_the_same_current_and_failed_expressions() -> None:
    exprs = yaml.safe_load(HEALTH_CHECKS.read_text())["spec"]["healthCheckExprs"]
    assert {e["kind"] for e in exprs} == KINDS and len(exprs) == len(KINDS)
    assert {e["apiVersion"] for e in exprs} == {"kpo.dev/v1alpha1"}
    assert len({(e["current"], e["failed"]) for e in exprs}) == 1
    current, failed = exprs[0]["current"], exprs[0]["failed"]
    # Current needs kpo to have seen this generation and said Ready; Failed is kpo's Stalled.
    assert "status.observedGeneration == metadata.generation" in current
    assert "c.type == 'Ready' && c.status == 'True'" in current
    assert "c.type == 'Stalled' && c.status == 'True'" in failed
