"""Running planning jobs for the operator: the ``local`` backend (spark-submit, supervised here) or SparkApplications.

Each PartitionReassignment generation plans in its own directory under ``planner.workDir``
(``<namespace>/<name>/<generation>/{input,output}``): the operator writes the snapshot into ``input`` through the
storage contract (:mod:`kpo.domain.plan_contract`), the job writes ``plan.json`` and ``metrics.json`` into ``output``.
Nothing here decides anything; :meth:`PlanningJobs.poll` reports a :class:`~kpo.domain.plan_job.Job` and the life
cycle acts on it. A job survives nothing on purpose: after an operator restart an unfinished local job is found dead
and started again, a finished one is read from its output.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kubernetes import client

from kpo.config import PlannerConfig
from kpo.domain.model import Replicas, TopicPartition
from kpo.domain.plan_contract import BrokerInfo, ContractError, PartitionRecord, PlanRequest
from kpo.domain.plan_job import Job, JobStatus
from kpo.domain.proposal import Proposal
from kpo.k8s import sparkapp
from kpo.planner.runner import LocalSparkConfig, LocalSparkRunner, RunningJob
from kpo.planner.workdir import read_output, write_input


class PlanningJobs:
    def __init__(self, config: PlannerConfig, api: client.ApiClient) -> None:
        self.config = config
        self.apps = sparkapp.SparkApplications(api)
        local = config.local
        self.runner = LocalSparkRunner(LocalSparkConfig(
            master=local.master, driver_memory=local.driver_memory, timeout_seconds=local.timeout_seconds,
            conf=dict(local.spark_conf)))
        self._running: dict[tuple[str, int], RunningJob] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------------------ paths

    def root(self, namespace: str, name: str) -> Path:
        return Path(self.config.work_dir) / namespace / name

    def directory(self, namespace: str, name: str, generation: int) -> Path:
        return self.root(namespace, name) / str(generation)

    # ------------------------------------------------------------------------------------------------ start

    def start(self, body: Mapping[str, Any], request: PlanRequest, brokers: Iterable[BrokerInfo],
              partitions: Iterable[PartitionRecord]) -> None:
        meta = body["metadata"]
        generation = int(meta.get("generation") or 1)
        base = self.directory(meta["namespace"], meta["name"], generation)
        shutil.rmtree(base, ignore_errors=True)  # a new attempt never reads an old answer
        write_input(base / "input", request, brokers, partitions)
        (base / "output").mkdir(parents=True, exist_ok=True)
        if self.config.backend == "local":
            job = self.runner.start(base / "input", base / "output")
            with self._lock:
                self._running[(meta["uid"], generation)] = job
            return
        settings = self.config.spark_application
        namespace = settings.namespace or meta["namespace"]
        attempt = self.apps.count(namespace, meta["name"], generation) + 1
        app_name = f"{meta['name']}-plan-{generation}-{attempt}"[:63].rstrip("-")
        self.apps.create(sparkapp.manifest(settings, name=app_name, namespace=namespace, owner=body,
                                           input_uri=str(base / "input"), output_uri=str(base / "output"),
                                           generation=generation))

    # ------------------------------------------------------------------------------------------------- poll

    def poll(self, body: Mapping[str, Any]) -> Job:
        meta = body["metadata"]
        generation = int(meta.get("generation") or 1)
        base = self.directory(meta["namespace"], meta["name"], generation)
        if self.config.backend == "local":
            with self._lock:
                job = self._running.get((meta["uid"], generation))
            if job is not None:
                outcome = job.poll()
                if outcome is None:
                    return Job(JobStatus.RUNNING)
                with self._lock:
                    self._running.pop((meta["uid"], generation), None)
                if not outcome.ok:
                    # The runner's account: the job's own message, or how it died before it could write one.
                    return Job(JobStatus.FAILED, outcome.message)
            return self._read(base, generation, default=Job(JobStatus.NONE))
        settings = self.config.spark_application
        app = self.apps.latest(settings.namespace or meta["namespace"], meta["name"], generation)
        if app is None:
            return Job(JobStatus.NONE)
        state = ((app.get("status") or {}).get("applicationState") or {})
        phase = str(state.get("state") or "")
        if phase in ("", "NEW", "SUBMITTED", "RUNNING", "PENDING_RERUN", "SUCCEEDING", "FAILING", "INVALIDATING"):
            return Job(JobStatus.RUNNING, f"SparkApplication {app['metadata']['name']}: {phase or 'NEW'}")
        if phase == "COMPLETED":
            return self._read(base, generation, default=Job(
                JobStatus.FAILED, f"SparkApplication {app['metadata']['name']} completed without writing a plan"))
        error = state.get("errorMessage") or "no errorMessage"
        job_said = self._read(base, generation, default=Job(JobStatus.FAILED, ""))
        message = job_said.message if job_said.status is JobStatus.FAILED and job_said.message else str(error)
        return Job(JobStatus.FAILED, f"SparkApplication {app['metadata']['name']} {phase}: {message}")

    def _read(self, base: Path, generation: int, *, default: Job) -> Job:
        try:
            output = read_output(base / "output")
        except (ContractError, OSError) as exc:
            return Job(JobStatus.FAILED, f"the planning job's output is unreadable: {exc}")
        if output.metrics is None:
            return default
        if not output.metrics.ok or output.plan is None:
            return Job(JobStatus.FAILED, output.metrics.message or "the planning job failed")
        plan = output.plan
        basis = self._basis(base, plan.targets().keys())
        proposal = Proposal(id=plan.digest()[:12], generation=generation, targets=plan.targets(), basis=basis)
        return Job(JobStatus.SUCCEEDED, "", proposal, metrics=output.metrics)

    def _basis(self, base: Path, planned: Iterable[TopicPartition]) -> dict[TopicPartition, Replicas]:
        """The replicas each planned partition had in the snapshot the job planned from."""
        wanted = set(planned)
        basis: dict[TopicPartition, Replicas] = {}
        folder = base / "input" / "partitions"
        for part in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            for line in part.read_text().splitlines():
                if line.strip():
                    record = PartitionRecord.from_json(line)
                    tp = TopicPartition(record.topic, record.partition)
                    if tp in wanted:
                        basis[tp] = tuple(record.replicas)
        return basis

    # ---------------------------------------------------------------------------------------------- cleanup

    def cleanup(self, body: Mapping[str, Any]) -> None:
        """Stop any local job of the resource and remove its directories (the storage contract goes with the CR)."""
        meta = body["metadata"]
        with self._lock:
            jobs = [k for k in self._running if k[0] == meta["uid"]]
            running = [self._running.pop(k) for k in jobs]
        for job in running:
            job.cancel()
        with contextlib.suppress(OSError):
            shutil.rmtree(self.root(meta["namespace"], meta["name"]))
