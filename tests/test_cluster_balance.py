"""The balance sampler's shell (kpo.background.balance_sampler): batches, the gauges, an outage said once, backoff."""

from __future__ import annotations

import logging
from collections.abc import Collection

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kafka_fake import FakeCluster
from kpo.background.balance_sampler import ClusterBalanceSampler, sample
from kpo.domain.balance_score import BalanceScore
from kpo.domain.model import Broker, DirCapacity, LogDirReport, TopicPartition
from kpo.kafka.admin import KafkaAdmin
from kpo.metrics import ClusterBalances


class Cluster(FakeCluster):
    """Four brokers in racks a, a, b, c; broker bytes from DescribeLogDirs of the topics asked for only."""

    def brokers(self) -> dict[int, Broker]:
        self.called("brokers")
        return {b: Broker(b, rack=r) for b, r in {1: "a", 2: "a", 3: "b", 4: "c"}.items()}

    def log_dirs(self, topics: Collection[str], brokers: Collection[int]) -> LogDirReport:
        self.called(f"log_dirs {sorted(topics)}")
        return LogDirReport(
            sizes={(tp, b): self.replica_bytes for tp, r in self.replicas.items() if tp.topic in topics
                   for b in r if b in brokers},
            broker_dirs={b: frozenset({"/data"}) for b in brokers},
            # Broker 1's disk is 3/4 full; broker 2 has two disks (1/4 and 3/4 full), 4 reports none (Kafka < 3.3).
            capacity={(b, d): c for (b, d), c in CAPACITY.items() if b in brokers})

    def dir_capacity(self, brokers: Collection[int]) -> dict[tuple[int, str], DirCapacity]:
        super().dir_capacity(brokers)
        return {(b, d): c for (b, d), c in CAPACITY.items() if b in brokers}


CAPACITY = {(1, "/data"): DirCapacity(1000, 250), (2, "/data"): DirCapacity(1000, 750),
            (2, "/data2"): DirCapacity(3000, 750), (3, "/data"): DirCapacity(1000, 1000)}


def cluster() -> Cluster:
    replicas = {TopicPartition("a", 0): (1, 2), TopicPartition("a", 1): (1, 3), TopicPartition("b", 0): (1, 2),
                TopicPartition("c", 0): (3, 4), TopicPartition("__consumer_offsets", 0): (4, 3)}
    return Cluster(replicas, replica_bytes=10)


def test_a_sample_reads_in_batches_and_leaves_internal_topics_out() -> None:
    kafka = cluster()
    score = sample(kafka, topics_per_request=2)
    assert [c for c in kafka.calls if c.startswith("log_dirs")] == ["log_dirs ['a', 'b']", "log_dirs ['c']"]
    assert score.partitions == 4
    # Replicas 3, 2, 2, 1 (mean 2), bytes ten times that; leaders 3, 0, 1, 0 (mean 1).
    assert score.bytes.max_over_mean == pytest.approx(1.5)
    assert score.replicas.min_over_mean == pytest.approx(0.5)
    assert score.leaders.max_over_mean == pytest.approx(3.0)
    # Three racks: (1, 2) both in rack a is crowded, twice.
    assert (score.racks, score.rack_violations) == (3, 2)


def scrape(balances: ClusterBalances) -> str:
    registry = CollectorRegistry()
    registry.register(balances)
    return generate_latest(registry).decode()


def test_the_gauges_per_cluster() -> None:
    balances = ClusterBalances()
    assert "kpo_cluster_broker_bytes_max_over_mean{" not in scrape(balances)
    balances.sampled("default", sample(cluster()), at=1700000000.0)
    text = scrape(balances)
    assert 'kpo_cluster_broker_bytes_max_over_mean{cluster="default"} 1.5' in text
    assert 'kpo_cluster_leaders_max_over_mean{cluster="default"} 3.0' in text
    assert 'kpo_cluster_rack_spread_violations{cluster="default"} 2.0' in text
    assert 'kpo_cluster_balance_sampled_timestamp_seconds{cluster="default"} 1.7e+09' in text
    assert 'kpo_cluster_balance_up{cluster="default"} 1.0' in text
    balances.failed("default")
    text = scrape(balances)
    assert 'kpo_cluster_balance_up{cluster="default"} 0.0' in text
    assert 'kpo_cluster_rack_spread_violations{cluster="default"} 2.0' in text  # the last good sample stays


def test_each_dir_and_broker_reports_its_share_of_disk_in_use() -> None:
    kafka = cluster()
    score = sample(kafka, topics_per_request=2)
    assert score.dirs == CAPACITY
    assert "dir_capacity" not in kafka.calls, "the DescribeLogDirs answers carry it: no request more"
    balances = ClusterBalances()
    balances.sampled("default", score, at=1700000000.0)
    text = scrape(balances)
    assert 'kpo_log_dir_used_ratio{broker="1",cluster="default",dir="/data"} 0.75' in text
    assert 'kpo_log_dir_used_ratio{broker="2",cluster="default",dir="/data2"} 0.75' in text
    assert 'kpo_log_dir_total_bytes{broker="2",cluster="default",dir="/data2"} 3000.0' in text
    # Broker 2: (250 + 2250) used of 4000.
    assert 'kpo_broker_disk_used_ratio{broker="2",cluster="default"} 0.625' in text
    assert 'kpo_broker_disk_used_ratio{broker="3",cluster="default"} 0.0' in text
    assert 'broker="4"' not in text, "a broker that reports no capacity has no disk gauge"


