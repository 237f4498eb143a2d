"""SparkApplications (Kubeflow Spark Operator, sparkoperator.k8s.io/v1beta2) for planning jobs at scale.

:func:`manifest` is a pure builder (unit-tested); :class:`SparkApplications` creates, reads and deletes them. A
SparkApplication is owned by its PartitionReassignment, so deleting the resource garbage-collects it. kpo follows
``status.applicationState.state`` (SUBMITTED -> RUNNING -> COMPLETED | FAILED, with ``errorMessage``) as the Spark
Operator reports it, and reads the plan from the storage both sides share.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo.config import SparkApplicationSettings
from kpo.k8s.rollback import owner_reference

GROUP, VERSION, PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
LABEL_OWNER = "kpo.dev/partitionreassignment"
LABEL_GENERATION = "kpo.dev/generation"


def manifest(settings: SparkApplicationSettings, *, name: str, namespace: str, owner: Mapping[str, Any],
             input_uri: str, output_uri: str, generation: int) -> dict[str, Any]:
    """The SparkApplication that runs the planning job on ``input_uri``, writing to ``output_uri``."""
    ref = owner_reference(owner)
    labels = {LABEL_OWNER: str(owner["metadata"]["name"]), LABEL_GENERATION: str(generation),
              "app.kubernetes.io/managed-by": "kpo"}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "ownerReferences": [{"apiVersion": ref.api_version, "kind": ref.kind, "name": ref.name,
                                          "uid": ref.uid, "controller": True, "blockOwnerDeletion": True}]},
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "image": settings.image,
            "imagePullPolicy": settings.image_pull_policy,
            "mainApplicationFile": settings.main_application_file,
            "arguments": ["--input", input_uri, "--output", output_uri],
            "sparkVersion": settings.spark_version,
            "sparkConf": dict(settings.spark_conf),
            "restartPolicy": {"type": "Never"},
            "driver": {"cores": settings.driver.cores, "memory": settings.driver.memory,
                       "serviceAccount": settings.service_account, "labels": labels},
            "executor": {"cores": settings.executor.cores, "memory": settings.executor.memory,
                         "instances": settings.executor.instances, "labels": labels},
        },
    }


class SparkApplications:
    def __init__(self, api: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api)

    def create(self, body: Mapping[str, Any]) -> None:
        meta = body["metadata"]
        self.custom.create_namespaced_custom_object(GROUP, VERSION, meta["namespace"], PLURAL, dict(body))

    def latest(self, namespace: str, owner: str, generation: int) -> dict[str, Any] | None:
        selector = f"{LABEL_OWNER}={owner},{LABEL_GENERATION}={generation}"
        try:
            found = cast(dict[str, Any], self.custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, label_selector=selector))
        except ApiException as exc:
            if exc.status == 404:
                return None  # the SparkApplication CRD is not installed
            raise
        items: list[dict[str, Any]] = found.get("items") or []
        return max(items, key=lambda i: i["metadata"]["creationTimestamp"] + i["metadata"]["name"],
                   default=None)

    def count(self, namespace: str, owner: str, generation: int) -> int:
        selector = f"{LABEL_OWNER}={owner},{LABEL_GENERATION}={generation}"
        found = cast(dict[str, Any], self.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, label_selector=selector))
        return len(found.get("items") or [])
