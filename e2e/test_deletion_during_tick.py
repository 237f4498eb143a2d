"""A resource deleted while its tick is under way goes as soon as the tick ends, not a minute later.

Kopf lets a resource go only once its timer has stopped, and a tick running when the deletion comes keeps the timer
running; by Kopf's default it looked again only after a minute (``settings.background.cancellation_polling``), while
the resource sat with its deletionTimestamp set. In the full suite a deletion that met a short tick by chance made a
10 s check fail now and then. A tick on a cluster that has never answered waits 3 s for its first read (the call gate,
:mod:`kpo.execution.gate`), so this module makes the collision near certain: a TopicPartitionCount on a cluster whose
listener accepts connections and never answers, deleted 1.5 s after creation, in the middle of its first tick.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from e2e import concurrency_support as cs
from e2e.kube_support import Resources, wait_until
from e2e.operator_support import OperatorProcess, watched_namespace
from e2e.test_concurrency import own_operator
from kpo_testbed import Testbed

KTPC = "TopicPartitionCount"
PREFIX = f"e2e-deltick-{uuid.uuid4().hex[:6]}"
#: Well under Kopf's former minute, well over what is left of a 3 s tick.
DELETED_WITHIN = 20.0


@pytest.fixture(scope="module")
def silent_operator(kpo_crds: None, testbed: Testbed, bootstrap_servers: str,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    with cs.unusable_endpoints() as unusable, \
            own_operator(testbed, tmp_path_factory.mktemp("deletion-operator"), PREFIX,
                         {"default": bootstrap_servers, "silent": unusable["silent"]}) as operator:
        yield operator


@pytest.fixture
def silent_resources(api_client: client.ApiClient, silent_operator: OperatorProcess) -> Iterator[Resources]:
    with watched_namespace(api_client, PREFIX) as namespace:
        yield Resources(api_client, namespace)


def test_a_resource_deleted_during_a_long_tick_goes_when_the_tick_ends(
        silent_resources: Resources, silent_operator: OperatorProcess) -> None:
    silent_resources.create(KTPC, "doomed", {"clusterRef": "silent", "topic": "nowhere", "partitions": 4})
    time.sleep(1.5)  # the first tick began at once and waits 3 s for the silent cluster
    began = time.monotonic()
    silent_resources.delete(KTPC, "doomed")
    wait_until(lambda: not silent_resources.exists(KTPC, "doomed"), DELETED_WITHIN,
               "the TopicPartitionCount to be deleted (Kopf's default: a minute after the deletion)")
    print(f"deleted in {time.monotonic() - began:.1f}s")
