"""Refill between polls, the loop (kpo.resources.partition_reassignment.refill), on the in-memory cluster with the
real reconciler and the real cluster-wide scheduler: slots refilled within one tick, limits strict, status honest."""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from executor_support import executor_for
from executor_support import ports as executor_ports
from kafka_fake import FakeCluster
from kpo.domain.model import Replicas, TopicPartition
from kpo.domain.reassignment import Target
from kpo.domain.refill import RefillPolicy
from kpo.domain.scheduling import Execution, Limits, Owner, SchedulerConfig
from kpo.kafka.admin import KafkaUnavailable
from kpo.resources.outcomes import Inputs, Outcome
from kpo.resources.partition_reassignment import reconciler, refill
from kpo.resources.partition_reassignment.lifecycle import Intent
from kpo.resources.partition_reassignment.status import memory_of

NOW = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
OWNER = Owner(NOW, "ns", "move")
PARTITIONS = [TopicPartition("orders", p) for p in range(6)]


class Cluster(FakeCluster):
    """Moves end while the tick sleeps; every submission is checked against the limit of one move in flight."""

    def __init__(self) -> None:
        super().__init__({tp: (1, 2) for tp in PARTITIONS}, replica_bytes=1_000)
        self.most_in_flight = 0
        self.looks = 0
        self.down_at_look: int | None = None

    def alter_reassignments(self, targets: Mapping[TopicPartition, Replicas | None], *,
                            allow_replication_factor_change: bool = False) -> dict[TopicPartition, Any]:
        answers = super().alter_reassignments(targets, allow_replication_factor_change=allow_replication_factor_change)
        self.most_in_flight = max(self.most_in_flight, len(self.moving))
        return answers

    def look(self, partitions: Collection[TopicPartition]) -> set[TopicPartition]:
        self.looks += 1
        if self.looks == self.down_at_look:
            raise KafkaUnavailable("the connection to Kafka broke")
        return set(self.list_reassignments(partitions))


class Clock:
    def __init__(self, cluster: Cluster, finish_every: int = 1) -> None:
        self.now = 0.0
        self.cluster = cluster
        self.sleeps = 0
        self.finish_every = finish_every

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        if self.sleeps % self.finish_every == 0:
            self.cluster.finish_moves()


def setup(cluster: Cluster, clock: Clock, *, slots: int = 1, unchanged: bool = True, poll_interval: float = 60.0,
          records_down_at_pass: int | None = None) -> tuple[refill.OnePass, refill.Probes, refill.Watching, list[int]]:
    intent = Intent(generation=1, targets={tp: Target((2, 3)) for tp in PARTITIONS})
    executor = executor_for(cluster, SchedulerConfig(defaults=Limits(max_moves=1)))
    refilled: list[int] = []
    passes = [0]

    def claimed_by_others() -> dict[TopicPartition, str]:
        passes[0] += 1  # once a pass: the claims index is asked on every one
        if passes[0] == records_down_at_pass:
            raise ApiOutageError("the Kubernetes API did not answer")
        return {}

    def one_pass(body: Mapping[str, Any], originals: Mapping[TopicPartition, Replicas]
                 ) -> tuple[Outcome[Any] | None, reconciler.PassReport | None]:
        reports: list[reconciler.PassReport] = []
        ports = executor_ports(cluster, executor=executor, owner=OWNER, claimed_by_others=claimed_by_others,
                               execution=Execution(), report=reports.append)
        clock.now += 0.05  # a pass takes a while
        outcome = reconciler.tick(Inputs(body, intent, memory_of(body.get("status") or {}, originals), NOW), ports)
        return outcome, reports[-1] if reports else None

    probes = refill.Probes(moving=cluster.look, unchanged=lambda: unchanged, refilled=refilled.append,
                           fatal=lambda exc: isinstance(exc, ApiOutageError))
    watching = refill.Watching(policy=RefillPolicy(poll_interval=poll_interval),
                               slots=threading.BoundedSemaphore(slots), clock=lambda: clock.now, sleep=clock.sleep)
    return one_pass, probes, watching, refilled


class ApiOutageError(Exception):
    """Stands for what kpo.k8s.outage.is_outage recognises (the handlers pass it as Probes.fatal)."""


