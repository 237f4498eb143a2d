"""Hundreds of PartitionReassignments on one cluster, and unusable clusters beside a healthy one (issue 25, items 4-5).

Judged from Kafka's view (ListPartitionReassignments sampled every 0.25 s, broker and topic configs) and the
Kubernetes API (phases, Events) only, so it holds any implementation of the executor to the same promises. Each test
runs an operator of its own (the operator's default poll interval and limits, a metrics endpoint) that watches only
its namespace, so its memory and its counters are this workload's. The scenario lives in
``e2e/concurrency_support.py``, shared with ``make bench-concurrency`` (500 resources).

Sizes: 200 resources of one ~30 kB partition each at a 20 KiB/s throttle, so ~96 s of bytes floor on the three
brokers; 2.5-3 minutes on the 2-core CI machine when the operator keeps up (153 s on main, which breaks the
limits). The isolation test should take well under a minute once unusable clusters cost nothing (144-230 s on main).
Its unusable clusters also carry TopicPartitionCounts and PreferredLeaderElections, whose ticks ask Kafka directly.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka.admin import AdminClient
from kubernetes import client

from e2e import concurrency_support as cs
from e2e.helm_support import free_port
from e2e.kube_support import Resources
from e2e.operator_support import OperatorProcess, operator_env, watched_namespace
from kpo_testbed import Testbed

#: The suite's size, for the CI budget; the bench runs 500.
RESOURCES = 200
POLL_SECONDS = 2.0  # the operator's default (kpo.config.OperatorConfig.poll_interval_seconds)


@contextmanager
def own_operator(testbed: Testbed, folder: Path, prefix: str, clusters: dict[str, str]) -> Iterator[OperatorProcess]:
    """An operator watching only ``<prefix>-*``, with the given clusters (name -> bootstrap servers) and the
    operator's defaults otherwise.

    The namespace is made before: Kopf 1.45 alone never served a namespace made while it listed namespaces at start
    (a CI run whose operator saw none of its 200 resources in 5 minutes). kpo fixes that (kpo.kopf_namespaces,
    tested by e2e/test_watched_namespaces.py); these tests are about limits, not about that window."""
    config = folder / "kpo.yaml"
    config.write_text(yaml.safe_dump({"pollIntervalSeconds": POLL_SECONDS, "clusters": {
        name: {"bootstrapServers": servers} for name, servers in clusters.items()}}))
    env = operator_env(testbed.state.kube.kubeconfig, testbed.state.kafka.bootstrap_servers,
                       {"KPO_CONFIG": str(config), "KPO_POLL_INTERVAL": str(POLL_SECONDS)})
    operator = OperatorProcess(env, folder / "operator.log", namespaces=[f"{prefix}-*"], metrics_port=free_port())
    operator.start()
    try:
        yield operator
    finally:
        operator.stop()


def test_hundreds_of_reassignments_hold_every_limit_and_leave_nothing_behind(
        kpo_crds: None, testbed: Testbed, api_client: client.ApiClient, kafka_admin: AdminClient,
        bootstrap_servers: str, tmp_path: Path) -> None:
    prefix = f"e2e-conc-{uuid.uuid4().hex[:6]}"
    scenario = cs.Scenario(resources=RESOURCES, poll_interval=POLL_SECONDS)
    # The namespace first (see own_operator).
    with watched_namespace(api_client, prefix) as namespace, \
            own_operator(testbed, tmp_path, prefix, {"default": bootstrap_servers}) as operator:
        harness = cs.Harness(bootstrap_servers, kafka_admin, api_client, namespace, operator.peak_rss_bytes,
                             operator.metrics_port)
        report = cs.run(harness, scenario, prefix)
        print(f"\n{report.text()}")
        # Speed and memory (first move, time against the schedule floor, RSS) are the bench's to judge: printed here.
        for beyond in report.beyond_bounds():
            print(f"beyond the bench's bound (not a failure here): {beyond}")
        failures = report.failures()
        assert not failures, "\n".join(failures) + f"\n\n{report.text()}\n\noperator log:\n{operator.log_tail(30)}"


# ------------------------------------------------------------------------------------------------ isolation

UNUSABLE_PER_CLUSTER = 4
ISOLATION_MESSAGES = 5  # x 10 kB: ~50 kB per partition, no throttle: a few seconds alone
DELETION_BOUND = 15.0


def _six_partition_move(admin: AdminClient, bootstrap_servers: str, topic: str) -> list[cs.PlannedMove]:
    """A topic of 6 partitions placed as the concurrency scenario does, filled, and the move of every partition's
    follower to the third broker."""
    moves = [cs.PlannedMove("healthy", topic, p, pair[0], pair, (pair[0], next(b for b in cs.BROKERS
                                                                               if b not in pair)))
             for p, pair in enumerate(cs.PAIRS)]
    cs.create_topics(admin, [topic])
    cs.produce(bootstrap_servers, moves, cs.Scenario(resources=6, messages=ISOLATION_MESSAGES))
    return moves


def _run_move(kube: cs.Kube, admin: AdminClient, bootstrap_servers: str, name: str,
              moves: list[cs.PlannedMove]) -> tuple[float, float | None]:
    """Create the resource, wait (bounded) until it Succeeded: (seconds to Succeeded, seconds to its first move
    seen in Kafka)."""
    sampler = cs.KafkaSampler(bootstrap_servers, admin, moves, 0.2)
    sampler.start()
    body: dict[str, Any] = {"apiVersion": f"{cs.GROUP}/{cs.VERSION}", "kind": cs.KIND, "metadata": {"name": name},
                            "spec": {"partitions": [{"topic": m.topic, "partition": m.partition,
                                                     "replicas": list(m.target)} for m in moves]}}
    try:
        kube.custom.create_namespaced_custom_object(cs.GROUP, cs.VERSION, kube.namespace, cs.PLURAL, body)
        created = time.monotonic()
        took = cs.wait(lambda: kube.phases().get(name) == "Succeeded", 150, interval=0.25)
        assert took is not None, f"{name} did not reach Succeeded within 150 s: {kube.phases().get(name)}"
    finally:
        sampler.stop()
    seen = [t for t in (sampler.submitted(m.key) for m in moves) if t is not None]
    return time.monotonic() - created if took is None else took, (min(seen) - created) if seen else None


def test_unusable_clusters_do_not_slow_a_healthy_one(
        kpo_crds: None, testbed: Testbed, api_client: client.ApiClient, kafka_admin: AdminClient,
        bootstrap_servers: str, tmp_path: Path) -> None:
    prefix = f"e2e-iso-{uuid.uuid4().hex[:6]}"
    solo_topic, busy_topic = f"{prefix}-solo", f"{prefix}-busy"
    with cs.unusable_endpoints() as unusable, watched_namespace(api_client, prefix) as namespace, \
            own_operator(testbed, tmp_path, prefix, {"default": bootstrap_servers, **unusable}):
        kube = cs.Kube(api_client, namespace)
        try:
            solo_moves = _six_partition_move(kafka_admin, bootstrap_servers, solo_topic)
            busy_moves = _six_partition_move(kafka_admin, bootstrap_servers, busy_topic)
            # The operator is watching and connected before anything is timed: a resource asking for what the
            # partition already has succeeds at its first tick.
            first = solo_moves[0]
            warm_up = {"apiVersion": f"{cs.GROUP}/{cs.VERSION}", "kind": cs.KIND, "metadata": {"name": "warm-up"},
                       "spec": {"partitions": [{"topic": first.topic, "partition": first.partition,
                                                "replicas": list(first.current)}]}}
            kube.custom.create_namespaced_custom_object(cs.GROUP, cs.VERSION, namespace, cs.PLURAL, warm_up)
            assert cs.wait(lambda: kube.phases().get("warm-up") == "Succeeded", 60) is not None, \
                f"the warm-up resource did not succeed within 60 s: {kube.phases()}"
            # The comparator, in the same run: the same move alone.
            solo, solo_first = _run_move(kube, kafka_admin, bootstrap_servers, "solo", solo_moves)

            names = []
            for cluster in unusable:
                for i in range(UNUSABLE_PER_CLUSTER):
                    name = f"{cluster}-{i}"
                    kube.create(cs.PlannedMove(name, f"{prefix}-nowhere", i, 1, (1, 2), (1, 3)), 20_480, cluster)
                    names.append(name)
            # The kinds that ask Kafka from their own tick (through the cluster's call gate, kpo.execution.gate): 12
            # of them held 12 of Kopf's 16 worker threads for most of every poll before the gate, so the healthy move
            # waited and the unusable PartitionReassignments never got a phase.
            direct = Resources(api_client, namespace)
            for cluster in unusable:
                for i in range(UNUSABLE_PER_CLUSTER):
                    direct.create("TopicPartitionCount", f"{cluster}-grow-{i}",
                                  {"clusterRef": cluster, "topic": f"{prefix}-nowhere-{i}", "partitions": 4})
                    direct.create("PreferredLeaderElection", f"{cluster}-elect-{i}",
                                  {"clusterRef": cluster, "topics": [f"{prefix}-nowhere-{i}"]})
            # Let them be ticked (and fail) before the healthy move is asked for; bounded either way.
            tried = cs.wait(lambda: all(kube.phases().get(n) for n in names), 30, interval=0.5)
            time.sleep(3)

            busy, busy_first = _run_move(kube, kafka_admin, bootstrap_servers, "healthy", busy_moves)
            phases = kube.phases()

            began = time.monotonic()
            for name in names:
                kube.custom.delete_namespaced_custom_object(cs.GROUP, cs.VERSION, namespace, cs.PLURAL, name)
            others = [(kind, f"{cluster}-{what}-{i}") for cluster in unusable for i in range(UNUSABLE_PER_CLUSTER)
                      for kind, what in (("TopicPartitionCount", "grow"), ("PreferredLeaderElection", "elect"))]
            for kind, name in others:
                direct.delete(kind, name)
            deleted = cs.wait(lambda: not set(names) & set(kube.phases())
                              and not any(direct.exists(kind, name) for kind, name in others), 60, interval=0.25)
            deletion = time.monotonic() - began if deleted is None else deleted

            figures = (f"solo {solo:.1f} s (first move after {_s(solo_first)}), beside {len(names)} unusable "
                       f"reassignments and {len(others)} counts and elections {busy:.1f} s (first move after "
                       f"{_s(busy_first)}); the unusable ones had a phase "
                       f"after {'n/a (30 s)' if tried is None else f'{tried:.1f} s'}, their phases "
                       f"{sorted({str(phases.get(n)) for n in names})}; deleting them took {deletion:.1f} s"
                       f"{'' if deleted is not None else ' (not all gone)'}")
            print(f"\n{figures}")
            bound = 1.5 * solo + 3.0
            assert busy <= bound, f"the healthy move took {busy:.1f} s beside unusable clusters (bound {bound:.1f} s)"\
                f": {figures}"
            assert solo_first is not None and busy_first is not None, figures
            assert busy_first <= solo_first + 2.0, f"its first move came late: {figures}"
            assert deleted is not None and deleted <= DELETION_BOUND, \
                f"deleting the unusable resources took more than {DELETION_BOUND} s: {figures}"
        finally:
            with _suppress():
                kube.delete_all()
                if cs.wait(lambda: not kube.phases(), 60, interval=0.5) is None:
                    for name in kube.phases():
                        kube.custom.patch_namespaced_custom_object(cs.GROUP, cs.VERSION, namespace, cs.PLURAL, name,
                                                                   {"metadata": {"finalizers": None}})
            with _suppress():
                for future in kafka_admin.delete_topics([solo_topic, busy_topic], request_timeout=60).values():
                    future.result(timeout=90)


def _s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.1f} s"


@contextmanager
def _suppress() -> Iterator[None]:
    try:
        yield
    except Exception as exc:  # cleanup must not hide the test's own failure
        print(f"cleanup: {type(exc).__name__}: {exc}")
