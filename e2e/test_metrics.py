"""The metrics endpoint during a real reassignment, scraped over HTTP from the operator the chart deploys.

The chart is installed with its default, cluster-wide RBAC into an API server of this test's own (see
``e2e/helm_support.py``), and the operator runs as the chart's Deployment would, as its ServiceAccount. One partition
(~600 kB) moves under kpo's own replication throttle (``spec.execution.throttle``), slow enough to scrape it in
flight; a second resource points at a configured Kafka cluster that does not answer, so the error counters move too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kubernetes import client

from e2e.helm_support import (
    ChartOperator,
    ControlPlane,
    free_port,
    installed,
    kubectl,
    private_control_plane,
    scrape,
    service_account_kubeconfig,
)
from e2e.kafka_support import create_topic
from e2e.kube_support import Resources, wait_until
from e2e.reassignment_support import fill, spec_partitions
from kpo_testbed import Testbed

KPR = "PartitionReassignment"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value, labels as the exposition prints them."""
    found = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not line.startswith("#"):
            found[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return found


@pytest.fixture
def plane(testbed: Testbed, tmp_path: Path) -> Iterator[ControlPlane]:
    with private_control_plane(testbed, tmp_path / "kube") as started:
        yield started


def test_metrics_during_a_reassignment(testbed: Testbed, plane: ControlPlane, kafka_admin: AdminClient,
                                       bootstrap_servers: str, topic_name: str, tmp_path: Path) -> None:
    core = client.CoreV1Api(plane.api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="apps")))
    values = {
        "kafka": {"clusters": {
            "default": {"bootstrapServers": bootstrap_servers},
            # A configured cluster nobody listens on: every tick of a resource that uses it is a Kafka error.
            "down": {"bootstrapServers": f"127.0.0.1:{free_port()}", "requestTimeoutSeconds": 2},
        }},
        "operator": {"pollIntervalSeconds": 1},
        "probes": {"port": free_port()},
        "metrics": {"port": free_port()},
    }
    with installed(testbed, "kpo-system", values, tmp_path, kubeconfig=plane.kubeconfig) as release:
        kubectl(testbed, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s",
                kubeconfig=plane.kubeconfig)
        service = core.read_namespaced_service(f"{release.fullname}-metrics", "kpo-system")
        operator = ChartOperator(plane.api, release, service_account_kubeconfig(testbed, release, tmp_path / "sa"),
                                 tmp_path / "operator")
        assert service.spec.ports[0].target_port == "metrics"  # the Service scrapes the port the operator serves
        port = operator.metrics_port

        create_topic(kafka_admin, topic_name, 1, assignment=[[1, 2]])
        fill(bootstrap_servers, topic_name, [0], messages=60)
        resources = Resources(plane.api, "apps")
        operator.start()
        try:
            before = wait_until(lambda: _scraped(port), 30, "the metrics endpoint")
            assert before['kpo_moves_in_flight{cluster="default"}'] == 0
            assert before['kpo_throttles_active{cluster="default"}'] == 0

            resources.create(KPR, "slow", {"partitions": spec_partitions(topic_name, {0: [2, 3]}),
                                           "execution": {"throttle": 100_000}})
            resources.create(KPR, "unreachable", {"clusterRef": "down",
                                                  "partitions": spec_partitions(topic_name, {0: [3, 1]})})

            def in_flight() -> dict[str, float] | None:
                now = samples(scrape(port))
                return now if now.get('kpo_moves_in_flight{cluster="default"}') == 1 else None

            try:
                during = wait_until(in_flight, 60, "a move in flight in the metrics", interval=0.2)
            except AssertionError as timed_out:
                seen = {k: v for k, v in samples(scrape(port)).items() if k.startswith("kpo_")}
                raise AssertionError(f"{timed_out}\nstatus of slow: {resources.status(KPR, 'slow')}\n"
                                     f"kpo metrics: {seen}") from None
            # Broker 3 gains the replica, broker 1 drops it; broker 2 keeps its own.
            assert during['kpo_broker_moves_in_flight{broker="3",cluster="default"}'] == 1
            assert during['kpo_broker_moves_in_flight{broker="1",cluster="default"}'] == 1
            assert 'kpo_broker_moves_in_flight{broker="2",cluster="default"}' not in during
            assert during['kpo_resources{kind="PartitionReassignment",phase="Executing"}'] == 1
            # kpo's throttle is in place while the move runs. Its broker rates count only where kpo set them: on
            # a test bed shared with other sessions, another test's throttle may already hold a broker's rate.
            journal = resources.status(KPR, "slow").get("throttle") or {}
            assert journal, "kpo set no throttle"
            assert during['kpo_throttled_resources{cluster="default"}'] == 1
            assert during['kpo_throttles_active{cluster="default"}'] == len(journal.get("brokers") or [])

            status = resources.wait_phase(KPR, "slow", "Succeeded", timeout=120)

            def settled() -> dict[str, float] | None:
                now = samples(scrape(port))
                done = now.get('kpo_resources{kind="PartitionReassignment",phase="Succeeded"}') == 1 and \
                    now.get('kpo_moves_in_flight{cluster="default"}') == 0 and \
                    now.get('kpo_throttles_active{cluster="default"}') == 0 and \
                    now.get('kpo_throttled_resources{cluster="default"}') == 0 and \
                    now.get('kpo_kafka_errors_total{cluster="down",kind="PartitionReassignment",'
                            'reason="KafkaUnavailable"}', 0) >= 1
                return now if done else None

            after = wait_until(settled, 60, "the metrics to settle after success")
            moved = status["progress"]["bytesMoved"]
            assert moved >= 500_000
            assert after['kpo_bytes_moved_total{cluster="default",kind="PartitionReassignment"}'] == moved
            assert after['kpo_phase_transitions_total{kind="PartitionReassignment",phase="Succeeded"}'] == 1
            # The first tick submits and, refilling between polls (on by default), may watch the move to its end: two
            # ticks at least (that one and the one that says Succeeded), not one per poll.
            assert after['kpo_reconcile_duration_seconds_count{kind="PartitionReassignment"}'] >= 2
            assert 'kpo_broker_moves_in_flight{broker="3",cluster="default"}' not in after
            # Labelled counters appear with their first sample: no Kubernetes API error happened here (the unit
            # tests count a real ApiException), the process collectors are there from the start.
            assert "# TYPE process_resident_memory_bytes gauge" in scrape(port)
        finally:
            operator.stop()


def _scraped(port: int) -> dict[str, float] | None:
    try:
        return samples(scrape(port))
    except OSError:
        return None  # not listening yet: the operator is still starting
