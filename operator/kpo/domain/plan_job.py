"""A planning job as the PartitionReassignment life cycle sees it: running, done with a proposal, or failed.

Why a module of its own: the job runners (a local Spark process, a SparkApplication) report it and the life cycle
decides on it, so the value type sits below both — the runners must not import the life cycle to say how a job went.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kpo.domain.plan_contract import PlanMetrics
from kpo.domain.proposal import Proposal


class JobStatus(StrEnum):
    NONE = "None"  # never started, or lost with a restarted operator
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True)
class Job:
    status: JobStatus
    message: str = ""
    proposal: Proposal | None = None
    metrics: PlanMetrics | None = None
