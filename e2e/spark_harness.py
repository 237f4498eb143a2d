"""A stand-in for the Kubeflow Spark Operator, the one stand-in of the test bed.

The Spark Operator cannot run here (it starts driver pods, and there is no kubelet). This harness plays its part
faithfully enough for kpo: it watches SparkApplications, runs each one's real job with the real ``spark-submit`` in
local mode (``spec.mainApplicationFile`` and ``spec.arguments``, the driver memory and ``sparkConf`` from the spec),
and writes the status the way the Spark Operator does: ``applicationState.state`` SUBMITTED -> RUNNING ->
COMPLETED | FAILED (with ``errorMessage``), ``driverInfo``, ``sparkApplicationId``, attempts and times.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from kpo.planner.runner import pyspark_home
from kpo_testbed.paths import REPO_ROOT

GROUP, VERSION, PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
CRD_FILE = Path(__file__).resolve().parent / "sparkoperator" / "sparkapplication-crd.yaml"


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class SparkOperatorHarness:
    def __init__(self, api: client.ApiClient, namespace_pattern: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.pattern = namespace_pattern
        self.runs: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="spark-operator-harness", daemon=True)
        self._seen: set[str] = set()

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

    def _status(self, app: dict[str, Any], status: dict[str, Any]) -> None:
        meta = app["metadata"]
        try:
            self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, meta["namespace"], PLURAL,
                                                              meta["name"], {"status": status})
        except ApiException as exc:
            if exc.status != 404:  # the application (or its owner) is gone: nothing to report to
                raise

    def _run(self, app: dict[str, Any]) -> None:
        meta, spec = app["metadata"], app["spec"]
        self.runs.append(f"{meta['namespace']}/{meta['name']}")
        submitted = _now()
        self._status(app, {"applicationState": {"state": "SUBMITTED"}, "submissionAttempts": 1,
                           "lastSubmissionAttemptTime": submitted})
        main_file = str(spec["mainApplicationFile"]).removeprefix("local://")
        conf = {"spark.ui.enabled": "false", **{str(k): str(v) for k, v in (spec.get("sparkConf") or {}).items()}}
        argv = [str(pyspark_home() / "bin" / "spark-submit"), "--master", "local[2]",
                "--driver-memory", str((spec.get("driver") or {}).get("memory", "1g")),
                *[arg for k, v in sorted(conf.items()) for arg in ("--conf", f"{k}={v}")],
                main_file, *[str(a) for a in spec.get("arguments") or []]]
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
               "PYTHONPATH": str(REPO_ROOT / "operator")}
        app_id = f"spark-{meta['uid'][:8]}"
        self._status(app, {"applicationState": {"state": "RUNNING"}, "sparkApplicationId": app_id,
                           "driverInfo": {"podName": f"{meta['name']}-driver",
                                          "webUIServiceName": f"{meta['name']}-ui-svc"},
                           "executionAttempts": 1, "lastSubmissionAttemptTime": submitted})
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=1800)
        state: dict[str, Any] = {"state": "COMPLETED" if done.returncode == 0 else "FAILED"}
        if done.returncode != 0:
            lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
            state["errorMessage"] = "\n".join(lines[-8:]) or f"driver exited with code {done.returncode}"
        self._status(app, {"applicationState": state, "terminationTime": _now(),
                           "driverInfo": {"podName": f"{meta['name']}-driver"}, "sparkApplicationId": app_id})
