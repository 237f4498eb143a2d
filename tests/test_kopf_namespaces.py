"""Kopf's namespace processor as kpo installs it: a listed namespace matching a pattern is served (kpo.kopf_namespaces).

Kopf's own processor is run beside it on the same events, so a Kopf that starts serving listed namespaces itself makes
the first test fail and tells that the fix can go.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from kopf._cogs.structs import references
from kopf._core.reactor import observation

from kpo import kopf_namespaces

PATTERNS = ["team-*", "exact"]


def listed(name: str, **metadata: Any) -> dict[str, Any]:
    return {"type": None, "object": {"metadata": {"name": name, **metadata}}}


def served_after(processor: Any, events: list[dict[str, Any]], served: set[str] | None = None) -> set[Any]:
    async def run() -> set[Any]:
        insights = references.Insights()
        insights.namespaces.update(served or set())
        for event in events:
            await processor(raw_event=event, namespaces=PATTERNS, insights=insights)
        return set(insights.namespaces)
    return asyncio.run(run())


def test_kopf_alone_ignores_a_matching_namespace_that_only_a_listing_shows() -> None:
    assert served_after(observation.process_discovered_namespace_event, [listed("team-a")]) == set()


def test_a_listed_namespace_matching_a_pattern_or_a_name_is_served() -> None:
    events = [listed("team-a"), listed("exact"), listed("other"), listed("teams")]
    assert served_after(kopf_namespaces.process_namespace_event, events) == {"team-a", "exact"}


def test_a_listed_namespace_being_deleted_is_no_longer_served() -> None:
    gone = listed("team-a", deletionTimestamp="2026-11-28T00:00:00Z")
    gone["object"]["status"] = {"conditions": [{"type": "NamespaceDeletionContentFailure", "status": "False"}]}
    assert served_after(kopf_namespaces.process_namespace_event, [gone], served={"team-a"}) == set()


def test_watched_events_are_kopfs_own() -> None:
    events = [{"type": "ADDED", "object": {"metadata": {"name": "team-b"}}},
              {"type": "DELETED", "object": {"metadata": {"name": "team-c"}}}]
    expected = served_after(observation.process_discovered_namespace_event, events, served={"team-c"})
    assert served_after(kopf_namespaces.process_namespace_event, events, served={"team-c"}) == expected == {"team-b"}


def test_the_orchestrator_is_woken_only_when_the_served_set_changes() -> None:
    async def wakes(events: list[dict[str, Any]]) -> int:
        insights = references.Insights()
        insights.namespaces.add("team-a")
        woken = 0

        async def watch() -> None:
            nonlocal woken
            async with insights.revised:
                while True:
                    await insights.revised.wait()
                    woken += 1

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0)
        for event in events:
            await kopf_namespaces.process_namespace_event(raw_event=event, namespaces=PATTERNS, insights=insights)
            await asyncio.sleep(0)
        watcher.cancel()
        return woken

    assert asyncio.run(wakes([listed("team-a"), listed("other")])) == 0
    assert asyncio.run(wakes([listed("team-a"), listed("team-new")])) == 1


@pytest.fixture
def kopf_processor() -> Iterator[None]:
    original = observation.process_discovered_namespace_event
    yield
    observation.process_discovered_namespace_event = original


def test_installing_replaces_kopfs_processor_once_and_refuses_a_foreign_one(kopf_processor: None) -> None:
    kopf_namespaces.serve_listed_namespaces()
    kopf_namespaces.serve_listed_namespaces()
    assert observation.process_discovered_namespace_event is kopf_namespaces.process_namespace_event

    async def foreign(**_: Any) -> None:
        return None

    observation.process_discovered_namespace_event = foreign
    with pytest.raises(RuntimeError, match="replaced by something else"):
        kopf_namespaces.serve_listed_namespaces()
