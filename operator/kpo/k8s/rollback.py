"""The rollback ConfigMap: a PartitionReassignment's original replicas, in kafka-reassign-partitions' JSON.

It is written before kpo sends the first move of a partition and never overwritten for that partition afterwards,
so it always holds the placement from before kpo touched anything. It is owned by the CR (garbage-collected with it)
and usable as it is: ``kafka-reassign-partitions.sh --execute --reassignment-json-file rollback.json``, or pasted into
a new PartitionReassignment's ``spec.partitions``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo.domain.cordon import CordonJournal
from kpo.domain.model import Replicas, TopicPartition
from kpo.domain.reassignment import parse_reassignment_document, rollback_json
from kpo.domain.throttle import ThrottleJournal

DATA_KEY = "rollback.json"
THROTTLE_KEY = "throttles.json"
CORDON_KEY = "cordons.json"


def rollback_name(cr_name: str) -> str:
    return f"{cr_name}-rollback"[:253]


def owner_reference(body: Mapping[str, Any]) -> client.V1OwnerReference:
    meta = body["metadata"]
    return client.V1OwnerReference(api_version=body["apiVersion"], kind=body["kind"], name=meta["name"],
                                   uid=meta["uid"], controller=True, block_owner_deletion=True)


class RollbackStore:
    """One resource's records, read at most once per store: a tick makes one store, so its reads of the originals,
    the throttle journal and the cordon journal cost one GET between them (they were three per tick, which with
    hundreds of resources was most of kpo's API traffic). The store's own writes keep what it read up to date."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self.core = core
        self._read: dict[tuple[str, str], dict[str, str] | None] = {}

    def _data(self, namespace: str, cr_name: str) -> dict[str, str] | None:
        """The ConfigMap's data, or None when there is no ConfigMap."""
        key = (namespace, rollback_name(cr_name))
        if key not in self._read:
            try:
                cm = self.core.read_namespaced_config_map(key[1], namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                self._read[key] = None
            else:
                self._read[key] = dict(cm.data or {})
        found = self._read[key]
        return None if found is None else dict(found)

    def _wrote(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        key = (namespace, name)
        if key in self._read:
            self._read[key] = {**(self._read[key] or {}), **data}

    def load(self, namespace: str, cr_name: str) -> dict[TopicPartition, Replicas]:
        raw = (self._data(namespace, cr_name) or {}).get(DATA_KEY)
        return parse_reassignment_document(json.loads(raw)) if raw else {}

    def load_throttle(self, namespace: str, cr_name: str) -> ThrottleJournal:
        return self.load_throttle_record(namespace, cr_name) or ThrottleJournal()

    def load_throttle_record(self, namespace: str, cr_name: str) -> ThrottleJournal | None:
        """The throttle journal, or None when the ConfigMap is gone (a namespace being deleted removes it before
        the resource's finalizer has let go)."""
        data = self._data(namespace, cr_name)
        if data is None:
            return None
        raw = data.get(THROTTLE_KEY)
        return ThrottleJournal.from_json(json.loads(raw)) if raw else ThrottleJournal()

    def save_throttle(self, body: Mapping[str, Any], journal: ThrottleJournal, *, create: bool = True) -> str:
        """Write the throttle journal; done *before* the configs it names are applied, so none can leak.

        ``create=False`` (a deleted resource's clean-up, which only ever shrinks the journal) leaves a missing
        ConfigMap missing: in a namespace being deleted the API server refuses to create one (403), and the entries
        still to take back are in the resource's ``status.throttle``."""
        return self._save(body, {THROTTLE_KEY: json.dumps(journal.to_json())}, create=create)

    def load_cordon_record(self, namespace: str, cr_name: str) -> CordonJournal | None:
        """The KIP-1066 cordon journal, or None when the ConfigMap is gone (as for the throttle journal)."""
        data = self._data(namespace, cr_name)
        if data is None:
            return None
        raw = data.get(CORDON_KEY)
        return CordonJournal.from_json(json.loads(raw)) if raw else CordonJournal()

    def save_cordon(self, body: Mapping[str, Any], journal: CordonJournal, *, create: bool = True) -> str:
        """Write the cordon journal, *before* the cordons it names are set (``create`` as for ``save_throttle``)."""
        return self._save(body, {CORDON_KEY: json.dumps(journal.to_json())}, create=create)

    def _save(self, body: Mapping[str, Any], data: dict[str, str], *, create: bool) -> str:
        meta = body["metadata"]
        namespace, name = meta["namespace"], rollback_name(meta["name"])
        try:
            self.core.patch_namespaced_config_map(name, namespace, {"data": data})
        except ApiException as exc:
            if exc.status != 404:
                raise
            if not create:
                return name
            self.core.create_namespaced_config_map(namespace, self._new(body, data))
            self._read[(namespace, name)] = dict(data)
            return name
        self._wrote(namespace, name, data)
        return name

    def _new(self, body: Mapping[str, Any], data: dict[str, str]) -> client.V1ConfigMap:
        meta = body["metadata"]
        return client.V1ConfigMap(metadata=client.V1ObjectMeta(
            name=rollback_name(meta["name"]), namespace=meta["namespace"], owner_references=[owner_reference(body)],
            labels={"app.kubernetes.io/managed-by": "kpo", "kpo.dev/partitionreassignment": meta["name"]}),
            data=data)

    def add(self, body: Mapping[str, Any], originals: Mapping[TopicPartition, Replicas]) -> str:
        """Record ``originals`` for partitions not recorded yet; existing entries are never replaced."""
        meta = body["metadata"]
        namespace, name = meta["namespace"], rollback_name(meta["name"])
        existing = self.load(namespace, meta["name"])
        merged = {**originals, **existing}
        data = {DATA_KEY: rollback_json(merged)}
        if not existing:
            try:
                self.core.create_namespaced_config_map(namespace, self._new(body, data))
                self._read[(namespace, name)] = dict(data)
                return name
            except ApiException as exc:
                if exc.status != 409:
                    raise
                self._read.pop((namespace, name), None)
                merged = {**originals, **self.load(namespace, meta["name"])}
                data = {DATA_KEY: rollback_json(merged)}
        if merged != existing:
            self.core.patch_namespaced_config_map(name, namespace, {"data": data})
            self._wrote(namespace, name, data)
        return name
