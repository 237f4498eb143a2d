"""The Helm chart with the real ``helm`` against the real kube-apiserver: lint, template, schema, install.

There is no kubelet, so no pod runs: what ``helm install`` can prove is that every object is accepted by the API
server, and — with a server-side dry run of the Deployment's pod in a namespace that enforces the "restricted" Pod
Security Standard — that the pod would be admitted as it is.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.helm_support import CHART, documents, helm, installed, template
from kpo.config import OperatorConfig, PlannerConfig
from kpo.k8s.throttle_record import record_name
from kpo_testbed import Testbed
from kpo_testbed.prometheus import PrometheusBinaries, rule_groups, shipped_rule_files

FULL_VALUES: dict[str, Any] = {
    "watchNamespaces": ["team-a", "team-b"],
    "kafka": {
        "defaultCluster": "main",
        "clusters": {
            "main": {"bootstrapServers": "kafka-0.kafka:9092,kafka-1.kafka:9092"},
            "secure": {
                "bootstrapServers": "secure.kafka:9093",
                "securityProtocol": "SASL_SSL",
                "sasl": {"mechanism": "SCRAM-SHA-512", "usernameSecret": {"name": "kafka-kpo", "key": "user"},
                         "passwordSecret": {"name": "kafka-kpo", "key": "password"}},
                "tls": {"caSecret": {"name": "kafka-ca", "key": "ca.crt"}},
            },
            "mtls": {
                "bootstrapServers": "mtls.kafka:9094",
                "securityProtocol": "SSL",
                "tls": {"caSecret": {"name": "kafka-ca", "key": "ca.crt"},
                        "certSecret": {"name": "kpo-tls", "key": "tls.crt", "namespace": "certs"},
                        "keySecret": {"name": "kpo-tls", "key": "tls.key", "namespace": "certs"}},
            },
        },
    },
    "planner": {"backend": "sparkApplication",
                "sparkApplication": {"namespace": "spark-jobs", "timeoutSeconds": 900,
                                     "driver": {"coreRequest": "500m"}},
                "workDir": "/var/lib/kpo/plans", "workVolume": {"persistentVolumeClaim": {"claimName": "kpo-plans"}}},
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
    "operator": {"verbose": True, "pollIntervalSeconds": 5},
    "autoPropose": {"clusters": {"main": {"namespace": "team-a", "settleSeconds": 120, "ignoreBrokers": [7],
                                          "plan": {"excludeTopicPattern": "tmp-.*"}}}},
}


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_helm_lint_is_clean(testbed: Testbed, tmp_path: Path) -> None:
    result = helm(testbed, "lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout
    values = tmp_path / "full.yaml"
    values.write_text(yaml.safe_dump(FULL_VALUES))
    result = helm(testbed, "lint", "--strict", str(CHART), "-f", str(values))
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


def test_template_renders_the_operator_config_the_operator_accepts(testbed: Testbed, tmp_path: Path) -> None:
    docs = documents(template(testbed, FULL_VALUES, tmp_path, namespace="kpo-system").stdout)
    config_map = by_kind(docs, "ConfigMap")[0]
    operator_config = OperatorConfig.model_validate(yaml.safe_load(config_map["data"]["config.yaml"]))
    assert operator_config.default_cluster == "main"
    assert operator_config.namespace == "kpo-system"
    assert operator_config.poll_interval_seconds == 5
    secure = operator_config.connection("secure")
    assert secure.sasl is not None and secure.sasl.password_secret.name == "kafka-kpo"
    planner = yaml.safe_load(config_map["data"]["planner.yaml"])
    assert planner["backend"] == "sparkApplication"
    assert planner["sparkApplication"]["namespace"] == "spark-jobs"
    assert planner["sparkApplication"]["timeoutSeconds"] == 900
    assert planner["sparkApplication"]["driver"]["coreRequest"] == "500m"
    accepted = PlannerConfig.model_validate(planner).spark_application
    assert accepted.timeout_seconds == 900 and accepted.driver.core_request == "500m"
    assert planner["sparkApplication"]["mainApplicationFile"] == "local:///opt/kpo/planner-job.py"
    assert PlannerConfig.model_validate(planner).work_dir == "/var/lib/kpo/plans"
    auto = operator_config.auto_propose.clusters["main"]
    assert (auto.namespace, auto.approval, auto.settle_seconds, auto.ignore_brokers) == ("team-a", "Manual", 120,
                                                                                         {7})
    assert auto.plan == {"excludeTopicPattern": "tmp-.*"}

    deployment = by_kind(docs, "Deployment")[0]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "kpo"]
    assert "--namespace=team-a" in container["args"] and "--namespace=team-b" in container["args"]
    assert "--verbose" in container["args"]
    # The plans' work dir: the shared volume, mounted where the planner config says.
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["plans"]["persistentVolumeClaim"] == {"claimName": "kpo-plans"}
    assert {"name": "plans", "mountPath": "/var/lib/kpo/plans"} in container["volumeMounts"]

    # Secrets: `get` on exactly the named ones, per namespace, and nothing else anywhere.
    secret_rules = {(role["metadata"]["namespace"], tuple(rule["resourceNames"]), tuple(rule["verbs"]))
                    for role in by_kind(docs, "Role") for rule in role["rules"] if "secrets" in rule["resources"]}
    assert secret_rules == {("kpo-system", ("kafka-ca", "kafka-kpo"), ("get",)), ("certs", ("kpo-tls",), ("get",))}
    for role in by_kind(docs, "ClusterRole"):
        assert not any("secrets" in rule["resources"] for rule in role["rules"]), role["metadata"]["name"]
    # Namespaced permissions are RoleBindings in the watched namespaces only.
    workload = {(b["metadata"]["namespace"], b["roleRef"]["name"]) for b in by_kind(docs, "RoleBinding")
                if b["roleRef"]["kind"] == "ClusterRole"}
    assert workload == {("team-a", "kpo"), ("team-b", "kpo")}  # release "kpo": its full name is "kpo"
    assert [b["metadata"]["name"] for b in by_kind(docs, "ClusterRoleBinding")] == ["kpo-discovery"]
    # SparkApplications: only with that backend, only in its namespace.
    spark = [r for r in by_kind(docs, "Role") if any("sparkapplications" in rule["resources"] for rule in r["rules"])]
    assert [r["metadata"]["namespace"] for r in spark] == ["spark-jobs"]
    assert by_kind(docs, "ServiceMonitor")[0]["metadata"]["labels"]["release"] == "prometheus"
    # autoPropose on: kpo may create PartitionReassignments (its proposals), nothing else new.
    kpo_role = next(r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"] == "kpo")
    assert any(rule["resources"] == ["partitionreassignments"] and rule["verbs"] == ["create"]
               for rule in kpo_role["rules"])


def test_the_chart_renders_the_shipped_alert_rules_as_prometheus_rules_promtool_accepts(
        testbed: Testbed, tmp_path: Path) -> None:
    values = {"metrics": {"prometheusRules": {"enabled": True, "labels": {"release": "prometheus"}}}}
    rendered = by_kind(documents(template(testbed, values, tmp_path, namespace="monitoring").stdout), "PrometheusRule")
    shipped = shipped_rule_files()
    assert len(shipped) == 3 and len(rendered) == len(shipped), [r["metadata"]["name"] for r in rendered]
    # Each file's rules exactly (annotations' {{ $labels }} untouched by Helm); the release's name and labels.
    assert sorted((r["spec"] for r in rendered), key=str) == sorted((rule_groups(p) for p in shipped), key=str)
    for rule in rendered:
        assert rule["metadata"]["namespace"] == "monitoring"
        assert rule["metadata"]["labels"]["release"] == "prometheus"
        assert rule["metadata"]["labels"]["app.kubernetes.io/instance"] == "kpo"
    assert len({r["metadata"]["name"] for r in rendered}) == len(rendered)
    # What the Prometheus operator hands Prometheus is the spec: promtool checks it as rendered.
    promtool = PrometheusBinaries.from_cache().promtool
    files = []
    for rule in rendered:
        path = tmp_path / f"{rule['metadata']['name']}.rules.yaml"
        path.write_text(yaml.safe_dump(rule["spec"]))
        files.append(str(path))
    checked = subprocess.run([str(promtool), "check", "rules", *files], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # Off unless asked, like the ServiceMonitor.
    assert not by_kind(documents(template(testbed, {}, tmp_path).stdout), "PrometheusRule")


def test_default_values_grant_no_secret_and_no_spark(testbed: Testbed, tmp_path: Path) -> None:
    docs = documents(template(testbed, {}, tmp_path).stdout)
    rules = [rule for role in by_kind(docs, "ClusterRole") + by_kind(docs, "Role") for rule in role["rules"]]
    assert not any("secrets" in rule["resources"] for rule in rules)
    assert not any("sparkapplications" in rule["resources"] for rule in rules)
    assert not any("*" in rule["verbs"] or "*" in rule["resources"] for rule in rules)
    assert not by_kind(docs, "ServiceMonitor")
    assert sorted(b["metadata"]["name"] for b in by_kind(docs, "ClusterRoleBinding")) == ["kpo", "kpo-discovery"]
    assert not any("create" in rule["verbs"] and "partitionreassignments" in rule["resources"] for rule in rules), \
        "kpo creates no PartitionReassignment unless autoPropose names a cluster"
    config_map = by_kind(docs, "ConfigMap")[0]
    assert "autoPropose" not in yaml.safe_load(config_map["data"]["config.yaml"])


@pytest.mark.parametrize(("values", "named"), [
    ({"planner": {"backend": "yarn"}}, "/planner/backend"),
    ({"kafka": {"clusters": {"default": {"bootstrapServers": "no-port"}}}}, "/kafka/clusters/default/bootstrapServers"),
    ({"kafka": {"clusters": {"default": {"bootstrapServers": "k:9092", "securityProtocol": "SASL_SSL"}}}},
     "/kafka/clusters/default"),
    ({"kafka": {"clusters": {"default": {"bootstrapServers": "k:9092", "securityProtocol": "SASL_PLAINTEXT",
                                         "sasl": {"username": "u", "passwordSecret": {"name": "s"}}}}}},
     "/kafka/clusters/default/sasl/passwordSecret"),
    ({"metrics": {"port": 70000}}, "/metrics/port"),
    ({"operator": {"pollIntervalSeconds": 0}}, "/operator/pollIntervalSeconds"),
    ({"watchNamespaces": ["Not_A_Namespace"]}, "/watchNamespaces/0"),
    ({"replicas": 3}, "'replicas' not allowed"),
    ({"replicaCount": 0}, "/replicaCount"),
    ({"leaderElection": {"enabled": True, "leaseTime": 5}}, "'leaseTime' not allowed"),
    ({"autoPropose": {"clusters": {"default": {"namespace": "ops", "approval": "Sometimes"}}}},
     "/autoPropose/clusters/default/approval"),
    # The Spark Operator's webhook would refuse every SparkApplication with it (sparkconf_validator.go).
    ({"planner": {"sparkApplication": {"sparkConf": {"spark.kubernetes.driver.master": "https://10.0.0.1"}}}},
     "/planner/sparkApplication/sparkConf"),
    ({"planner": {"sparkApplication": {"timeoutSeconds": 0}}}, "/planner/sparkApplication/timeoutSeconds"),
])
def test_the_schema_rejects_wrong_values_naming_them(testbed: Testbed, tmp_path: Path, values: dict[str, Any],
                                                     named: str) -> None:
    result = template(testbed, values, tmp_path, check=False)
    assert result.returncode != 0
    assert "don't meet the specifications of the schema" in result.stderr
    assert named in result.stderr, result.stderr


def test_leader_election_renders_its_config_lease_role_and_pod_name(testbed: Testbed, tmp_path: Path) -> None:
    docs = documents(template(testbed, {}, tmp_path, namespace="kpo-system").stdout)
    config_map = by_kind(docs, "ConfigMap")[0]
    election = OperatorConfig.model_validate(yaml.safe_load(config_map["data"]["config.yaml"])).leader_election
    assert election.enabled and election.lease_name == "kpo-leader"  # release "kpo": its full name is "kpo"
    roles = {r["metadata"]["name"]: r for r in by_kind(docs, "Role")}
    lease_role = roles["kpo-leader-election"]
    assert lease_role["metadata"]["namespace"] == "kpo-system"
    assert lease_role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["kpo-leader"],
         "verbs": ["get", "update"]}]
    bindings = {b["metadata"]["name"]: b for b in by_kind(docs, "RoleBinding")}
    assert bindings["kpo-leader-election"]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                         "name": "kpo-leader-election"}
    container = by_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}

    single = documents(template(testbed, {"replicaCount": 1, "leaderElection": {"enabled": False}}, tmp_path,
                                namespace="kpo-system").stdout)
    assert by_kind(single, "Deployment")[0]["spec"]["strategy"] == {"type": "Recreate"}
    assert "kpo-leader-election" not in {r["metadata"]["name"] for r in by_kind(single, "Role")}


def test_two_replicas_without_leader_election_are_refused(testbed: Testbed, tmp_path: Path) -> None:
    result = template(testbed, {"leaderElection": {"enabled": False}}, tmp_path, check=False)
    assert result.returncode != 0
    assert "replicaCount 2 needs leaderElection.enabled" in result.stderr, result.stderr


def test_a_work_dir_outside_tmp_needs_a_volume(testbed: Testbed, tmp_path: Path) -> None:
    result = template(testbed, {"planner": {"workDir": "/var/lib/kpo/plans"}}, tmp_path, check=False)
    assert result.returncode != 0
    assert "planner.workDir" in result.stderr and "planner.workVolume" in result.stderr, result.stderr


def test_a_default_cluster_that_is_not_configured_is_refused(testbed: Testbed, tmp_path: Path) -> None:
    result = template(testbed, {"kafka": {"defaultCluster": "east"}}, tmp_path, check=False)
    assert result.returncode != 0
    assert 'kafka.defaultCluster "east" names no cluster' in result.stderr


def test_helm_install_with_a_wrong_value_creates_nothing(testbed: Testbed, api_client: client.ApiClient,
                                                        namespace: str, tmp_path: Path) -> None:
    values = tmp_path / "wrong.yaml"
    values.write_text(yaml.safe_dump({"planner": {"backend": "yarn"}}))
    result = helm(testbed, "install", "wrong", str(CHART), "-n", namespace, "-f", str(values), check=False)
    assert result.returncode != 0 and "/planner/backend" in result.stderr
    assert client.AppsV1Api(api_client).list_namespaced_deployment(namespace).items == []
    assert "wrong" not in helm(testbed, "list", "-n", namespace, "-q").stdout


def test_helm_install_creates_a_restricted_deployment(testbed: Testbed, api_client: client.ApiClient, namespace: str,
                                                     tmp_path: Path) -> None:
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    # The namespace enforces the "restricted" Pod Security Standard, as a hardened cluster would.
    core.patch_namespace(namespace, {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}})
    with installed(testbed, namespace, {"kafka": {"clusters": {"default": {"bootstrapServers": "k:9092"}}}},
                   tmp_path) as release:
        status = helm(testbed, "status", release.name, "-n", namespace).stdout
        assert "STATUS: deployed" in status
        assert "kind: PartitionReassignment" in status  # NOTES: how to apply a first resource

        deployment = apps.read_namespaced_deployment(release.fullname, namespace)
        # Two replicas, one acting: the one holding the Lease (kpo.leadership); a rolling update is safe.
        assert deployment.spec.replicas == 2
        assert deployment.spec.strategy.type == "RollingUpdate"
        assert deployment.spec.strategy.rolling_update.max_unavailable == 0
        pod = deployment.spec.template.spec
        container = pod.containers[0]
        assert container.security_context.read_only_root_filesystem is True
        assert container.security_context.capabilities.drop == ["ALL"]
        assert container.liveness_probe.http_get.path == "/healthz"
        assert container.resources.requests["memory"]
        assert core.read_namespaced_service(f"{release.fullname}-metrics", namespace).spec.ports[0].name == "metrics"
        assert core.read_namespaced_service_account(release.fullname, namespace)

        # The pod as the Deployment would create it, dry-run through admission: PodSecurity lets it in.
        template_pod = client.V1Pod(metadata=client.V1ObjectMeta(generate_name="kpo-admission-"), spec=pod)
        core.create_namespaced_pod(namespace, template_pod, dry_run="All")
        # The check can fail: the same pod with privilege escalation allowed is refused.
        container.security_context.allow_privilege_escalation = True
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod(namespace, template_pod, dry_run="All")
        assert refused.value.status == 403
        assert "restricted" in str(refused.value.body) and "allowPrivilegeEscalation" in str(refused.value.body)
    assert apps.list_namespaced_deployment(namespace).items == []  # helm uninstall removed it


def test_each_clusters_throttle_record_is_rendered_under_the_operators_name_and_granted_by_name(
        testbed: Testbed, tmp_path: Path) -> None:
    names = ["main", "Prod_EU", "a.b", "9_", "x" * 70]
    values = {"kafka": {"defaultCluster": "main", "clusters": {n: {"bootstrapServers": "k:9092"} for n in names}}}
    docs = documents(template(testbed, values, tmp_path).stdout)
    records = {d["metadata"]["annotations"]["kpo.dev/cluster"]: d["metadata"]["name"]
               for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith("kpo-throttles-")}
    assert set(names) <= set(records), records  # the chart's own "default" cluster comes with them
    assert records == {n: record_name(n) for n in records}
    role = next(d for d in by_kind(docs, "Role") if d["metadata"]["name"].endswith("-throttle-records"))
    [rule] = role["rules"]
    assert rule["resources"] == ["configmaps"] and rule["verbs"] == ["get", "patch"], "no create: the chart makes them"
    assert sorted(rule["resourceNames"]) == sorted(records.values())
