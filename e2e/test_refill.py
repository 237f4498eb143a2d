"""Refill between polls on the real cluster: a freed slot is refilled before the next poll, and the limits hold.

An operator of its own, polling only every 15 s, runs a PartitionReassignment of small partitions with one move per
broker, so one move at a time on three brokers. Polls alone would start at most one move per tick (each needs the
next poll to be seen done); refill between polls starts the next one as soon as a look shows the previous one ended.
The test counts, it does not time: fewer ticks than moves, moves started between polls (the operator's own counter),
and never two moves on one broker in any of the samples of ListPartitionReassignments taken meanwhile.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import AdminClient
from kubernetes import client

from e2e.helm_support import free_port, scrape
from e2e.kafka_support import assert_replicas, create_topic
from e2e.kube_support import Resources
from e2e.operator_support import OperatorProcess, operator_env, watched_namespace
from e2e.reassignment_support import fill, spec_partitions
from e2e.test_execution_control import Sampler
from e2e.test_metrics import samples
from kpo_testbed import Testbed

KPR = "PartitionReassignment"
PREFIX = f"e2e-refill-{uuid.uuid4().hex[:6]}"
POLL_SECONDS = 15
MOVES = 12


@pytest.fixture(scope="module")
def refill_operator(kpo_crds: None, testbed: Testbed, operator_namespace: str,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """An operator that watches only this module's namespaces and polls every 15 s, with its metrics endpoint; refill
    between polls at the operator's defaults (on), so this module fails if the default turns it off."""
    folder: Path = tmp_path_factory.mktemp("refill-operator")
    config_path = folder / "kpo.yaml"
    config_path.write_text(yaml.safe_dump({"pollIntervalSeconds": POLL_SECONDS, "clusters": {
        "default": {"bootstrapServers": testbed.state.kafka.bootstrap_servers}}}))
    env = operator_env(testbed.state.kube.kubeconfig, testbed.state.kafka.bootstrap_servers,
                       {"KPO_CONFIG": str(config_path), "KPO_NAMESPACE": operator_namespace,
                        "KPO_POLL_INTERVAL": str(POLL_SECONDS)})
    operator = OperatorProcess(env, folder / "operator.log", namespaces=[f"{PREFIX}-*"], metrics_port=free_port())
    operator.start()
    try:
        yield operator
    finally:
        operator.stop()


@pytest.fixture
def namespace(api_client: client.ApiClient, refill_operator: OperatorProcess) -> Iterator[str]:
    """A namespace only this module's operator watches."""
    with watched_namespace(api_client, PREFIX) as name:
        yield name


def test_freed_slots_are_refilled_between_polls_and_the_limit_holds(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources,
        refill_operator: OperatorProcess) -> None:
    # Single-replica partitions of ~200 kB spread over brokers 1-3, each moving one broker along: every move copies
    # from one broker to another, so with one move per broker only one move can be in flight at a time.
    create_topic(kafka_admin, topic_name, MOVES, assignment=[[1 + p % 3] for p in range(MOVES)])
    fill(bootstrap_servers, topic_name, list(range(MOVES)), messages=20)
    targets = {p: [1 + (p + 1) % 3] for p in range(MOVES)}
    with Sampler(bootstrap_servers, topic_name) as sampler:
        resources.create(KPR, "refilled", {"partitions": spec_partitions(topic_name, targets),
                                           "execution": {"maxMovesPerBroker": 1}})
        # Generous: polls alone would need a tick per move (MOVES x 15 s); the assertions below count, not time.
        resources.wait_phase(KPR, "refilled", "Succeeded", timeout=MOVES * POLL_SECONDS + 120)
    metrics = samples(scrape(refill_operator.metrics_port))
    ticks = metrics['kpo_reconcile_duration_seconds_count{kind="PartitionReassignment"}']
    between = metrics.get('kpo_moves_started_between_polls_total{cluster="default",kind="PartitionReassignment"}', 0)
    sent = re.findall(rf"{re.escape(topic_name)}-(\d+)->", refill_operator.log_text())
    submitted = {int(partition) for partition in sent}

    assert_replicas(kafka_admin, topic_name, targets)
    assert submitted == set(targets), refill_operator.log_tail()
    # Most moves were started by passes between polls. (A pass right after a completion may also send again a
    # partition whose metadata still lists the replica being dropped: a move that copies nothing and touches no
    # broker, so it is counted here but not by the limit.)
    assert between >= MOVES / 2, f"{between} of {MOVES} moves started between polls"
    # Polls alone start at most one move per tick here: fewer ticks than moves is only possible with refills.
    assert ticks < MOVES, f"{ticks} ticks for {MOVES} moves"
    busy = [s for s in sampler.samples if s]
    assert busy, "no move was ever seen in flight"
    for sample in sampler.samples:
        per_broker = Counter(b for move in sample.values() for b in move["replicas"])
        assert max(per_broker.values(), default=0) <= 1, f"two moves share a broker: {sample}"
