"""The cluster balance score on the real test bed: the kpo_cluster_* gauges against an independent computation.

An operator of its own samples the test bed every second (``balanceScore.intervalSeconds: 1``) and a second, configured
cluster nobody listens on. The test computes the same numbers itself, straight from Kafka (DescribeCluster and
DescribeTopics with confluent-kafka, DescribeLogDirs with kafka-python, the ratios in a few lines here, not kpo's
code), around one sample of the operator: the sample must have begun after the test's first reading and ended before
its second, and the two readings must agree (the test bed is shared: another session may be producing), so the gauges
must equal them. Then a topic piles ~24 MB and 24 leaders on broker 1 and the gauges must follow; then two thirds of
it is reassigned to brokers 2 and 3 and the next sample must follow again. Which way each ratio moves depends on what
the shared test bed holds besides this topic, so the test checks equality with its own computation at each step, that
its topic's part of that computation moved as arranged, and that the ratios changed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from e2e.helm_support import free_port, scrape
from e2e.kafka_support import create_topic, wait_for
from e2e.operator_support import OperatorProcess, operator_env
from e2e.reassignment_support import fill, kafka, ongoing
from e2e.test_metrics import samples
from kpo.domain.model import TopicPartition
from kpo_testbed import Testbed

PREFIX = f"e2e-balance-{uuid.uuid4().hex[:6]}"
PARTITIONS = 24
MESSAGES = 100  # x 10 kB: ~1 MB per partition, ~24 MB on broker 1


@pytest.fixture(scope="module")
def balance_operator(kpo_crds: None, testbed: Testbed, operator_namespace: str,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    folder: Path = tmp_path_factory.mktemp("balance-operator")
    config_path = folder / "kpo.yaml"
    config_path.write_text(yaml.safe_dump({
        "pollIntervalSeconds": 5,
        "balanceScore": {"intervalSeconds": 1},
        "clusters": {
            "default": {"bootstrapServers": testbed.state.kafka.bootstrap_servers},
            "down": {"bootstrapServers": f"127.0.0.1:{free_port()}", "requestTimeoutSeconds": 1},
        }}))
    env = operator_env(testbed.state.kube.kubeconfig, testbed.state.kafka.bootstrap_servers,
                       {"KPO_CONFIG": str(config_path), "KPO_NAMESPACE": operator_namespace})
    # It watches a namespace pattern nobody creates: only the sampler has work to do.
    operator = OperatorProcess(env, folder / "operator.log", namespaces=[f"{PREFIX}-*"], metrics_port=free_port())
    operator.start()
    try:
        yield operator
    finally:
        operator.stop()


@dataclass(frozen=True)
class Reading:
    """Per live broker: bytes on disk, replicas, leaders; and the partitions crowded into too few racks."""

    bytes: dict[int, int]
    replicas: dict[int, int]
    leaders: dict[int, int]
    crowded: int
    partitions: int
    # The test's own topic: its bytes and leaders per broker.
    mine_bytes: dict[int, int]
    mine_leaders: dict[int, int]


def read_cluster(admin: AdminClient, bootstrap_servers: str, mine: str) -> Reading:
    racks = {n.id: n.rack for n in admin.describe_cluster().result(timeout=30).nodes}
    names = sorted(t for t in admin.list_topics(timeout=30).topics if not t.startswith("__"))
    replicas = dict.fromkeys(racks, 0)
    leaders = dict.fromkeys(racks, 0)
    mine_leaders = dict.fromkeys(racks, 0)
    crowded = partitions = 0
    racks_alive = len({r for r in racks.values() if r})
    for name, future in admin.describe_topics(TopicCollection(names)).items():
        try:
            description = future.result(timeout=30)
        except KafkaException:
            continue  # deleted meanwhile by another test
        for p in description.partitions:
            partitions += 1
            ids = [r.id for r in p.replicas]
            for b in ids:
                if b in replicas:
                    replicas[b] += 1
            if p.leader is not None and p.leader.id in leaders:
                leaders[p.leader.id] += 1
                if name == mine:
                    mine_leaders[p.leader.id] += 1
            on = [racks.get(b) for b in ids]
            if racks_alive >= 2 and ids and all(on) and len(set(on)) < min(len(ids), racks_alive):
                crowded += 1
    sizes = dict.fromkeys(racks, 0)
    mine_sizes = dict.fromkeys(racks, 0)
    client = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        for broker in sorted(racks):
            for answer in client.describe_log_dirs(names, brokers=[broker]):
                for log_dir in answer["log_dirs"]:
                    for topic in log_dir.get("topics", []):
                        size = sum(int(p["partition_size"]) for p in topic["partitions"] if not p.get("is_future_key"))
                        sizes[broker] += size
                        if topic["name"] == mine:
                            mine_sizes[broker] += size
    finally:
        client.close()
    return Reading(sizes, replicas, leaders, crowded, partitions, mine_sizes, mine_leaders)


def ratios(values: dict[int, int]) -> tuple[float, float]:
    numbers = list(values.values())
    mean = sum(numbers) / len(numbers)
    return (max(numbers) / mean, min(numbers) / mean) if mean else (1.0, 1.0)


def gauge(scraped: dict[str, float], name: str, cluster: str = "default") -> float:
    return scraped[f'kpo_cluster_{name}{{cluster="{cluster}"}}']


def matched_sample(operator: OperatorProcess, admin: AdminClient, bootstrap_servers: str, mine: str
                   ) -> tuple[Reading, dict[str, float]]:
    """A sample of the operator's bracketed by two equal readings of the test's own, and those gauges."""
    last = ""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        before = read_cluster(admin, bootstrap_servers, mine)
        read_at = time.time()

        def sampled_since(read_at: float = read_at) -> dict[str, float] | None:
            try:
                now = samples(scrape(operator.metrics_port))
            except OSError:
                return None  # not listening yet: the operator is still starting
            stamp = now.get('kpo_cluster_balance_sampled_timestamp_seconds{cluster="default"}', 0)
            return now if stamp >= read_at else None

        scraped = wait_for(sampled_since, 30, "a balance sample after the test's reading", interval=0.2)
        after = read_cluster(admin, bootstrap_servers, mine)
        if before == after:
            return before, scraped
        last = f"{before} != {after}"
    raise AssertionError(f"the test bed never stood still for one sample (another session producing?): {last}")


def assert_gauges_equal(reading: Reading, scraped: dict[str, float]) -> None:
    expected = {
        "broker_bytes_max_over_mean": ratios(reading.bytes)[0],
        "broker_bytes_min_over_mean": ratios(reading.bytes)[1],
        "replicas_max_over_mean": ratios(reading.replicas)[0],
        "replicas_min_over_mean": ratios(reading.replicas)[1],
        "leaders_max_over_mean": ratios(reading.leaders)[0],
        "leaders_min_over_mean": ratios(reading.leaders)[1],
        "rack_spread_violations": reading.crowded,
        "balance_brokers": len(reading.bytes),
        "balance_partitions": reading.partitions,
    }
    found = {name: gauge(scraped, name) for name in expected}
    assert found == pytest.approx(expected, rel=1e-9), f"gauges {found} != computed {expected} from {reading}"
    assert gauge(scraped, "balance_up") == 1


def dir_shares(bootstrap_servers: str, brokers: list[int]) -> dict[tuple[int, str], float]:
    """Each log dir's share of its file system in use, from DescribeLogDirs' total and usable bytes (KIP-827)."""
    client = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        return {(broker, d["log_dir"]): 1 - int(d["usable_bytes"]) / int(d["total_bytes"])
                for broker in brokers for answer in client.describe_log_dirs([], brokers=[broker])
                for d in answer["log_dirs"]}
    finally:
        client.close()


def assert_disk_gauges_match(bootstrap_servers: str, scraped: dict[str, float], testbed: Testbed) -> None:
    """kpo's per-dir and per-broker disk gauges against Kafka's own report, read just after the sample (the disk
    holds more than the test bed: a share may move a little between the two readings)."""
    shares = dir_shares(bootstrap_servers, [1, 2, 3])
    assert {d for _b, d in shares} == {str(d) for b in (1, 2, 3) for d in testbed.state.kafka.log_dirs(b)}
    for (broker, log_dir), share in shares.items():
        found = scraped[f'kpo_log_dir_used_ratio{{broker="{broker}",cluster="default",dir="{log_dir}"}}']
        assert found == pytest.approx(share, abs=0.01), (broker, log_dir)
        assert 0 < found < 1
    for broker in (1, 2, 3):
        mine = [s for (b, _d), s in shares.items() if b == broker]
        found = scraped[f'kpo_broker_disk_used_ratio{{broker="{broker}",cluster="default"}}']
        assert found == pytest.approx(sum(mine) / len(mine), abs=0.01), broker  # dirs of one size: the mean


RATIOS = ("broker_bytes_max_over_mean", "broker_bytes_min_over_mean", "replicas_max_over_mean",
          "replicas_min_over_mean", "leaders_max_over_mean", "leaders_min_over_mean")


def test_balance_gauges_match_kafka_and_follow_a_rebalance(
        balance_operator: OperatorProcess, kafka_admin: AdminClient, bootstrap_servers: str,
        topic_name: str, testbed: Testbed) -> None:
    first, scraped = matched_sample(balance_operator, kafka_admin, bootstrap_servers, topic_name)
    assert_gauges_equal(first, scraped)
    assert_disk_gauges_match(bootstrap_servers, scraped, testbed)

    # Unbalance: every partition of a new topic on broker 1 alone, ~1 MB each.
    create_topic(kafka_admin, topic_name, PARTITIONS, assignment=[[1]] * PARTITIONS)
    try:
        fill(bootstrap_servers, topic_name, list(range(PARTITIONS)), messages=MESSAGES)
        piled, scraped = matched_sample(balance_operator, kafka_admin, bootstrap_servers, topic_name)
        assert_gauges_equal(piled, scraped)
        assert piled.mine_leaders == {1: PARTITIONS, 2: 0, 3: 0}
        assert piled.mine_bytes[1] >= PARTITIONS * MESSAGES * 10_000 and piled.mine_bytes[2] == piled.mine_bytes[3] == 0
        heavy = tuple(gauge(scraped, name) for name in RATIOS)

        # Rebalance: two thirds of the partitions to brokers 2 and 3.
        targets = {TopicPartition(topic_name, p): (2 + p % 2,) for p in range(PARTITIONS // 3, PARTITIONS)}
        adapter = kafka(bootstrap_servers)
        try:
            assert not any(adapter.alter_reassignments(targets).values())
        finally:
            adapter.close()
        wait_for(lambda: not ongoing(bootstrap_servers, topic_name), 120, "the reassignment to finish")
        evened, scraped = matched_sample(balance_operator, kafka_admin, bootstrap_servers, topic_name)
        assert_gauges_equal(evened, scraped)
        third = PARTITIONS // 3
        assert evened.mine_leaders == {1: third, 2: third, 3: third}
        assert min(evened.mine_bytes.values()) >= third * MESSAGES * 10_000
        # The next sample saw the move: 16 leaders, replicas and ~16 MB left broker 1 for brokers 2 and 3, and the
        # ratios changed with them (which way depends on what the shared test bed holds besides this topic).
        assert tuple(gauge(scraped, name) for name in RATIOS) != heavy
    finally:
        kafka_admin.delete_topics([topic_name])[topic_name].result(timeout=30)

    # The cluster nobody listens on: no score, "up" 0, and its outage said once however many attempts failed.
    down = samples(scrape(balance_operator.metrics_port))
    assert down['kpo_cluster_balance_up{cluster="down"}'] == 0
    assert 'kpo_cluster_broker_bytes_max_over_mean{cluster="down"}' not in down
    said = [line for line in balance_operator.log_since_last_start().splitlines()
            if "cluster 'down': balance sample failed" in line]
    assert len(said) == 1, said
    log = balance_operator.log_since_last_start()
    assert "Traceback" not in log
    # librdkafka's line per failed connection attempt (ten a second, from each new client): each said once.
    librdkafka = [line for line in log.splitlines() if "kpo.librdkafka" in line]
    assert len(librdkafka) <= 5, "\n".join(librdkafka)
