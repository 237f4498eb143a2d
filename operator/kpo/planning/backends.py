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
import datetime as dt
import json
import logging
import shutil
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo.config import PlannerConfig
from kpo.domain.model import Replicas, TopicPartition
from kpo.domain.plan_contract import BrokerInfo, ContractError, PartitionRecord, PlanRequest
from kpo.domain.plan_job import Job, JobStatus
from kpo.domain.proposal import Proposal
from kpo.domain.spark_application import Progress, application_name, bounded_message, read_state
from kpo.k8s import sparkapp
from kpo.planning.spark.runner import LocalSparkConfig, LocalSparkRunner, RunningJob
from kpo.planning.spark.workdir import read_output, write_input

log = logging.getLogger(__name__)

#: The API server's (and admission webhooks') answers to a SparkApplication that will not be accepted as it is.
_REFUSED = frozenset({400, 403, 422})


def _webhook_unreachable(exc: ApiException) -> bool:
    """The API server's 500 for an admission webhook it could not call (down, timed out, a bad certificate)."""
    return exc.status == 500 and "failed calling webhook" in _api_message(exc)


def _api_message(exc: ApiException) -> str:
    """The message of a refusal: the Status body's ``message``, else the exception's reason."""
    try:
        said = json.loads(exc.body or "{}").get("message")
    except (ValueError, AttributeError):
        said = None
    return str(said or exc.reason or exc)


