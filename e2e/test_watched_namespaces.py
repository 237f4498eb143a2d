"""Kopf watching a namespace pattern serves a matching namespace made while it lists namespaces (kpo.kopf_namespaces).

Kopf 1.45 lists namespaces once, then starts a watch whose own listing it ignores: a namespace made between the two was
never served until the operator restarted. That window is milliseconds of an operator's start (and of every re-listing
after a watch stream ends in 410 Gone), too short to hit on purpose from outside the process, so this test runs Kopf
itself, in-process, against the real API server, and makes the namespace exactly there: Kopf sets
``insights.ready_namespaces`` between its first listing and the start of its watch, and the test's flag makes the
namespace (a blocking create on the API server) before it is set. A resource in that namespace must then reach a
handler, as one in a namespace made before the start does. Kopf alone misses it (the first test, which fails once a
Kopf release fixes the race and kpo's fix can go); with kpo's processor installed as ``python -m kpo`` installs it, it
is served. About 10 s.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
from kopf._cogs.structs import references
from kopf._core.reactor import observation
from kubernetes import client

from e2e.kube_support import GROUP, PLURALS, VERSION, Resources, wait_until
from kpo import kopf_namespaces

KIND = "PreferredLeaderElection"
#: How long a resource may take to reach the handler once Kopf serves its namespace; a missed one never does.
SERVED_WITHIN_SECONDS = 10.0


class MakeNamespaceFirst(asyncio.Event):
    """Kopf's "namespaces listed" flag, set between its first listing and the start of its namespace watch: makes
    ``name`` on the API server (once) before the flag is set."""

    def __init__(self, core: client.CoreV1Api, name: str) -> None:
        super().__init__()
        self.core = core
        self.name = name
        self.made_at: float | None = None

    def set(self) -> None:
        if self.made_at is None:
            self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=self.name)))
            self.made_at = time.monotonic()
        super().set()


class KopfInProcess:
    """``kopf.operator`` in a thread of its own, watching ``<prefix>-*``, one event handler recording which namespaces'
    PreferredLeaderElections reached it."""

    def __init__(self, prefix: str, insights: references.Insights) -> None:
        self.registry = kopf.OperatorRegistry()
        self.seen: set[str] = set()
        self.stop_flag = threading.Event()
        kopf.on.login(registry=self.registry)(kopf.login_with_kubeconfig)
        kopf.on.event(GROUP, VERSION, PLURALS[KIND], registry=self.registry)(self.on_event)
        self.thread = threading.Thread(target=asyncio.run, daemon=True, args=(kopf.operator(
            registry=self.registry, standalone=True, clusterwide=False, namespaces=[f"{prefix}-*"],
            insights=insights, stop_flag=self.stop_flag),))

    def on_event(self, namespace: str | None, **_: Any) -> None:
        if namespace is not None:
            self.seen.add(namespace)

    def __enter__(self) -> KopfInProcess:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop_flag.set()
        self.thread.join(timeout=30)


@pytest.fixture
def kubeconfig_env(kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bed's kubeconfig, for kopf.login_with_kubeconfig (it reads KUBECONFIG when it logs in)."""
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))


@pytest.fixture
def kopf_processor() -> Iterator[None]:
    original = observation.process_discovered_namespace_event
    yield
    observation.process_discovered_namespace_event = original


def served_namespaces(api_client: client.ApiClient, kopf_alone: bool) -> tuple[set[str], str, str]:
    """Start Kopf with a namespace made before it and one made in the window; one resource in each. Returns the
    namespaces whose resource reached the handler, and the two namespaces' names."""
    prefix = f"e2e-nsw-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api_client)
    before, window = f"{prefix}-before", f"{prefix}-window"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=before)))
    made = MakeNamespaceFirst(core, window)
    insights = references.Insights(ready_namespaces=made)
    if not kopf_alone:
        kopf_namespaces.serve_listed_namespaces()
    try:
        with KopfInProcess(prefix, insights) as kopf_run:
            wait_until(lambda: made.made_at is not None, 60, "Kopf's first namespace listing")
            for name in (before, window):
                Resources(api_client, name).create(KIND, "served", {"topics": ["t"]})
            deadline = time.monotonic() + SERVED_WITHIN_SECONDS
            while time.monotonic() < deadline and kopf_run.seen != {before, window}:
                time.sleep(0.2)
            return set(kopf_run.seen), before, window
    finally:
        for name in (before, window):
            # No finalizer was added (an event handler needs none): the namespace controller removes what is left.
            core.delete_namespace(name)


def test_kopf_alone_never_serves_a_namespace_made_between_its_listing_and_its_watch(
        kpo_crds: None, api_client: client.ApiClient, kubeconfig_env: None, kopf_processor: None) -> None:
    seen, before, window = served_namespaces(api_client, kopf_alone=True)
    assert before in seen, f"the harness is broken: not even the namespace made before the start was served: {seen}"
    assert window not in seen, "Kopf served the namespace made in the window by itself: kpo.kopf_namespaces can go"


def test_with_kpos_fix_a_namespace_made_between_the_listing_and_the_watch_is_served(
        kpo_crds: None, api_client: client.ApiClient, kubeconfig_env: None, kopf_processor: None) -> None:
    seen, before, window = served_namespaces(api_client, kopf_alone=False)
    assert seen == {before, window}, f"served: {sorted(seen)}; expected both {before} and {window}"

