"""The storage contract on a local file system: writing a planning input, reading a planning output.

The operator's local backend, the tests and the bench all exchange files with the job through these two functions;
the job itself reads and writes through Spark (:mod:`kpo.planning.spark.storage`), so it also works on object stores.
No pyspark here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kpo.domain.plan_contract import (
    BROKERS_FILE,
    METRICS_FILE,
    PARTITIONS_PATH,
    PLAN_FILE,
    REQUEST_FILE,
    BrokerInfo,
    ContractError,
    PartitionRecord,
    PlanMetrics,
    PlanRequest,
    ReassignmentPlan,
    brokers_json,
)


def write_input(directory: Path, request: PlanRequest, brokers: Iterable[BrokerInfo],
                partitions: Iterable[PartitionRecord]) -> Path:
    """Lay out a planning input: request.json, brokers.json and partitions/part-00000.json (JSON lines)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / REQUEST_FILE).write_text(request.to_json())
    (directory / BROKERS_FILE).write_text(brokers_json(brokers))
    folder = directory / PARTITIONS_PATH
    folder.mkdir(exist_ok=True)
    with (folder / "part-00000.json").open("w") as out:
        for p in partitions:
            out.write(p.to_json())
            out.write("\n")
    return directory


@dataclass(frozen=True)
class PlanOutput:
    """What the job left in its output directory: metrics (None if it never wrote them) and, on success, the plan."""

    metrics: PlanMetrics | None
    plan: ReassignmentPlan | None


def read_output(directory: Path, *, with_plan: bool = True) -> PlanOutput:
    """The job's answer; ``with_plan=False`` for runs that only measure (``kpo.planning.spark.evaluate``)."""
    metrics_file, plan_file = directory / METRICS_FILE, directory / PLAN_FILE
    metrics = PlanMetrics.from_json(metrics_file.read_bytes()) if metrics_file.is_file() else None
    plan = None
    if with_plan and metrics is not None and metrics.ok:
        if not plan_file.is_file():
            raise ContractError(f"the job reported success but wrote no {PLAN_FILE} in {directory}")
        plan = ReassignmentPlan.from_json(plan_file.read_bytes())
    return PlanOutput(metrics=metrics, plan=plan)
