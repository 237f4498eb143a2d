"""The rollback ConfigMap store reads a resource's records once per tick (kpo.k8s.rollback), on a recording fake of
the Kubernetes client: with hundreds of resources, three reads of one ConfigMap per tick were most of kpo's API
traffic."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo.domain.model import TopicPartition
from kpo.domain.throttle import ThrottleJournal
from kpo.k8s.rollback import RollbackStore

BODY = {"apiVersion": "kpo.dev/v1alpha1", "kind": "PartitionReassignment",
        "metadata": {"namespace": "ns", "name": "move", "uid": "u-1"}}


class Core:
    def __init__(self) -> None:
        self.maps: dict[tuple[str, str], dict[str, str]] = {}
        self.reads = 0

    def read_namespaced_config_map(self, name: str, namespace: str) -> client.V1ConfigMap:
        self.reads += 1
        if (namespace, name) not in self.maps:
            raise ApiException(status=404)
        return client.V1ConfigMap(data=dict(self.maps[(namespace, name)]))

    def create_namespaced_config_map(self, namespace: str, body: client.V1ConfigMap) -> None:
        if (namespace, body.metadata.name) in self.maps:
            raise ApiException(status=409)
        self.maps[(namespace, body.metadata.name)] = dict(body.data)

    def patch_namespaced_config_map(self, name: str, namespace: str, patch: dict[str, Any]) -> None:
        if (namespace, name) not in self.maps:
            raise ApiException(status=404)
        self.maps[(namespace, name)].update(patch["data"])


def test_one_store_reads_the_configmap_once_and_sees_its_own_writes() -> None:
    core = Core()
    store = RollbackStore(core)  # type: ignore[arg-type]
    assert store.load("ns", "move") == {}
    store.add(BODY, {TopicPartition("t", 0): (1, 2)})
    journal = ThrottleJournal(rate=1000, brokers=frozenset({1, 2}))
    store.save_throttle(BODY, journal)
    assert store.load("ns", "move") == {TopicPartition("t", 0): (1, 2)}
    assert store.load_throttle("ns", "move") == journal
    assert store.load_cordon_record("ns", "move") is not None
    assert core.reads == 1
    # A new store (the next tick) reads what was written.
    fresh = RollbackStore(core)  # type: ignore[arg-type]
    assert fresh.load_throttle("ns", "move") == journal
    assert fresh.load("ns", "move") == {TopicPartition("t", 0): (1, 2)}
    assert core.reads == 2
