"""Issue 27's shapes, small: golden plans, and the plan is never worse than the plain greedy on the same input.

The inputs in ``tests/data/planner/<case>/`` were written by the bench's generator (``bench/planner/generate.py``,
seed 27) at 60 partitions: racks of 2 to 6 brokers with Pareto sizes, a topic of 4 partitions holding 80 % of the
bytes, the removal of a whole 2-broker rack, and an RF 2 -> 3 increase that only adds (no balancing; where the rounds'
quotas placed the new replicas, the lowest broker ended at 0.117 x mean, the greedy's one at a time at 0.508).
``expected_plan.json`` pins the job's plan (kafka-reassign-partitions JSON); the greedy (:mod:`kpo.domain.greedy`, the
bench's reference rules) is run here in plain Python and compared by the job's own rule
(:func:`kpo.planning.spark.candidate.better`) and, where it stays outside the band, at both ends.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from kpo.domain import greedy
from kpo.domain.plan_contract import PlanRequest, parse_brokers
from kpo.planning.spark import job
from kpo.planning.spark.candidate import Standing, better, standing

DATA = Path(__file__).parent / "data" / "planner"
CASES = ["racks-23456-pareto", "dominant-topic", "uneven-remove-small-rack", "rf-increase-add-only"]


def _greedy_standing(folder: Path) -> tuple[greedy.Setup, Standing]:
    request = PlanRequest.from_json((folder / "request.json").read_text())
    brokers = parse_brokers((folder / "brokers.json").read_text())
    parts = [greedy.Partition(r["topic"], int(r["partition"]), tuple(r["replicas"]), int(r["size_bytes"]))
             for r in map(json.loads, (folder / "partitions").read_text().splitlines())]
    result = greedy.plan(request, brokers, parts)
    facts = greedy.setup(request, brokers)
    size = {p.key: p.size for p in parts}
    loads = dict.fromkeys(facts.eligible, 0.0)
    moved = 0
    for p in parts:
        after = result.assignment[p.key]
        moved += p.size * len(set(after) - set(p.replicas))
        for b in after:
            if b in loads:
                loads[b] += size[p.key]
    return facts, standing(loads, moved)


@pytest.mark.parametrize("case", CASES)
def test_issue_27_shapes_golden_plan_never_worse_than_the_greedy(spark: SparkSession, tmp_path: Path,
                                                                  case: str) -> None:
    folder = DATA / case
    metrics = job.run(spark, str(folder), str(tmp_path))
    assert metrics.ok, metrics.message
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan == json.loads((folder / "expected_plan.json").read_text())
    assert metrics.rack_violations_after == 0
    assert metrics.replicas_left_on_removed_brokers == 0
    facts, theirs = _greedy_standing(folder)
    ours = standing({b.broker: float(b.bytes) for b in metrics.brokers_after if b.broker in facts.eligible},
                    metrics.bytes_to_move)
    assert not better(theirs, ours, metrics.tolerance or 0.0), (theirs, ours)
    # The issue's own words: where the greedy stays outside the band, as close as it at both ends.
    if theirs.outside(metrics.tolerance or 0.0) > 0:
        assert ours.low >= theirs.low - 1e-12 and ours.high <= theirs.high + 1e-12, (theirs, ours)
    # "No better" is said exactly when the plan meets the bound.
    if metrics.band_reached is False:
        assert ("no plan can do better" in metrics.message) is bool(metrics.reach_met), metrics.message
    if not facts.balancing:  # only the new replicas are placed: each partition keeps its replicas and gains one
        original = {(r["topic"], r["partition"]): r["replicas"]
                    for r in map(json.loads, (folder / "partitions").read_text().splitlines())}
        for entry in plan["partitions"]:
            kept = original[entry["topic"], entry["partition"]]
            assert entry["replicas"][:len(kept)] == kept and len(entry["replicas"]) == len(kept) + 1, entry
    # Racks kept: RF 3 over the racks left, as evenly as they allow.
    rack = {b["id"]: b["rack"] for b in json.loads((folder / "brokers.json").read_text())}
    racks_left = len({rack[b] for b in facts.eligible})
    for entry in plan["partitions"]:
        counts = Counter(rack[b] for b in entry["replicas"])
        assert len(counts) == min(len(entry["replicas"]), racks_left), entry
