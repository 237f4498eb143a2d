"""RelieveCapacity on Spark (issue 30): every log dir ends at or under the threshold of its file system, moving as few
bytes as the planner finds, to another dir of the broker first and else to a broker of the same rack. The golden case
(``tests/data/planner/relieve-capacity/``) is small enough to work out by hand: broker 1's ``/d/a`` sheds 140 bytes to
its ``/d/b``; broker 2's two dirs share one file system, so its 120-byte replica goes to broker 1 (same rack), not to
broker 3 (another rack)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from kpo.domain.plan_contract import BrokerInfo, ContractError, DirSpace, Goal, PartitionRecord, PlanRequest
from kpo.planning.spark import job
from kpo.planning.spark.cluster import PlanError
from kpo.planning.spark.plan import PlanResult, make_plan, read_snapshot
from kpo.planning.spark.workdir import write_input

CASE = Path(__file__).parent / "data" / "planner" / "relieve-capacity"


def _plan(spark: SparkSession, tmp_path: Path, request: PlanRequest, brokers: list[BrokerInfo],
          partitions: list[PartitionRecord]) -> tuple[PlanResult, dict[str, object]]:
    result = make_plan(read_snapshot(spark, str(write_input(tmp_path / "in", request, brokers, partitions))))
    plan = json.loads("".join(r["line"] for r in result.plan_lines().orderBy("order").collect()))
    return result, plan


def _used(dirs: object) -> dict[tuple[int, str], tuple[int, int]]:
    return {(d.broker, d.log_dir): (d.used_bytes, d.total_bytes) for d in dirs}  # type: ignore[attr-defined]


def test_golden_relief_plan(spark: SparkSession, tmp_path: Path) -> None:
    metrics = job.run(spark, str(CASE), str(tmp_path))
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert metrics.ok and metrics.goal is Goal.RELIEVE_CAPACITY, metrics.message
    assert plan == json.loads((CASE / "expected_plan.json").read_text())
    assert (metrics.bytes_to_move, metrics.replicas_to_move, metrics.lower_bound_bytes) == (260, 3, 200)
    assert metrics.band_reached is True and metrics.message == ""
    after = _used(metrics.dirs_after)
    assert after[(1, "/d/a")] == (760, 1000) and after[(1, "/d/b")] == (560, 1000)
    # One file system for both of broker 2's dirs: both report its use.
    assert after[(2, "/d/a")] == after[(2, "/d/b")] == (780, 1000)
    assert after[(3, "/d/a")] == (100, 1000), "broker 3 is in another rack: it takes nothing"


def _brokers(*, one_fs_on: int | None = None) -> list[BrokerInfo]:
    def space(broker: int, log_dir: str, usable: int) -> DirSpace:
        return DirSpace(log_dir=log_dir, total_bytes=1000, usable_bytes=usable)
    return [BrokerInfo(id=1, rack="r1", log_dirs=("/d/a", "/d/b"),
                       capacity=(space(1, "/d/a", 100), space(1, "/d/b", 100 if one_fs_on == 1 else 700))),
            BrokerInfo(id=2, rack="r1", log_dirs=("/d/a",), capacity=(space(2, "/d/a", 900),))]


def _partitions() -> list[PartitionRecord]:
    return [PartitionRecord(topic="t", partition=p, replicas=(1,), leader=1, isr=(1,), size_bytes=size,
                            log_dirs=("/d/a",)) for p, size in enumerate((300, 90, 40, 30))]


def test_a_copy_inside_the_broker_comes_before_one_to_another_broker(spark: SparkSession, tmp_path: Path) -> None:
    result, plan = _plan(spark, tmp_path, PlanRequest(goal=Goal.RELIEVE_CAPACITY, threshold=0.8), _brokers(),
                         _partitions())
    # /d/a of broker 1 is 100 over: 90 then 40 (no larger one fits under 100; they cover it), both to /d/b.
    assert plan["partitions"] == [{"topic": "t", "partition": p, "replicas": [1], "log_dirs": ["/d/b"]} for p in (1, 2)]
    assert result.metrics.band_reached is True


def test_a_volume_whose_dirs_share_a_file_system_sends_to_a_broker_of_its_rack(
        spark: SparkSession, tmp_path: Path) -> None:
    result, plan = _plan(spark, tmp_path, PlanRequest(goal=Goal.RELIEVE_CAPACITY, threshold=0.8),
                         _brokers(one_fs_on=1), _partitions())
    entries = plan["partitions"]
    assert isinstance(entries, list)
    assert all(e["replicas"] == [2] and e["log_dirs"] == ["/d/a"] for e in entries), entries
    assert result.metrics.bytes_to_move >= result.metrics.lower_bound_bytes == 100


def test_an_unreachable_threshold_is_the_best_reachable_state_with_the_reason(
        spark: SparkSession, tmp_path: Path) -> None:
    result, _plan_json = _plan(spark, tmp_path, PlanRequest(goal=Goal.RELIEVE_CAPACITY, threshold=0.4),
                               _brokers(one_fs_on=1), _partitions())
    metrics = result.metrics
    assert metrics.ok and metrics.band_reached is False
    assert metrics.message.startswith("best reachable state: log dirs still above 40% of capacity: "
                                      "/d/a+/d/b of broker 1 at ")
    assert "bytes of room under the threshold" in metrics.message
    # It still moved what it could, and no dir that was under the threshold ends above it.
    assert metrics.bytes_to_move > 0
    before, after = _used(metrics.dirs_before), _used(metrics.dirs_after)
    for key, (used, total) in after.items():
        if before[key][0] <= 0.4 * total:
            assert used <= 0.4 * total, key


def test_excluded_brokers_take_nothing(spark: SparkSession, tmp_path: Path) -> None:
    result, plan = _plan(spark, tmp_path, PlanRequest(goal=Goal.RELIEVE_CAPACITY, threshold=0.8, exclude_brokers=(2,)),
                         _brokers(one_fs_on=1), _partitions())
    assert plan["partitions"] == []
    assert result.metrics.band_reached is False and "broker 1" in result.metrics.message


def test_capacity_unknown_is_refused_by_name(spark: SparkSession, tmp_path: Path) -> None:
    brokers = [BrokerInfo(id=1, log_dirs=("/d/a", "/d/b"),
                          capacity=(DirSpace(log_dir="/d/a", total_bytes=10, usable_bytes=1),))]
    with pytest.raises(PlanError, match=r"capacity of some log dirs is unknown .*: /d/b of broker 1$"):
        _plan(spark, tmp_path, PlanRequest(goal=Goal.RELIEVE_CAPACITY, threshold=0.8), brokers, _partitions())


def _random_cluster(seed: int) -> tuple[list[BrokerInfo], list[PartitionRecord]]:
    """Six brokers over two racks, two or three dirs each on their own file systems (one broker with two dirs on one),
    400 partitions of RF 2 with heavy-tailed sizes, most of the bytes on the first dirs."""
    rng = random.Random(seed)
    racks = {b: f"r{b % 2}" for b in range(1, 7)}
    dirs = {b: ("/k/0", "/k/1", "/k/2")[: 2 + b % 2] for b in racks}
    partitions, kafka_bytes = [], {(b, d): 0 for b in racks for d in dirs[b]}
    for p in range(400):
        first = rng.choice(list(racks))
        second = rng.choice([b for b in racks if racks[b] != racks[first]])
        size = int(rng.paretovariate(1.3) * 1_000_000)
        placed = tuple(rng.choices(dirs[b], weights=(8, 1, 1)[: len(dirs[b])])[0] for b in (first, second))
        for b, d in zip((first, second), placed, strict=True):
            kafka_bytes[(b, d)] += size
        partitions.append(PartitionRecord(topic="t", partition=p, replicas=(first, second), leader=first,
                                          isr=(first, second), size_bytes=size, log_dirs=placed))
    total = int(max(kafka_bytes.values()) * 1.1)
    brokers = []
    for b, rack in racks.items():
        shared = b == 4
        used = {d: kafka_bytes[(b, d)] for d in dirs[b]}
        if shared:
            used = dict.fromkeys(dirs[b], sum(used.values()))
        size = total * (2 if shared else 1)
        brokers.append(BrokerInfo(id=b, rack=rack, log_dirs=dirs[b], capacity=tuple(
            DirSpace(log_dir=d, total_bytes=size, usable_bytes=max(size - used[d], 0)) for d in dirs[b])))
    return brokers, partitions


@pytest.mark.parametrize("seed", [3, 4])
def test_a_relief_keeps_racks_and_replica_sets_sound_and_never_fills_a_receiver_over_the_threshold(
        spark: SparkSession, tmp_path: Path, seed: int) -> None:
    brokers, partitions = _random_cluster(seed)
    rack = {b.id: b.rack for b in brokers}
    result, plan = _plan(spark, tmp_path, PlanRequest(goal=Goal.RELIEVE_CAPACITY, threshold=0.7), brokers, partitions)
    metrics = result.metrics
    assert metrics.ok
    by_tp = {(p.topic, p.partition): p for p in partitions}
    entries = plan["partitions"]
    assert isinstance(entries, list) and entries
    for entry in entries:
        was = by_tp[(entry["topic"], entry["partition"])]
        assert len(set(entry["replicas"])) == len(entry["replicas"])
        assert [rack[b] for b in entry["replicas"]] == [rack[b] for b in was.replicas], "racks kept, slot by slot"
        for slot, (broker, log_dir) in enumerate(zip(entry["replicas"], entry["log_dirs"], strict=True)):
            moved = broker != was.replicas[slot] or log_dir not in ("any", was.log_dirs[slot])
            assert (log_dir != "any") == moved
    before, after = _used(metrics.dirs_before), _used(metrics.dirs_after)
    # No receiver ends above the threshold.
    assert metrics.bytes_to_move >= metrics.lower_bound_bytes > 0
    for key, (used, total) in after.items():
        if used > before[key][0]:
            assert used <= 0.7 * total, key
    if metrics.band_reached:
        assert all(used <= 0.7 * total for used, total in after.values())
    else:
        assert metrics.message.startswith("best reachable state")


def test_the_request_contract_keeps_threshold_to_relieve_capacity() -> None:
    with pytest.raises(ContractError, match="needs 'threshold'"):
        PlanRequest.from_json('{"goal": "RelieveCapacity"}')
    with pytest.raises(ContractError, match="only applies to goal RelieveCapacity"):
        PlanRequest.from_json('{"goal": "Rebalance", "threshold": 0.8}')
    with pytest.raises(ContractError, match="do not apply"):
        PlanRequest.from_json('{"goal": "RelieveCapacity", "threshold": 0.8, "brokers": [1]}')
    with pytest.raises(ContractError, match="threshold"):
        PlanRequest.from_json('{"goal": "RelieveCapacity", "threshold": 1.5}')
