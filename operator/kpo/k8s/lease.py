"""The leader-election Lease (``coordination.k8s.io/v1``), read and written through the kubernetes client.

Every write is a ``replace`` carrying the ``resourceVersion`` that was read (or a ``create``): the API server refuses
it with 409 Conflict when someone wrote in between, and that candidate simply lost this round. The rules for when to
write are :mod:`kpo.domain.lease`'s; the loop is :mod:`kpo.leadership`.

Why not ``kubernetes.leaderelection``: its loop runs the leader's work in a thread it starts and offers no way to
ask "do I still hold it?", to bound one request's time, or to release the Lease on shutdown, which is how a standby
takes over at once when the leader's pod is deleted. The Lease I/O itself is this small.
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo.domain.lease import LeaseRecord

# The duration a released Lease is left with (client-go's release does the same): a standby takes an unheld Lease
# at once anyway.
RELEASED_DURATION_SECONDS = 1


def _micro(at: datetime) -> datetime:
    # A MicroTime must go on the wire with its fraction (RFC3339Micro), and the client drops a zero one.
    return at if at.microsecond else at.replace(microsecond=1)


def _now() -> datetime:
    return _micro(datetime.now(UTC))


def _record(lease: client.V1Lease) -> LeaseRecord:
    spec = lease.spec or client.V1LeaseSpec()
    meta = lease.metadata or client.V1ObjectMeta()
    return LeaseRecord(holder=spec.holder_identity or "", duration_seconds=float(spec.lease_duration_seconds or 0),
                       transitions=int(spec.lease_transitions or 0), version=str(meta.resource_version))


class LeaseStore:
    """One Lease, by name, in one namespace. A write replaces the Lease as last read (calls are not concurrent:
    :class:`kpo.leadership.Leadership` makes them one at a time)."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str) -> None:
        self.coordination = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self._read: client.V1Lease | None = None

    def read(self, timeout: float) -> LeaseRecord | None:
        """The Lease's record, None when there is no Lease."""
        self._read = None
        try:
            lease = self.coordination.read_namespaced_lease(self.name, self.namespace, _request_timeout=timeout)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        self._read = lease
        return _record(lease)

    def create(self, holder: str, duration_seconds: int, timeout: float) -> bool:
        """Create the Lease held by ``holder``; False when another candidate created it first."""
        now = _now()
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=client.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=duration_seconds,
                                    acquire_time=now, renew_time=now, lease_transitions=0))
        try:
            self.coordination.create_namespaced_lease(self.namespace, body, _request_timeout=timeout)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def write(self, holder: str, duration_seconds: int, timeout: float) -> bool:
        """Replace the Lease as last read with ``holder`` renewing (or taking) it; an empty holder releases it. False
        when it changed since it was read."""
        lease = self._read
        if lease is None:
            raise ValueError("write replaces the Lease as read: read it first")
        record = _record(lease)
        spec = lease.spec or client.V1LeaseSpec()
        now = _now()
        if holder and holder != record.holder:  # a new leader
            spec.acquire_time = now
            spec.lease_transitions = record.transitions + 1
        if spec.acquire_time is not None:
            spec.acquire_time = _micro(spec.acquire_time)
        if spec.renew_time is not None:
            spec.renew_time = _micro(spec.renew_time)
        if holder:
            spec.renew_time = now
        spec.holder_identity = holder or None
        spec.lease_duration_seconds = duration_seconds
        lease.spec = spec
        try:
            self._read = self.coordination.replace_namespaced_lease(self.name, self.namespace, lease,
                                                                    _request_timeout=timeout)
        except ApiException as exc:
            self._read = None
            if exc.status == 409:
                return False
            raise
        return True
