"""The disk goals of the planning job on Spark (issue 30): RemoveDisks and RebalanceDisks move replicas between the
log dirs of their own broker. Golden inputs and plans (kafka-reassign-partitions JSON, log_dirs naming the new dir of
each moved replica) are in ``tests/data/planner/{remove-disk,rebalance-disks}/``; the refusals name what is wrong."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from kpo.domain.plan_contract import BrokerInfo, ContractError, Goal, LogDirRef, PartitionRecord, PlanRequest
from kpo.planning.spark import job
from kpo.planning.spark.cluster import PlanError
from kpo.planning.spark.plan import make_plan, read_snapshot
from kpo.planning.spark.workdir import write_input

DATA = Path(__file__).parent / "data" / "planner"


@pytest.mark.parametrize("case", ["remove-disk", "rebalance-disks"])
def test_golden_disk_plan(spark: SparkSession, tmp_path: Path, case: str) -> None:
    metrics = job.run(spark, str(DATA / case), str(tmp_path))
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert metrics.ok, metrics.message
    assert plan == json.loads((DATA / case / "expected_plan.json").read_text())
    assert metrics.partitions_changed == len(plan["partitions"])
    assert metrics.replicas_to_move == sum(d != "any" for e in plan["partitions"] for d in e["log_dirs"])
    assert metrics.bytes_to_move >= metrics.lower_bound_bytes


def test_a_drain_empties_the_dir_of_the_selection_balances_the_others_and_names_what_stays(
        spark: SparkSession, tmp_path: Path) -> None:
    metrics = job.run(spark, str(DATA / "remove-disk"), str(tmp_path))
    after = {(d.broker, d.log_dir): (d.bytes, d.replicas) for d in metrics.dirs_after}
    before = {(d.broker, d.log_dir): (d.bytes, d.replicas) for d in metrics.dirs_before}
    assert before[(1, "/d/a")] == (1550, 4)
    # Only logs-0, outside the selection, is left in the drained dir; the moved bytes are exactly the selection's.
    assert after[(1, "/d/a")] == (50, 1)
    assert metrics.bytes_to_move == metrics.lower_bound_bytes == 1500
    assert (after[(1, "/d/b")][0], after[(1, "/d/c")][0]) == (900, 1200)
    assert "logs" not in (tmp_path / "plan.json").read_text()
    assert "/d/a of broker 1 (1 replica(s))" in metrics.message
    # Broker 2 is not concerned: its dirs are as they were.
    assert {k: v for k, v in after.items() if k[0] == 2} == {k: v for k, v in before.items() if k[0] == 2}


def _cluster(seed: int) -> tuple[list[BrokerInfo], list[PartitionRecord]]:
    """Four brokers of three dirs each, 200 partitions of RF 2 with skewed sizes, most bytes in the first dir."""
    rng = random.Random(seed)
    dirs = ("/k/0", "/k/1", "/k/2")
    brokers = [BrokerInfo(id=b, log_dirs=dirs) for b in range(1, 5)]
    partitions = []
    for p in range(200):
        replicas = tuple(rng.sample(range(1, 5), 2))
        partitions.append(PartitionRecord(
            topic="t", partition=p, replicas=replicas, leader=replicas[0], isr=replicas,
            size_bytes=int(rng.paretovariate(1.5) * 1_000_000),
            log_dirs=tuple(rng.choices(dirs, weights=(6, 1, 1))[0] for _ in replicas)))
    return brokers, partitions


@pytest.mark.parametrize("seed", [1, 2])
def test_a_disk_rebalance_ends_within_the_band_or_says_why_and_never_moves_a_replica_off_its_broker(
        spark: SparkSession, tmp_path: Path, seed: int) -> None:
    brokers, partitions = _cluster(seed)
    request = PlanRequest(goal=Goal.REBALANCE_DISKS, tolerance=0.1)
    result = make_plan(read_snapshot(spark, str(write_input(tmp_path / "in", request, brokers, partitions))))
    metrics = result.metrics
    plan = json.loads("".join(r["line"] for r in result.plan_lines().orderBy("order").collect()))
    assert metrics.ok and metrics.goal is Goal.REBALANCE_DISKS
    by_tp = {(p.topic, p.partition): p for p in partitions}
    for entry in plan["partitions"]:
        before = by_tp[(entry["topic"], entry["partition"])]
        assert tuple(entry["replicas"]) == before.replicas, "a disk plan never changes the replica list"
        assert all(d == "any" or d != was for d, was in zip(entry["log_dirs"], before.log_dirs, strict=True))
    # The bytes per dir after the plan add up, per broker, to the bytes before.
    for broker in range(1, 5):
        assert sum(d.bytes for d in metrics.dirs_after if d.broker == broker) == \
               sum(d.bytes for d in metrics.dirs_before if d.broker == broker)
    if metrics.band_reached:
        for broker in range(1, 5):
            loads = [d.bytes for d in metrics.dirs_after if d.broker == broker]
            mean = sum(loads) / len(loads)
            assert max(abs(b - mean) for b in loads) <= 0.1 * mean
        # The bound holds for any plan that reaches the band.
        assert metrics.bytes_to_move >= metrics.lower_bound_bytes
    else:
        assert "outside 10% of their broker's mean" in metrics.message
    # Within one replica per dir of the least any plan moves (whole replicas move, not bytes).
    largest = sorted((p.size_bytes for p in partitions), reverse=True)
    assert metrics.bytes_to_move <= metrics.lower_bound_bytes + sum(largest[:12])


def _refused(spark: SparkSession, tmp_path: Path, request: PlanRequest, brokers: list[BrokerInfo]) -> str:
    partitions = [PartitionRecord(topic="t", partition=0, replicas=(1,), size_bytes=10, log_dirs=("/a",))]
    with pytest.raises(PlanError) as refused:
        make_plan(read_snapshot(spark, str(write_input(tmp_path, request, brokers, partitions))))
    return str(refused.value)


def test_a_dir_the_broker_does_not_have_online_is_refused_by_name(spark: SparkSession, tmp_path: Path) -> None:
    request = PlanRequest(goal=Goal.REMOVE_DISKS, disks=(LogDirRef(broker=1, log_dir="/gone"),))
    message = _refused(spark, tmp_path, request, [BrokerInfo(id=1, log_dirs=("/a", "/b"))])
    assert message == "broker 1 has no online log dir /gone (its online dirs: /a, /b)"


def test_a_broker_left_without_a_dir_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    request = PlanRequest(goal=Goal.REMOVE_DISKS, disks=(LogDirRef(broker=1, log_dir="/a"),))
    message = _refused(spark, tmp_path, request, [BrokerInfo(id=1, log_dirs=("/a",))])
    assert message == "broker 1 would have no online log dir left to take the replicas of /a"


def test_the_request_contract_keeps_disk_fields_to_the_disk_goals() -> None:
    with pytest.raises(ContractError, match="needs the log dirs to empty"):
        PlanRequest.from_json('{"goal": "RemoveDisks"}')
    with pytest.raises(ContractError, match="only applies to goal RemoveDisks"):
        PlanRequest.from_json('{"goal": "Rebalance", "disks": [{"broker": 1, "logDir": "/a"}]}')
    with pytest.raises(ContractError, match="do not apply"):
        PlanRequest.from_json('{"goal": "RebalanceDisks", "excludeBrokers": [1]}')
    with pytest.raises(ContractError, match="one entry per replica"):
        PartitionRecord.from_json('{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/a"]}')