class PlanningJobs:
    def __init__(self, config: PlannerConfig, api: client.ApiClient) -> None:
        self.config = config
        self.apps = sparkapp.SparkApplications(api)
        local = config.local
        self.runner = LocalSparkRunner(LocalSparkConfig(
            master=local.master, driver_memory=local.driver_memory, timeout_seconds=local.timeout_seconds,
            conf=dict(local.spark_conf)))
        self._running: dict[tuple[str, int], RunningJob] = {}
        # SparkApplications the API server refused, by (uid, generation): poll reports the refusal once.
        self._refused: dict[tuple[str, int], str] = {}
        # SparkApplications not created for want of an answer from an admission webhook, by (uid, generation).
        self._unstarted: dict[tuple[str, int], str] = {}
        # Resources whose application could not be created, said in the log until one is.
        self._unstarted_said: set[str] = set()
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
        attempt = self.apps.count(namespace, meta["uid"], generation) + 1
        app_name = application_name(namespace=meta["namespace"], name=meta["name"], app_namespace=namespace,
                                    generation=generation, attempt=attempt)
        body_of_app = sparkapp.manifest(settings, name=app_name, namespace=namespace, owner=body,
                                        input_uri=str(base / "input"), output_uri=str(base / "output"),
                                        generation=generation)
        try:
            self.apps.create(body_of_app)
        except ApiException as exc:
            if _webhook_unreachable(exc):
                # The API server is up but the Spark Operator's webhook (failurePolicy Fail) did not answer: not an
                # API outage, and not a refusal of this manifest. The plan stays Planning and says so; the next tick
                # tries again.
                said = _api_message(exc)
                with self._lock:
                    first = meta["uid"] not in self._unstarted_said
                    self._unstarted_said.add(meta["uid"])
                    self._unstarted[(meta["uid"], generation)] = \
                        f"SparkApplication {namespace}/{app_name} could not be created: {bounded_message(said)}"
                if first:  # said once, not on every tick until the webhook answers
                    log.warning("%s/%s: SparkApplication %s/%s not created (tried again on every tick): %s",
                                meta["namespace"], meta["name"], namespace, app_name, said)
                return
            if exc.status not in _REFUSED:
                raise
            # Refused by the API server or the Spark Operator's admission webhook: the same manifest would be refused
            # again, so the plan fails with the refusal instead of retrying for ever.
            said = _api_message(exc)
            log.warning("%s/%s: SparkApplication %s/%s refused: %s", meta["namespace"], meta["name"], namespace,
                        app_name, said)
            with self._lock:
                self._refused[(meta["uid"], generation)] = \
                    f"SparkApplication {namespace}/{app_name} was refused: {bounded_message(said)}"
            return
        with self._lock:
            self._unstarted_said.discard(meta["uid"])

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
                    if outcome.message != bounded_message(outcome.message):
                        log.warning("%s/%s: the planning job failed:\n%s", meta["namespace"], meta["name"],
                                    outcome.message)
                    return Job(JobStatus.FAILED, bounded_message(outcome.message))
            return self._read(base, generation, default=Job(JobStatus.NONE))
        with self._lock:
            refused = self._refused.pop((meta["uid"], generation), None)
        if refused is not None:
            return Job(JobStatus.FAILED, refused)
        return self._poll_application(meta, base, generation)

    def _poll_application(self, meta: Mapping[str, Any], base: Path, generation: int) -> Job:
        settings = self.config.spark_application
        namespace = settings.namespace or meta["namespace"]
        app = self.apps.latest(namespace, meta["uid"], generation)
        if app is None:
            with self._lock:
                unstarted = self._unstarted.pop((meta["uid"], generation), "")
            return Job(JobStatus.NONE, unstarted)
        name = f"SparkApplication {namespace}/{app['metadata']['name']}"
        state = (app.get("status") or {}).get("applicationState") or {}
        error = str(state.get("errorMessage") or "")
        created = dt.datetime.fromisoformat(str(app["metadata"]["creationTimestamp"]).replace("Z", "+00:00"))
        reading = read_state(str(state.get("state") or ""), error, timeout_seconds=settings.timeout_seconds,
                             age_seconds=(dt.datetime.now(dt.UTC) - created).total_seconds())
        if reading.progress is Progress.WAITING:
            return Job(JobStatus.RUNNING, f"{name}: {reading.message}")
        if reading.progress is Progress.TIMED_OUT:
            # Its pods would go on holding the node's resources for a plan nobody waits for.
            log.warning("%s/%s: %s %s; deleting it", meta["namespace"], meta["name"], name, reading.message)
            self.apps.delete(namespace, app["metadata"]["name"])
            return Job(JobStatus.FAILED, f"{name} {reading.message}")
        if reading.progress is Progress.COMPLETED:
            return self._read(base, generation, default=Job(
                JobStatus.FAILED, f"{name} completed without writing a plan"))
        job_said = self._read(base, generation, default=Job(JobStatus.FAILED, ""))
        if error:
            log.warning("%s/%s: %s failed; its errorMessage:\n%s", meta["namespace"], meta["name"], name, error)
        if job_said.status is JobStatus.FAILED and job_said.message:
            return Job(JobStatus.FAILED, f"{name} {state.get('state')}: {job_said.message}")
        return Job(JobStatus.FAILED, f"{name} {bounded_message(reading.message)}")

    def _read(self, base: Path, generation: int, *, default: Job) -> Job:
        try:
            output = read_output(base / "output")
        except (ContractError, OSError) as exc:
            return Job(JobStatus.FAILED, f"the planning job's output is unreadable: {exc}")
        if output.metrics is None:
            return default
        if not output.metrics.ok or output.plan is None:
            said = output.metrics.message or "the planning job failed"
            if said != bounded_message(said):
                log.warning("the planning job in %s failed:\n%s", base, said)
            return Job(JobStatus.FAILED, bounded_message(said))
        plan = output.plan
        basis = self._basis(base, plan.targets().keys())
        proposal = Proposal(id=plan.digest()[:12], generation=generation, targets=plan.targets(), basis=basis,
                            log_dirs=plan.log_dir_targets())
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
        """Stop any local job of the resource, delete its SparkApplications (kpo's finalizer does it: an
        ownerReference cannot reach across namespaces) and remove its directories (the storage contract goes with
        the CR)."""
        meta = body["metadata"]
        with self._lock:
            jobs = [k for k in self._running if k[0] == meta["uid"]]
            running = [self._running.pop(k) for k in jobs]
            self._unstarted_said.discard(meta["uid"])
            for said in (self._refused, self._unstarted):  # what a poll would have reported: nobody will poll now
                for key in [k for k in said if k[0] == meta["uid"]]:
                    del said[key]
        for job in running:
            job.cancel()
        if self.config.backend != "local":
            namespace = self.config.spark_application.namespace or meta["namespace"]
            if deleted := self.apps.delete_all(namespace, meta["uid"]):
                log.info("%s/%s: deleted SparkApplication(s) %s in %s", meta["namespace"], meta["name"], deleted,
                         namespace)
        with contextlib.suppress(OSError):
            shutil.rmtree(self.root(meta["namespace"], meta["name"]))