BODY: dict[str, Any] = {"metadata": {"namespace": "ns", "name": "move", "generation": 1}, "status": {}}


def test_one_tick_refills_each_freed_slot_and_never_exceeds_the_limit() -> None:
    cluster = Cluster()
    clock = Clock(cluster)
    one_pass, probes, watching, refilled = setup(cluster, clock)
    outcome = refill.run(BODY, {}, one_pass, probes=probes, watching=watching)
    assert outcome is not None
    # Six moves, one at a time: the first pass starts one, five passes between polls start the others, all within
    # one tick. Once nothing waits for a slot the tick ends: the last completion is the next poll's to report.
    assert refilled == [1, 1, 1, 1, 1]
    assert cluster.most_in_flight == 1
    assert sum(1 for targets, _ in cluster.altered for _tp in targets) == 6
    assert outcome.status["phase"] == "Executing"
    assert [m["partition"] for m in outcome.status["inFlight"]] == [5]
    assert clock.now < 0.9 * 60


def test_the_status_never_says_more_than_kafka_showed() -> None:
    cluster = Cluster()
    clock = Clock(cluster, finish_every=10**9)  # nothing ends while the tick watches
    one_pass, probes, watching, refilled = setup(cluster, clock, poll_interval=2.0)
    outcome = refill.run(BODY, {}, one_pass, probes=probes, watching=watching)
    assert outcome is not None
    assert refilled == []
    assert cluster.looks >= 2  # it looked, found the move still listed, and let the next poll go on
    assert outcome.status["phase"] == "Executing"
    assert [m["partition"] for m in outcome.status["inFlight"]] == [tp.partition for tp in cluster.moving]


def test_a_changed_or_deleted_resource_ends_the_watch_at_once() -> None:
    cluster = Cluster()
    one_pass, probes, watching, refilled = setup(cluster, Clock(cluster), unchanged=False)
    outcome = refill.run(BODY, {}, one_pass, probes=probes, watching=watching)
    assert outcome is not None and refilled == [] and cluster.looks == 0


def test_kafka_lost_during_a_look_keeps_the_last_pass_and_leaves_the_outage_to_the_next_tick() -> None:
    cluster = Cluster()
    cluster.down_at_look = 3
    one_pass, probes, watching, refilled = setup(cluster, Clock(cluster))
    outcome = refill.run(BODY, {}, one_pass, probes=probes, watching=watching)
    assert outcome is not None
    assert refilled == [1, 1]
    assert outcome.status["phase"] == "Executing" and not outcome.lost_kafka


def test_no_watching_slot_left_means_one_pass_as_before() -> None:
    cluster = Cluster()
    one_pass, probes, watching, refilled = setup(cluster, Clock(cluster), slots=1)
    assert watching.slots.acquire(blocking=False)  # another tick is watching
    outcome = refill.run(BODY, {}, one_pass, probes=probes, watching=watching)
    assert outcome is not None and refilled == [] and cluster.looks == 0 and len(cluster.moving) == 1


def test_a_pass_that_meets_an_api_outage_ends_the_tick_with_it() -> None:
    """The Kubernetes API gone during a pass between polls: raised, so the tick's ApiOutage says it once and probes
    (a status write would fail anyway), not swallowed as a failed watch while the outage goes unnoticed."""
    cluster = Cluster()
    one_pass, probes, watching, refilled = setup(cluster, Clock(cluster), records_down_at_pass=3)
    with pytest.raises(ApiOutageError):
        refill.run(BODY, {}, one_pass, probes=probes, watching=watching)
    assert refilled == [1]
    assert watching.slots.acquire(blocking=False), "the watching slot is given back"


def test_another_failure_of_a_pass_keeps_what_the_earlier_passes_did() -> None:
    cluster = Cluster()
    one_pass, probes, watching, refilled = setup(cluster, Clock(cluster), records_down_at_pass=3)
    probes = replace(probes, fatal=lambda _exc: False)
    outcome = refill.run(BODY, {}, one_pass, probes=probes, watching=watching)
    assert outcome is not None and refilled == [1]
    assert outcome.status["phase"] == "Executing"
