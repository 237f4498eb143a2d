"""Helpers the end-to-end tests share for kpo's custom resources on the real kube-apiserver."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo.api.crdgen import crd_manifests

GROUP, VERSION = "kpo.dev", "v1alpha1"
PLURALS = {
    "PartitionReassignment": "partitionreassignments",
    "PreferredLeaderElection": "preferredleaderelections",
    "TopicPartitionCount": "topicpartitioncounts",
}


def install_crds(api: client.ApiClient) -> None:
    """Create or update kpo's CRDs (generated from the API models) and wait until they are established."""
    ext = client.ApiextensionsV1Api(api)
    for manifest in crd_manifests():
        name = manifest["metadata"]["name"]
        try:
            ext.create_custom_resource_definition(manifest)
        except ApiException as exc:
            if exc.status != 409:
                raise
            current = ext.read_custom_resource_definition(name)
            updated = {**manifest, "metadata": {**manifest["metadata"],
                                                "resourceVersion": current.metadata.resource_version}}
            ext.replace_custom_resource_definition(name, updated)

    def established() -> bool:
        for manifest in crd_manifests():
            crd = ext.read_custom_resource_definition(manifest["metadata"]["name"])
            if not any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or []):
                return False
        return True

    wait_until(established, 30, "kpo CRDs to be established")


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last seen: {last!r}")


class Resources:
    """kpo custom resources of one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.namespace = namespace

    def create(self, kind: str, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": dict(spec)}
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURALS[kind], body)
        return created

    def get(self, kind: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURALS[kind], name)
        return found

    def exists(self, kind: str, name: str) -> bool:
        try:
            self.get(kind, name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def patch_spec(self, kind: str, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        patched: dict[str, Any] = self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURALS[kind], name, {"spec": dict(spec)})
        return patched

    def delete(self, kind: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURALS[kind], name)

    def status(self, kind: str, name: str) -> dict[str, Any]:
        return dict(self.get(kind, name).get("status") or {})

    def wait_phase(self, kind: str, name: str, phases: str | set[str], timeout: float = 120) -> dict[str, Any]:
        wanted = {phases} if isinstance(phases, str) else phases

        seen: dict[str, Any] = {}

        def reached() -> dict[str, Any] | None:
            status = self.status(kind, name)
            seen["status"] = status
            return status if status.get("phase") in wanted else None

        try:
            result: dict[str, Any] = wait_until(reached, timeout, f"{kind} {name} to reach {sorted(wanted)}")
        except AssertionError as exc:
            # The phase alone says little when a wait fails in CI: the conditions say why it stayed there.
            raise AssertionError(f"{exc}; its last status: {json.dumps(seen.get('status'), default=str)}") from None
        return result

    def wait_waiting_for_topic(self, kind: str, name: str, timeout: float = 30) -> dict[str, Any]:
        """The status once the resource is Pending for a topic that does not exist yet (reason WaitingForTopic,
        :mod:`kpo.domain.topic_wait`)."""
        waiting = self.wait_phase(kind, name, "Pending", timeout=timeout)
        assert {c["type"]: c["reason"] for c in waiting["conditions"]}["Ready"] == "WaitingForTopic", waiting
        return waiting

    def condition(self, kind: str, name: str, type_: str) -> dict[str, Any] | None:
        for c in self.status(kind, name).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return None

    def events(self, name: str) -> list[Any]:
        items = self.core.list_namespaced_event(self.namespace, field_selector=f"involvedObject.name={name}").items
        return sorted(items, key=lambda e: e.metadata.creation_timestamp)

    def wait_event(self, name: str, reason: str, timeout: float = 30) -> list[Any]:
        """The Events of `name` with `reason`, once there is at least one.

        Kopf posts Events from a queue after the handler has written the status, so the Event of a phase or condition a
        test has just seen may come a moment later (a CI run read the list too soon and found it empty)."""
        def posted() -> list[Any]:
            return [e for e in self.events(name) if e.reason == reason]

        try:
            found: list[Any] = wait_until(posted, timeout, f"a {reason} Event of {name}")
        except AssertionError as exc:
            seen = [(e.reason, str(e.message)[:80]) for e in self.events(name)]
            raise AssertionError(f"{exc}; its Events: {seen}") from None
        return found

    def config_map(self, name: str) -> dict[str, str] | None:
        try:
            return dict(self.core.read_namespaced_config_map(name, self.namespace).data or {})
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
