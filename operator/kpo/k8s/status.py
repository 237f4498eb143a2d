"""A custom resource's status, written by kpo's tick itself rather than by Kopf after the handler returns.

Kopf applies a handler's patch after the handler, outside it, retrying a failed request for minutes: while the API
server is down the timer sits in those retries, no tick runs, and the operator's own outage handling
(:class:`~kpo.k8s.outage.ApiOutage`) never sees the outage — it only sees what fails inside a tick. Written here, the
status write is one more request of the tick: an outage fails it like any read, is said once, and the next tick that
gets through writes a fresh status (Kafka is the source of truth: nothing is lost but a projection).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

#: Seconds one status write may take (the client waits forever by default: a hung API server would hold the tick).
WRITE_TIMEOUT_SECONDS = 30.0


def patch_status(api: client.ApiClient, plural: str, body: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Merge-patch ``status`` into the status subresource of the object ``body``; False if the object is gone."""
    meta = body["metadata"]
    group, _, version = str(body["apiVersion"]).partition("/")
    try:
        client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
            group, version, meta["namespace"], plural, meta["name"], {"status": dict(status)},
            _content_type="application/merge-patch+json", _request_timeout=WRITE_TIMEOUT_SECONDS)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
