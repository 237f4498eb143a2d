"""The throttle record of one Kafka cluster: every resource's throttle journal, in one ConfigMap.

The ledger (:mod:`kpo.execution.ledger`) writes a resource's journal here before it changes a throttle in Kafka, and
reads the others' from here, so which broker rates and replica entries kpo holds on a cluster, and for whom, is in
one place a user can read (``kubectl get configmap kpo-throttles-<cluster> -o yaml``), outlives the resources'
namespaces, and survives a restart without waiting for statuses to be written.

It lives in the operator's namespace, one key per resource (``<namespace>_<name>``: neither part may hold ``_``, so
the key is unambiguous) whose value is the journal in the same JSON as the resource's own ConfigMap — compressed
(``zlib+base64:`` and the deflated JSON) past a few KiB: a resource's journal may reach 256 KiB, and a ConfigMap
holds 1 MiB; the replica entries compress about threefold. Each save
patches its own key only (a merge patch; ``null`` removes the key), so two writers never overwrite each other's
entries and no read is needed first. The record is never owned by a resource: when the last key goes, the empty
ConfigMap stays, ready for the next throttle.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zlib

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo.api import GROUP, PARTITION_REASSIGNMENT, VERSION
from kpo.domain.throttle import ThrottleJournal

PREFIX = "kpo-throttles-"
#: Journals longer than this (in JSON) are kept compressed.
PLAIN_UP_TO = 4096
COMPRESSED = "zlib+base64:"
LABELS = {"app.kubernetes.io/managed-by": "kpo", "app.kubernetes.io/component": "throttle-record"}


def record_name(cluster: str) -> str:
    """A ConfigMap name for ``cluster``: the name itself where it is a DNS label, else a slug and a hash of it."""
    slug = re.sub(r"[^a-z0-9-]+", "-", cluster.lower()).strip("-")[:40]
    if slug == cluster:
        return PREFIX + slug
    digest = hashlib.sha256(cluster.encode()).hexdigest()[:8]
    return f"{PREFIX}{slug}-{digest}" if slug else f"{PREFIX}{digest}"


def data_key(resource: str) -> str:
    """``namespace/name`` as a ConfigMap key."""
    return resource.replace("/", "_", 1)


def resource_key(key: str) -> str:
    return key.replace("_", "/", 1)


def encode(journal: ThrottleJournal) -> str:
    plain = json.dumps(journal.to_json(), separators=(",", ":"))
    if len(plain) <= PLAIN_UP_TO:
        return plain
    return COMPRESSED + base64.b64encode(zlib.compress(plain.encode(), 9)).decode()


def decode(value: str) -> ThrottleJournal:
    if value.startswith(COMPRESSED):
        value = zlib.decompress(base64.b64decode(value[len(COMPRESSED):])).decode()
    return ThrottleJournal.from_json(json.loads(value))


class ConfigMapThrottleRecord:
    """:class:`kpo.execution.ledger.ThrottleRecord` in the ConfigMap ``record_name(cluster)`` of ``namespace``."""

    def __init__(self, api: client.ApiClient, namespace: str, cluster: str) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.cluster = cluster
        self.name = record_name(cluster)

    def load(self) -> dict[str, ThrottleJournal]:
        try:
            found = self.core.read_namespaced_config_map(self.name, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise
        return {resource_key(k): decode(v) for k, v in (found.data or {}).items()}

    def save(self, key: str, journal: ThrottleJournal) -> None:
        value = None if journal.empty else encode(journal)
        patch = {"data": {data_key(key): value}}
        try:
            self.core.patch_namespaced_config_map(self.name, self.namespace, patch)
            return
        except ApiException as exc:
            if exc.status != 404:
                raise
        if value is None:
            return  # nothing recorded, nothing to remove
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(
            name=self.name, namespace=self.namespace, labels=LABELS,
            annotations={"kpo.dev/cluster": self.cluster,
                         "kpo.dev/description": "the throttles kpo set on this Kafka cluster, per resource; "
                                                "written before each change"}),
            data={data_key(key): value})
        try:
            self.core.create_namespaced_config_map(self.namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.core.patch_namespaced_config_map(self.name, self.namespace, patch)  # created meanwhile

    def exists(self, key: str) -> bool | None:
        namespace, _, name = key.partition("/")
        try:
            self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PARTITION_REASSIGNMENT.plural, name)
        except ApiException as exc:
            return False if exc.status == 404 else None
        return True
