"""A namespace that matches a ``--namespace`` pattern is served however Kopf learns of it.

With patterns (``--namespace 'team-*'``), Kopf 1.45 lists the namespaces once, then watches them; its watch starts
with a listing of its own, and starts again with one after a stream ends in 410 Gone, and Kopf ignores every namespace
such a listing yields ("already known from the first listing"). A matching namespace created between Kopf's first
listing and its watch's listing, or while a stream was being re-listed, is therefore never served until the operator
restarts: its resources get no status, no condition and no Event, and the operator logs nothing. kpo's e2e met it as an
operator that never acted on any of 200 resources in a namespace made just after it started.

The fix treats a listed namespace as Kopf treats a watched one: the served set is revised with Kopf's own
``revise_namespaces``, against the same patterns, and the orchestrator is woken only when that set changed (a listing
of thousands of namespaces wakes nothing when all are known). Kopf's observer binds its namespace processor, a module
global, when it starts, so :func:`serve_listed_namespaces` must run before ``kopf.operator``. The processor is private
to Kopf: a Kopf without it fails here, at start, rather than running silently without the fix. Exact names (the Helm
chart's ``watchNamespaces``) go through the same observer, so a named namespace created after the start is covered
too.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from kopf._cogs.structs import bodies, references
from kopf._core.reactor import observation

logger = logging.getLogger(__name__)

_KOPF_PROCESSOR = observation.process_discovered_namespace_event


async def process_namespace_event(*, raw_event: bodies.RawEvent,
                                  namespaces: Collection[references.NamespacePattern],
                                  insights: references.Insights, **kwargs: Any) -> None:
    """Kopf's processor for watched events; a listed namespace (``type`` None) revises the served set too."""
    if raw_event["type"] is not None:
        await _KOPF_PROCESSOR(raw_event=raw_event, namespaces=namespaces, insights=insights, **kwargs)
        return
    name = raw_event["object"]["metadata"]["name"]
    async with insights.revised:
        served = name in insights.namespaces
        observation.revise_namespaces(raw_events=[raw_event], insights=insights, namespaces=namespaces)
        if (name in insights.namespaces) != served:
            logger.info("Namespace %s is %s from now on: it was listed, not seen by the watch", name,
                        "no longer served" if served else "served")
            insights.revised.notify_all()


def serve_listed_namespaces() -> None:
    """Install :func:`process_namespace_event` as Kopf's namespace processor (idempotent)."""
    if observation.process_discovered_namespace_event not in (_KOPF_PROCESSOR, process_namespace_event):
        raise RuntimeError("Kopf's namespace processor was replaced by something else: kpo cannot serve listed "
                           "namespaces")
    observation.process_discovered_namespace_event = process_namespace_event