def test_a_dir_reports_no_more_than_full_and_a_dir_of_no_size_nothing() -> None:
    assert DirCapacity(100, -5).used_ratio == 1.0
    assert DirCapacity(0, 0).used_ratio == 0.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Sink:
    def __init__(self) -> None:
        self.seen: list[tuple[str, BalanceScore | None]] = []

    def sampled(self, cluster: str, score: BalanceScore, at: float) -> None:
        self.seen.append((cluster, score))

    def failed(self, cluster: str) -> None:
        self.seen.append((cluster, None))


def test_an_outage_is_said_once_backs_off_and_its_end_is_said(caplog: pytest.LogCaptureFixture) -> None:
    kafka, clock, sink = cluster(), Clock(), Sink()
    forgotten: list[str] = []

    def adapter(name: str) -> KafkaAdmin:
        assert name == "default"
        return kafka

    sampler = ClusterBalanceSampler(["default"], 60, kafka=adapter, forget=forgotten.append, sink=sink, clock=clock,
                                    logger=logging.getLogger("test.balance"))
    caplog.set_level(logging.INFO, logger="test.balance")
    assert sampler.run_due() == 60
    assert sink.seen[-1][1] is not None
    kafka.down = True
    waits = []
    for _ in range(6):
        clock.now += sampler.run_due()
        waits.append(sampler.run_due())
    # Every attempt failed, each one waited for: 120, 240, 480, then the 600 s cap.
    assert [s for _, s in sink.seen[1:]] == [None] * 6
    assert waits == [120, 240, 480, 600, 600, 600]
    assert forgotten == ["default"] * 6
    failed = [r for r in caplog.records if "balance sample failed" in r.getMessage()]
    assert len(failed) == 1 and "KafkaUnavailable" in failed[0].getMessage() and failed[0].exc_info is None
    kafka.down = False
    clock.now += sampler.run_due()
    assert sampler.run_due() == 60
    assert any("balance sampled again after" in r.getMessage() and "6 failed" in r.getMessage()
               for r in caplog.records)


def test_an_unexpected_error_is_logged_with_its_traceback_once(caplog: pytest.LogCaptureFixture) -> None:
    def broken(name: str) -> KafkaAdmin:
        raise RuntimeError("a bug")

    clock = Clock()
    sampler = ClusterBalanceSampler(["default"], 10, kafka=broken, forget=lambda _: None, sink=Sink(), clock=clock,
                                    logger=logging.getLogger("test.balance"))
    for _ in range(3):
        clock.now += sampler.run_due()
    failed = [r for r in caplog.records if "balance sample failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info is not None


def test_zero_interval_is_no_sampler() -> None:
    with pytest.raises(ValueError, match="positive"):
        ClusterBalanceSampler(["default"], 0, kafka=lambda _: cluster(), forget=lambda _: None, sink=Sink())


def test_librdkafka_connection_failures_are_said_once_per_window() -> None:
    from kpo.kafka.client import RepeatedLibrdkafkaLines  # noqa: PLC0415

    clock = Clock()
    lines = RepeatedLibrdkafkaLines(window=600, clock=clock)

    def passes(text: str) -> bool:
        return lines.filter(logging.LogRecord("kpo.librdkafka", logging.ERROR, "", 0, text, None, None))

    fail = ("FAIL [rdkafka#producer-{n}] [thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to "
            "ipv4#127.0.0.1:1 failed: Connection refused (after {ms}ms in state CONNECT)")
    assert passes(fail.format(n=2, ms=0))
    # Another client, another delay: the same failure.
    assert not any(passes(fail.format(n=n, ms=n)) for n in range(3, 50))
    assert passes(fail.replace("127.0.0.1:1", "127.0.0.1:2").format(n=3, ms=0))  # another node: said
    clock.now += 601
    assert passes(fail.format(n=60, ms=0))


def test_the_example_alerts_name_only_gauges_kpo_exports() -> None:
    import re  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    import yaml  # noqa: PLC0415

    rules = yaml.safe_load((Path(__file__).resolve().parent.parent / "deploy" / "prometheus"
                            / "kpo-balance-alerts.yaml").read_text())
    balances = ClusterBalances()
    balances.sampled("default", sample(cluster()), at=1.0)
    exported = {m.name for m in balances.collect()}
    named = {n for g in rules["spec"]["groups"] for r in g["rules"] for n in re.findall(r"kpo_\w+", r["expr"])}
    assert named and named <= exported, named - exported
