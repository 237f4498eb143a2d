"""A stand-in for the Kubeflow Spark Operator, the one stand-in of the test bed (its Go module cannot be had here).

It does the Spark Operator's job the Spark Operator's way: it watches SparkApplications and submits each with the
real ``spark-submit --master k8s://... --deploy-mode cluster``, using the application's image, driver and executor
resources, ServiceAccount, labels, ``sparkConf`` and ``arguments``. Spark then makes the driver pod on the test
bed's node, and the driver makes the executor pods. The stand-in follows the driver pod and writes the status the
way the Spark Operator does: ``applicationState.state`` SUBMITTED -> RUNNING -> COMPLETED | FAILED (with
``errorMessage``), ``driverInfo``, ``executorState``, ``sparkApplicationId``, attempts and times.

Two facts of the test bed, not of kpo, are added to every submission: the driver reaches the API server at the
"kubernetes" Service's address rather than its DNS name (there is no cluster DNS), and CPU requests are small (the
node has two cores). Driver and executors are ordinary pods on the pod network; executors reach the driver at its pod
IP (the planner image's entry point advertises it).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from kpo.planner.runner import pyspark_home
from kpo_testbed.kube import KUBERNETES_SERVICE_IP

GROUP, VERSION, PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
CRD_FILE = Path(__file__).resolve().parent / "sparkoperator" / "sparkapplication-crd.yaml"
TESTBED_CONF = {
    "spark.ui.enabled": "false",
    "spark.kubernetes.driver.request.cores": "100m",
    "spark.kubernetes.executor.request.cores": "100m",
    "spark.kubernetes.submission.waitAppCompletion": "false",
    "spark.kubernetes.driver.master": f"https://{KUBERNETES_SERVICE_IP}:443",
}
FINISHED = {"Succeeded": "COMPLETED", "Failed": "FAILED"}


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def submit_argv(app: dict[str, Any], master: str, driver_template: Path) -> list[str]:
    """The spark-submit command the Spark Operator would run for ``app`` (cluster mode, on Kubernetes)."""
    meta, spec = app["metadata"], app["spec"]
    driver, executor = spec.get("driver") or {}, spec.get("executor") or {}
    conf: dict[str, str] = {
        "spark.kubernetes.namespace": meta["namespace"],
        "spark.kubernetes.container.image": spec["image"],
        "spark.kubernetes.container.image.pullPolicy": spec.get("imagePullPolicy", "IfNotPresent"),
        "spark.kubernetes.driver.pod.name": f"{meta['name']}-driver",
        "spark.kubernetes.driver.podTemplateFile": str(driver_template),
        "spark.kubernetes.authenticate.driver.serviceAccountName": driver.get("serviceAccount", "default"),
        "spark.kubernetes.submission.appName": meta["name"],
        "spark.driver.cores": str(driver.get("cores", 1)),
        "spark.driver.memory": str(driver.get("memory", "1g")),
        "spark.executor.instances": str(executor.get("instances", 1)),
        "spark.executor.cores": str(executor.get("cores", 1)),
        "spark.executor.memory": str(executor.get("memory", "1g")),
        **{f"spark.kubernetes.driver.label.{k}": str(v) for k, v in (driver.get("labels") or {}).items()},
        **{f"spark.kubernetes.executor.label.{k}": str(v) for k, v in (executor.get("labels") or {}).items()},
        "spark.kubernetes.driver.label.sparkoperator.k8s.io/app-name": meta["name"],
        "spark.kubernetes.executor.label.sparkoperator.k8s.io/app-name": meta["name"],
        **TESTBED_CONF,
        **{str(k): str(v) for k, v in (spec.get("sparkConf") or {}).items()},
    }
    return [str(pyspark_home() / "bin" / "spark-submit"), "--master", f"k8s://{master}", "--deploy-mode", "cluster",
            "--name", meta["name"], *[arg for k, v in sorted(conf.items()) for arg in ("--conf", f"{k}={v}")],
            str(spec["mainApplicationFile"]), *[str(a) for a in spec.get("arguments") or []]]


def driver_template(app: dict[str, Any]) -> dict[str, Any]:
    """The driver's pod template: owned by the SparkApplication, so deleting it collects the pods (the Spark
    Operator does the same)."""
    meta = app["metadata"]
    owner = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SparkApplication", "name": meta["name"],
             "uid": meta["uid"], "controller": True}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"ownerReferences": [owner]},
            "spec": {"containers": [{"name": "driver"}]}}


class SparkOperatorHarness:
    def __init__(self, api: client.ApiClient, namespace_pattern: str, kubeconfig: Path) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.master = str(api.configuration.host)
        self.kubeconfig = kubeconfig
        self.pattern = namespace_pattern
        self.runs: list[str] = []
        self.executor_pods: dict[str, set[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="spark-operator-stand-in", daemon=True)
        self._seen: set[str] = set()
        self._scratch = Path(tempfile.mkdtemp(prefix="spark-operator-"))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _watch(self) -> None:
        while not self._stop.is_set():
            stream = watch.Watch()
            try:
                for event in stream.stream(self.custom.list_cluster_custom_object, GROUP, VERSION, PLURAL,
                                           timeout_seconds=5):
                    app = event["object"]
                    meta = app["metadata"]
                    if event["type"] != "ADDED" or meta["uid"] in self._seen:
                        continue
                    if not fnmatch.fnmatch(meta["namespace"], self.pattern):
                        continue
                    if (app.get("status") or {}).get("applicationState"):
                        continue
                    self._seen.add(meta["uid"])
                    threading.Thread(target=self._run, args=(app,), daemon=True).start()
                    if self._stop.is_set():
                        break
            except ApiException:
                continue
            finally:
                stream.stop()

    def _status(self, app: dict[str, Any], status: dict[str, Any]) -> bool:
        meta = app["metadata"]
        try:
            self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, meta["namespace"], PLURAL,
                                                              meta["name"], {"status": status})
        except ApiException as exc:
            if exc.status != 404:
                raise
            return False  # the application (or its owner) is gone: nothing to report to
        return True

    def _run(self, app: dict[str, Any]) -> None:
        meta = app["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self.runs.append(key)
        template = self._scratch / f"{meta['uid']}-driver.yaml"
        template.write_text(yaml.safe_dump(driver_template(app)))
        submitted = _now()
        # The image's Python runs the job: a PYSPARK_PYTHON of this host would be sent along to the driver pod.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
        env["KUBECONFIG"] = str(self.kubeconfig)
        done = subprocess.run(submit_argv(app, self.master, template), env=env, capture_output=True, text=True,
                              check=False, timeout=300)
        if done.returncode != 0:
            lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
            self._status(app, {"applicationState": {"state": "FAILED", "errorMessage": "spark-submit failed: "
                                                    + "\n".join(lines[-8:])},
                               "submissionAttempts": 1, "lastSubmissionAttemptTime": submitted,
                               "terminationTime": _now()})
            return
        driver = f"{meta['name']}-driver"
        if not self._status(app, {"applicationState": {"state": "SUBMITTED"}, "submissionAttempts": 1,
                                  "lastSubmissionAttemptTime": submitted, "driverInfo": {"podName": driver}}):
            return
        self._follow(app, driver, submitted)

    def _follow(self, app: dict[str, Any], driver: str, submitted: str) -> None:
        """Poll the driver pod (and its executors) until the driver finishes, as the Spark Operator's pod watch."""
        meta = app["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        executors: dict[str, str] = {}
        deadline = time.monotonic() + 1800
        reported = ""
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                pod = self.core.read_namespaced_pod(driver, meta["namespace"])
                for ex in self.core.list_namespaced_pod(
                        meta["namespace"], label_selector=f"spark-role=executor,"
                        f"sparkoperator.k8s.io/app-name={meta['name']}").items:
                    executors[ex.metadata.name] = str(ex.status.phase).upper()
            except ApiException as exc:
                if exc.status == 404 and reported:
                    return  # deleted with its SparkApplication
                time.sleep(1)
                continue
            self.executor_pods.setdefault(key, set()).update(executors)
            phase = str(pod.status.phase)
            app_id = (pod.metadata.labels or {}).get("spark-app-selector", "")
            if phase in FINISHED:
                state: dict[str, Any] = {"state": FINISHED[phase]}
                if phase == "Failed":
                    state["errorMessage"] = self._driver_error(pod)
                self._status(app, {"applicationState": state, "terminationTime": _now(), "sparkApplicationId": app_id,
                                   "driverInfo": {"podName": driver}, "executorState": executors})
                return
            if phase == "Running" and reported != "RUNNING":
                reported = "RUNNING"
                if not self._status(app, {"applicationState": {"state": "RUNNING"}, "sparkApplicationId": app_id,
                                          "driverInfo": {"podName": driver}, "executionAttempts": 1,
                                          "lastSubmissionAttemptTime": submitted}):
                    return
            elif executors and reported == "RUNNING":
                self._status(app, {"executorState": executors})
            reported = reported or "SUBMITTED"
            time.sleep(0.5)

    @staticmethod
    def _driver_error(pod: client.V1Pod) -> str:
        for status in pod.status.container_statuses or []:
            ended = status.state.terminated if status.state else None
            if ended is not None:
                return (f"driver container exited with code {ended.exit_code} ({ended.reason})"
                        + (f": {ended.message.strip()}" if ended.message else ""))
        return f"driver pod {pod.metadata.name} failed: {pod.status.reason or pod.status.message or 'no reason'}"
