"""The Kubernetes side of auto-propose: find the PartitionReassignments kpo proposed for a cluster, create one, and
say so with an Event on it (the same core/v1 Event a handler posts, so ``kubectl describe`` shows it)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo.api import API_VERSION, GROUP, PARTITION_REASSIGNMENT, VERSION
from kpo.domain.auto_propose import AUTO_PROPOSE_LABEL, CLUSTER_LABEL, label_value

PLURAL = PARTITION_REASSIGNMENT.plural


class AutoProposals:
    def __init__(self, api: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)

    def existing(self, namespace: str, cluster: str) -> list[dict[str, Any]]:
        """Auto-proposals of ``cluster`` in ``namespace`` (adding or removing brokers), in any phase."""
        selector = f"{AUTO_PROPOSE_LABEL},{CLUSTER_LABEL}={label_value(cluster)}"
        listed = cast(dict[str, Any], self.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, label_selector=selector))
        return list(listed.get("items") or [])

    def create(self, body: Mapping[str, Any], message: str) -> bool:
        """Create the proposal and post its Event; False when one of that name exists already."""
        namespace = body["metadata"]["namespace"]
        try:
            created = cast(dict[str, Any], self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, dict(body)))
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        now = datetime.datetime.now(datetime.UTC)
        meta = created["metadata"]
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{meta['name']}.", namespace=namespace),
            involved_object=client.V1ObjectReference(
                api_version=API_VERSION, kind=PARTITION_REASSIGNMENT.kind, name=meta["name"],
                namespace=namespace, uid=meta["uid"]),
            reason="AutoProposed", message=message[:1024], type="Normal",
            source=client.V1EventSource(component="kpo"), first_timestamp=now, last_timestamp=now, count=1)
        self.core.create_namespaced_event(namespace, event)
        return True
