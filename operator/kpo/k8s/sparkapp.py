"""SparkApplications (Kubeflow Spark Operator, sparkoperator.k8s.io/v1beta2) for planning jobs at scale.

:func:`manifest` is a pure builder (unit-tested); :class:`SparkApplications` creates, lists and deletes them. How a
SparkApplication is named, tied to its PartitionReassignment and read is :mod:`kpo.domain.spark_application`: a
DNS-1035 name the Spark Operator's webhook accepts, labels with the resource's namespace, uid (and name), and an
ownerReference only when both live in one namespace (a cross-namespace one makes the garbage collector delete the
application at once). kpo deletes the applications of a resource itself, from its finalizer (:meth:`delete_all`).
kpo follows ``status.applicationState`` as the Spark Operator reports it, and reads the plan from the storage both
sides share.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo.config import ResourcesSpec, SparkApplicationSettings
from kpo.domain.spark_application import owner_annotations, owner_labels, selector

GROUP, VERSION, PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"


def _pod(resources: ResourcesSpec) -> dict[str, Any]:
    pod: dict[str, Any] = {"cores": resources.cores, "memory": resources.memory}
    if resources.core_request:
        pod["coreRequest"] = resources.core_request
    return pod


def manifest(settings: SparkApplicationSettings, *, name: str, namespace: str, owner: Mapping[str, Any],
             input_uri: str, output_uri: str, generation: int) -> dict[str, Any]:
    """The SparkApplication ``namespace/name`` that runs the planning job on ``input_uri``, writing to
    ``output_uri``, for generation ``generation`` of the PartitionReassignment ``owner``."""
    meta = owner["metadata"]
    labels = owner_labels(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"], generation=generation)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels,
                                "annotations": owner_annotations(namespace=meta["namespace"], name=meta["name"])}
    if namespace == meta["namespace"]:
        metadata["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                        "name": meta["name"], "uid": meta["uid"], "controller": True,
                                        "blockOwnerDeletion": True}]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SparkApplication",
        "metadata": metadata,
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
            "driver": {**_pod(settings.driver), "serviceAccount": settings.service_account, "labels": labels},
            "executor": {**_pod(settings.executor), "instances": settings.executor.instances, "labels": labels},
        },
    }


class SparkApplications:
    def __init__(self, api: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api)

    def create(self, body: Mapping[str, Any]) -> None:
        meta = body["metadata"]
        self.custom.create_namespaced_custom_object(GROUP, VERSION, meta["namespace"], PLURAL, dict(body))

    def _list(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        try:
            found = cast(dict[str, Any], self.custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, label_selector=label_selector))
        except ApiException as exc:
            if exc.status == 404:
                return []  # the SparkApplication CRD is not installed
            raise
        return list(found.get("items") or [])

    def latest(self, namespace: str, uid: str, generation: int) -> dict[str, Any] | None:
        """The newest SparkApplication of one generation of the resource with ``uid``."""
        return max(self._list(namespace, selector(uid, generation)),
                   key=lambda i: i["metadata"]["creationTimestamp"] + i["metadata"]["name"], default=None)

    def count(self, namespace: str, uid: str, generation: int) -> int:
        return len(self._list(namespace, selector(uid, generation)))

    def delete(self, namespace: str, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                                        propagation_policy="Background")
        except ApiException as exc:
            if exc.status != 404:
                raise

    def delete_all(self, namespace: str, uid: str) -> list[str]:
        """Delete every SparkApplication of the resource with ``uid``; the names deleted."""
        names = [str(app["metadata"]["name"]) for app in self._list(namespace, selector(uid))]
        for name in names:
            self.delete(namespace, name)
        return names
