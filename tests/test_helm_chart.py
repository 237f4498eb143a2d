"""Pure checks of the Helm chart's files: what can be known without running helm (the e2e suite runs helm itself).

The chart ships its own copy of the CRDs (Helm installs ``crds/`` of a chart before anything else), so this test
keeps that copy byte-identical to ``crds/`` and to what the API models generate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from kpo.api.crdfiles import crd_files, stale_files

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "kpo"


def values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return loaded


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())
    return loaded


def test_chart_crds_are_identical_to_the_repository_crds() -> None:
    chart_crds = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    repo_crds = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    assert chart_crds == repo_crds, "run `make crds`: it writes crds/ and helm/kpo/crds/"
    assert set(chart_crds) == set(crd_files())
    assert stale_files(CHART / "crds") == []


def test_every_default_value_is_declared_in_the_schema() -> None:
    def walk(value: Any, node: dict[str, Any], path: str) -> None:
        if "$ref" in node:
            node = schema()["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        if isinstance(value, dict) and "properties" in node:
            for key, child in value.items():
                assert key in node["properties"] or node.get("additionalProperties") not in (False, None), \
                    f"{path}.{key} is not in values.schema.json"
                child_schema = node["properties"].get(key) or node.get("additionalProperties")
                if isinstance(child_schema, dict):
                    walk(child, child_schema, f"{path}.{key}")

    top = schema()
    assert top["additionalProperties"] is False
    walk(values(), top, "")


def test_schema_closes_every_object_of_the_kafka_connection() -> None:
    # A misspelt key (passwordSecrets, bootstrapServer) must fail the install, not be ignored by the operator.
    connection = schema()["$defs"]["kafkaConnection"]
    assert connection["additionalProperties"] is False
    assert connection["properties"]["sasl"]["additionalProperties"] is False
    assert connection["properties"]["tls"]["additionalProperties"] is False
    assert schema()["$defs"]["secretKeyRef"]["additionalProperties"] is False


def test_values_name_the_defaults_the_operator_uses() -> None:
    from kpo.config import (  # noqa: PLC0415
        BalanceScoreConfig,
        ExecutionDefaults,
        LeaderElectionConfig,
        OperatorConfig,
        RefillConfig,
    )

    v = values()
    defaults = OperatorConfig()
    assert v["operator"]["pollIntervalSeconds"] == defaults.poll_interval_seconds
    assert v["operator"]["execution"] == ExecutionDefaults().model_dump(by_alias=True)
    assert v["operator"]["refill"] == RefillConfig().model_dump(by_alias=True)
    assert v["metrics"]["port"] == defaults.metrics_port
    assert v["metrics"]["balanceScore"] == BalanceScoreConfig().model_dump(by_alias=True)
    assert v["planner"]["backend"] == "local"
    # Leader election: on in the chart (off for a single process), two replicas, the operator's own timing.
    assert v["replicaCount"] == 2 and v["leaderElection"]["enabled"] is True
    election = LeaderElectionConfig()
    assert not election.enabled
    assert (v["leaderElection"]["leaseDurationSeconds"], v["leaderElection"]["renewDeadlineSeconds"],
            v["leaderElection"]["retryPeriodSeconds"]) == (election.lease_duration_seconds,
                                                           election.renew_deadline_seconds,
                                                           election.retry_period_seconds)


def test_the_lease_is_granted_in_the_release_namespace_only() -> None:
    rbac = (CHART / "templates" / "rbac.yaml").read_text()
    block = rbac[rbac.index("{{- if .Values.leaderElection.enabled }}"):]
    block = block[:block.index("{{- end }}")]
    assert "kind: Role\n" in block and "kind: RoleBinding" in block and "ClusterRole" not in block
    assert "resources: [leases]" in block and "verbs: [create]" in block and "verbs: [get, update]" in block
    assert 'resourceNames: [{{ include "kpo.leaseName" . | quote }}]' in block


def test_the_deployment_is_restricted_and_only_leader_elected_replicas_run_side_by_side() -> None:
    text = (CHART / "templates" / "deployment.yaml").read_text()
    for required in ("replicas: {{ .Values.replicaCount }}", "type: RollingUpdate", "type: Recreate",
                     "needs leaderElection.enabled", "fieldPath: metadata.name",
                     "runAsNonRoot: true", "readOnlyRootFilesystem: true",
                     "allowPrivilegeEscalation: false", "drop: [ALL]", "type: RuntimeDefault", "mountPath: /tmp",
                     "livenessProbe:", "readinessProbe:", "path: /healthz"):
        assert required in text, required


def test_notes_say_how_to_apply_a_first_resource() -> None:
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    assert "kind: PartitionReassignment" in notes
    assert "kubectl wait --for=condition=Ready" in notes
    assert "kubectl get kpo -A" in notes
