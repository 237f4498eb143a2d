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


class StaleStatus(Exception):  # noqa: N818 - reads as what it is
    """The object changed since the body the status was computed from (HTTP 409 on the resourceVersion
    precondition): the tick's status is for an older object, and must not be written."""


def patch_status(api: client.ApiClient, plural: str, body: Mapping[str, Any], status: Mapping[str, Any]
                 ) -> str | None:
    """Merge-patch ``status`` into the status subresource of the object ``body``; the object's new resourceVersion,
    or None if the object is gone.

    The patch carries ``body``'s resourceVersion as a precondition: a tick that decided on an older copy of the
    object (the operator's watch can lag behind its own writes by a minute with hundreds of resources) gets
    :class:`StaleStatus` instead of writing a status, or posting Events, that went back in time.
    """
    meta = body["metadata"]
    group, _, version = str(body["apiVersion"]).partition("/")
    custom = client.CustomObjectsApi(api)
    resource_version = meta.get("resourceVersion")
    for _attempt in range(3):
        patch: dict[str, Any] = {"status": dict(status)}
        if resource_version:
            patch["metadata"] = {"resourceVersion": resource_version}
        try:
            written = custom.patch_namespaced_custom_object_status(
                group, version, meta["namespace"], plural, meta["name"], patch,
                _content_type="application/merge-patch+json", _request_timeout=WRITE_TIMEOUT_SECONDS)
            break
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status != 409:
                raise
            # A change of metadata alone (Kopf adding its finalizer right after creation, an annotation) moves the
            # resourceVersion but not what the tick decided from: the spec (generation) and the status. Then the
            # status is written on the fresh version; anything else means the tick decided on an older object.
            fresh = _current(custom, group, version, plural, meta)
            if fresh is None:
                return None
            if not same_inputs(body, fresh):
                raise StaleStatus(f"{meta['namespace']}/{meta['name']} changed since resourceVersion "
                                  f"{meta.get('resourceVersion')}") from exc
            resource_version = fresh["metadata"].get("resourceVersion")
    else:
        raise StaleStatus(f"{meta['namespace']}/{meta['name']} kept changing while its status was written")
    metadata = written.get("metadata") if isinstance(written, dict) else None
    return str((metadata or {}).get("resourceVersion") or "")


def _current(custom: client.CustomObjectsApi, group: str, version: str, plural: str, meta: Mapping[str, Any]
             ) -> dict[str, Any] | None:
    try:
        found = custom.get_namespaced_custom_object(
            group, version, meta["namespace"], plural, meta["name"], _request_timeout=WRITE_TIMEOUT_SECONDS)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found if isinstance(found, dict) else None


def same_inputs(body: Mapping[str, Any], fresh: Mapping[str, Any]) -> bool:
    """Whether ``fresh`` has the spec generation and the status ``body`` had: only its metadata moved on."""
    return bool(body["metadata"].get("generation") == fresh["metadata"].get("generation")
                and (body.get("status") or {}) == (fresh.get("status") or {}))
