"""A real Prometheus scrapes the operator and evaluates kpo's shipped alert rules (issue 28).

The module runs its own operator (metrics on a free port, watching only this module's namespaces) with two clusters:
the test bed's default, and "wrongpass", the test bed's SASL user with a wrong password from a Secret. Prometheus
(built by `testbed/provision.sh prometheus`) scrapes it with a static config and loads deploy/prometheus/*.yaml as
shipped. One PartitionReassignment moves a partition on the default cluster, another is refused a login; then PromQL
over the HTTP API must see the first one's transition, every rule must be loaded and evaluated without error, and the
auth alert must fire for "wrongpass" and for nothing else. A second test kills the destination broker of two throttled
moves and follows the stalled-move and left-throttle gauges and the failure alert in Prometheus.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from confluent_kafka.admin import AdminClient
from kubernetes import client

from e2e.conftest import SESSION
from e2e.helm_support import free_port
from e2e.kafka_support import create_topic
from e2e.kube_support import GROUP, PLURALS, VERSION, Resources, wait_until
from e2e.operator_support import OperatorProcess, operator_env, watched_namespace
from e2e.prometheus_support import JOB, PrometheusServer
from e2e.reassignment_support import fill, spec_partitions
from e2e.test_broker_loss import _roles, node_down
from kpo_testbed import Testbed
from kpo_testbed.kafka import LIMITED_USER, SCRAM_MECHANISM
from kpo_testbed.prometheus import alert_names, shipped_rule_files, write_rule_file

KPR = "PartitionReassignment"
PREFIX = f"e2e-prom-{SESSION}"
SECRET = "kafka-kpo-prometheus-e2e"


@pytest.fixture(scope="module")
def prom_operator(testbed: Testbed, kpo_crds: None, api_client: client.ApiClient, operator_namespace: str,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_secret(operator_namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name=SECRET), string_data={"wrong": "wrong-" + secrets.token_hex(8)}))
    folder = tmp_path_factory.mktemp("prom-operator")
    config_path = folder / "kpo.yaml"
    config_path.write_text(yaml.safe_dump({"pollIntervalSeconds": 1, "clusters": {
        "default": {"bootstrapServers": testbed.state.kafka.bootstrap_servers},
        "wrongpass": {"bootstrapServers": testbed.state.kafka.sasl_bootstrap_servers,
                      "securityProtocol": "SASL_PLAINTEXT",
                      "sasl": {"mechanism": SCRAM_MECHANISM, "username": LIMITED_USER,
                               "passwordSecret": {"name": SECRET, "key": "wrong"}}},
    }}))
    env = operator_env(testbed.state.kube.kubeconfig, testbed.state.kafka.bootstrap_servers,
                       {"KPO_CONFIG": str(config_path), "KPO_NAMESPACE": operator_namespace})
    operator = OperatorProcess(env, folder / "operator.log", namespaces=[f"{PREFIX}-*"], metrics_port=free_port())
    operator.start()
    try:
        yield operator
    finally:
        operator.stop()
        core.delete_namespaced_secret(SECRET, operator_namespace)


@pytest.fixture
def prometheus(prom_operator: OperatorProcess, tmp_path: Path) -> Iterator[PrometheusServer]:
    rules = [write_rule_file(p, tmp_path) for p in shipped_rule_files()]
    server = PrometheusServer(tmp_path / "prometheus", [f"127.0.0.1:{prom_operator.metrics_port}"], rules)
    try:
        server.start()
        yield server
    finally:
        server.stop()  # also when it never became ready: no prometheus outlives the test


@pytest.fixture
def namespace(api_client: client.ApiClient, prom_operator: OperatorProcess) -> Iterator[str]:
    with watched_namespace(api_client, PREFIX) as name:
        yield name
        # While this module's operator still runs: its finalizers take back what the resources hold on the shared
        # brokers, and the namespace does not stay Terminating after the operator is gone.
        resources = Resources(api_client, name)

        def left() -> list[str]:
            listed = cast(dict[str, Any],
                          resources.custom.list_namespaced_custom_object(GROUP, VERSION, name, PLURALS[KPR]))
            return [item["metadata"]["name"] for item in listed["items"]]

        for kpr in left():
            resources.delete(KPR, kpr)
        wait_until(lambda: not left(), 120, "the resources released")


def value(sample: dict[str, Any]) -> float:
    return float(sample["value"][1])


def test_prometheus_scrapes_kpo_and_evaluates_its_alert_rules(
        prometheus: PrometheusServer, kafka_admin: AdminClient, topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 1, assignment=[[1, 2]])
    resources.create(KPR, "move", {"partitions": spec_partitions(topic_name, {0: [2, 3]})})
    resources.create(KPR, "refused", {"clusterRef": "wrongpass",
                                      "partitions": spec_partitions(topic_name, {0: [3, 1]})})
    resources.wait_phase(KPR, "move", "Succeeded", timeout=90)

    up = wait_until(lambda: prometheus.query(f'up{{job="{JOB}"}} == 1'), 30, "a successful scrape of the operator")
    assert len(up) == 1, up

    # The operator is this module's own: its only Succeeded transition is "move"'s.
    succeeded = f'kpo_phase_transitions_total{{job="{JOB}",kind="{KPR}",phase="Succeeded"}}'
    seen = wait_until(lambda: prometheus.query(succeeded), 30, f"{succeeded} in Prometheus")
    print(f"PromQL {succeeded}: {seen}")
    assert [value(s) for s in seen] == [1.0], seen
    at_rest = prometheus.query(f'kpo_resources{{job="{JOB}",kind="{KPR}",phase="Succeeded"}}')
    assert [value(s) for s in at_rest] == [1.0], at_rest
    # The gauges the stalled-move and left-throttle alerts read are real series, 0 on both configured clusters.
    for gauge in ("kpo_stalled_moves", "kpo_ended_resources_holding_throttle"):
        found = {s["metric"]["cluster"]: value(s) for s in prometheus.query(f'{gauge}{{job="{JOB}"}}')}
        assert found == {"default": 0.0, "wrongpass": 0.0}, (gauge, found)

    # Every shipped rule is loaded, evaluated and healthy.
    shipped = {name for path in shipped_rule_files() for name in alert_names(path)}

    def evaluated() -> list[dict[str, Any]] | None:
        rules = [r for g in prometheus.api("rules")["groups"] for r in g["rules"]]
        done = all(not str(r.get("lastEvaluation", "")).startswith("0001-") for r in rules)
        return rules if rules and done else None

    rules = wait_until(evaluated, 30, "every rule evaluated once")
    assert {r["name"] for r in rules} == shipped
    unhealthy = [(r["name"], r["health"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert unhealthy == [], unhealthy
    print(f"{len(rules)} rules loaded and healthy: {sorted(shipped)}")

    # The refused login fires the auth alert, for that cluster only, and nothing else fires.
    def firing() -> list[dict[str, Any]] | None:
        alerts = [a for a in prometheus.api("alerts")["alerts"] if a["state"] == "firing"]
        return alerts if any(a["labels"]["alertname"] == "KpoKafkaAuthFailed" for a in alerts) else None

    alerts = wait_until(firing, 60, "KpoKafkaAuthFailed firing")
    print("firing:", [(a["labels"]["alertname"], a["labels"].get("cluster"), a["labels"].get("reason"))
                      for a in alerts])
    assert {(a["labels"]["alertname"], a["labels"]["cluster"], a["labels"]["reason"]) for a in alerts} == \
        {("KpoKafkaAuthFailed", "wrongpass", "AuthenticationFailed")}
    stalled = resources.condition(KPR, "refused", "Stalled")
    assert stalled is not None and stalled["reason"] == "AuthenticationFailed", stalled


def test_a_stall_a_left_throttle_and_a_failure_reach_prometheus(
        testbed: Testbed, prometheus: PrometheusServer, kafka_admin: AdminClient, bootstrap_servers: str,
        topic_name: str, resources: Resources) -> None:
    """The execution alerts' inputs from a real stall: two throttled moves onto a broker that is then killed. The
    Report move stays flagged (kpo_stalled_moves 1); the Cancel move is cancelled and its resource ends Failed with
    reason MoveStalled (KpoResourceFailed fires); stopping the Report resource while the broker is down leaves the
    broker's throttle rate it cannot take back (kpo_ended_resources_holding_throttle >= 1). Once the broker is back,
    both gauges return to 0."""
    controller, victim, _ = _roles(testbed)
    # As in e2e/test_pause_and_stall.py: 15 MB per partition under 500 kB/s keep both moves in flight for a minute.
    create_topic(kafka_admin, topic_name, 2, assignment=[[controller], [controller]])
    fill(bootstrap_servers, topic_name, [0, 1], messages=1500)
    execution = {"throttle": 500_000, "stallAfterSeconds": 10}
    resources.create(KPR, "report", {"partitions": spec_partitions(topic_name, {0: [victim]}),
                                     "execution": execution})
    resources.create(KPR, "cancel", {"partitions": spec_partitions(topic_name, {1: [victim]}),
                                     "execution": {**execution, "onStall": "Cancel"}})

    def copying(name: str) -> bool:
        moves = resources.status(KPR, name).get("inFlight") or []
        return bool(moves) and int(moves[0].get("copiedBytes") or 0) > 0

    wait_until(lambda: copying("report") and copying("cancel"), 60, "both moves copying")

    def gauge(name: str) -> float | None:
        found = prometheus.query(f'{name}{{job="{JOB}",cluster="default"}}')
        return value(found[0]) if found else None

    with node_down(testbed, victim):
        resources.wait_phase(KPR, "cancel", "Failed", timeout=60)
        # Only the Report move is still a stalled move in flight; the Cancel one was cancelled for it.
        wait_until(lambda: gauge("kpo_stalled_moves") == 1.0, 30, "kpo_stalled_moves 1 in Prometheus")

        def failed_alert() -> list[dict[str, Any]]:
            return [a for a in prometheus.api("alerts")["alerts"] if a["state"] == "firing"
                    and a["labels"]["alertname"] == "KpoResourceFailed"]

        alerts = wait_until(failed_alert, 30, "KpoResourceFailed firing")
        assert [(a["labels"]["kind"], a["labels"]["reason"]) for a in alerts] == [(KPR, "MoveStalled")], alerts

        resources.patch_spec(KPR, "report", {"stop": True})
        resources.wait_phase(KPR, "report", "Stopped", timeout=60)
        progressing = resources.condition(KPR, "report", "Progressing")
        assert progressing is not None and progressing["reason"] == "ThrottleCleanupPending", progressing
        wait_until(lambda: (gauge("kpo_ended_resources_holding_throttle") or 0) >= 1.0, 30,
                   "kpo_ended_resources_holding_throttle in Prometheus")
        held = gauge("kpo_ended_resources_holding_throttle")
        print(f"while broker {victim} is down: kpo_ended_resources_holding_throttle {held}, "
              f"firing {[(a['labels']['alertname'], a['labels'].get('reason')) for a in alerts]}")
        assert gauge("kpo_stalled_moves") == 0.0, "a stopped resource's moves are no longer in flight"

    # The broker is back: kpo takes its rates back, and both gauges say so.
    wait_until(lambda: gauge("kpo_ended_resources_holding_throttle") == 0.0, 120,
               "kpo_ended_resources_holding_throttle back to 0")
    assert gauge("kpo_stalled_moves") == 0.0
