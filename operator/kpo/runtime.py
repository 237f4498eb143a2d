"""What the operator holds while it runs: its configuration, API clients and one Kafka adapter per cluster.

Handlers get the :class:`OperatorContext` from Kopf's memo; nothing here decides anything. Kafka adapters are created
lazily, with credentials read from the Secrets the configuration names, and dropped when a cluster's connection
fails so the next tick reconnects (and re-reads rotated credentials).

A login Kafka refuses is different: retrying it on every tick of every resource made the brokers log hundreds of
failed logins a minute. The refused adapter stays in place as the cluster's open circuit — it answers every call with
the refusal, without a connection — until the cluster's backoff step has passed; then one new adapter (the Secret read
again, so a fixed password is picked up) makes one attempt for all the cluster's resources. The backoff doubles per
refusal up to the connection's ``loginBackoff.maxSeconds`` and starts again after a login Kafka accepts.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kubernetes import client

from kpo.config import KafkaConnection, OperatorConfig, SecretKeyRef
from kpo.domain.access import Backoff
from kpo.domain.clock import rfc3339, utcnow
from kpo.domain.model import TopicPartition
from kpo.domain.scheduling import Limits, SchedulerConfig
from kpo.execution import gate as call_gate
from kpo.execution.counting import counted
from kpo.execution.executor import ClusterExecutor
from kpo.execution.observation import FIRST_WAIT_SECONDS, Look, SharedLooks
from kpo.execution.refill import RefillLoop
from kpo.k8s.outage import ApiOutage
from kpo.k8s.proposals import ProposalStore
from kpo.k8s.rollback import RollbackStore
from kpo.k8s.secrets import read_secret_key
from kpo.k8s.status import patch_status
from kpo.k8s.throttle_record import ConfigMapThrottleRecord
from kpo.kafka.admin import KafkaAdmin
from kpo.kafka.client import ConnectionSettings, KafkaAdminAdapter
from kpo.planning.backends import PlanningJobs


def connection_settings(core: client.CoreV1Api | None, connection: KafkaConnection, namespace: str
                        ) -> ConnectionSettings:
    def value(ref: SecretKeyRef | None) -> str | None:
        if ref is None:
            return None
        if core is None:
            raise RuntimeError("a Kafka connection names a Secret, but there is no Kubernetes client")
        return read_secret_key(core, ref, namespace)

    sasl, tls = connection.sasl, connection.tls
    return ConnectionSettings(
        bootstrap_servers=connection.bootstrap_servers,
        security_protocol=connection.security_protocol.value,
        sasl_mechanism=sasl.mechanism.value if sasl else None,
        sasl_username=(sasl.username or value(sasl.username_secret)) if sasl else None,
        sasl_password=value(sasl.password_secret) if sasl else None,
        ca_pem=value(tls.ca_secret) if tls else None,
        cert_pem=value(tls.cert_secret) if tls else None,
        key_pem=value(tls.key_secret) if tls else None,
        verify_hostname=tls.verify_hostname if tls else True,
        timeout_seconds=connection.request_timeout_seconds,
    )


def _next_attempt(backoff: Backoff) -> str:
    wait = backoff.failed(time.monotonic())
    at = rfc3339(utcnow() + timedelta(seconds=round(wait)))
    return f"; next attempt at {at} (login attempt {backoff.failures}, backing off {wait:g}s)"


#: A Kafka client younger than this is not dropped for a lost connection: it is as fresh as a new one would be.
RECONNECT_AFTER_SECONDS = 5.0

#: Approved proposals whose partitions the operator keeps in memory (a few MB at the largest plans).
PROPOSALS_REMEMBERED = 64


@dataclass
class OperatorContext:
    config: OperatorConfig
    api: client.ApiClient
    _admins: dict[str, KafkaAdminAdapter] = field(default_factory=dict)
    _login_backoffs: dict[str, Backoff] = field(default_factory=dict)
    #: The ticks' direct calls per cluster, cut short while it does not answer (:mod:`kpo.execution.gate`).
    _gates: dict[str, call_gate.CallGate] = field(default_factory=dict)
    _admins_made: dict[str, float] = field(default_factory=dict)
    _forgetting: set[str] = field(default_factory=set)
    _executors: dict[str, ClusterExecutor] = field(default_factory=dict)
    _refills: list[RefillLoop] = field(default_factory=list)
    #: Told of every Kafka request kpo makes (cluster, request) and every look at a cluster (cluster): the metrics.
    on_kafka_request: Callable[[str, str], None] = lambda _cluster, _request: None
    on_look: Callable[[str], None] = lambda _cluster: None
    #: Told how many moves the executor's refill loop started between polls (cluster, count): the metrics.
    on_refilled: Callable[[str, int], None] = lambda _cluster, _count: None
    #: Whether this replica may act on Kafka (leader election); always, without it.
    may_act: Callable[[], bool] = lambda: True
    _planning_jobs: PlanningJobs | None = None
    _refill_slots: threading.BoundedSemaphore | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # One lock per resource, so a timer tick and a change or deletion handler never act on one CR at once.
    _resource_locks: dict[str, threading.Lock] = field(default_factory=dict)
    # The last status this operator wrote per resource (uid): (resourceVersion, status), see :meth:`current`.
    _written: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    # Whether the Kubernetes API answers, shared by every resource's tick (one warning per outage, not one a tick).
    api_outage: ApiOutage = field(default_factory=ApiOutage)
    # Partitions of approved proposals, by (namespace, name, proposal id): a proposal never changes under its id.
    _proposal_partitions: OrderedDict[tuple[str, str, str], frozenset[TopicPartition]] = field(
        default_factory=OrderedDict)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def rollbacks(self) -> RollbackStore:
        return RollbackStore(self.core)

    @property
    def proposals(self) -> ProposalStore:
        return ProposalStore(self.core)

    @property
    def planning_jobs(self) -> PlanningJobs:
        with self._lock:
            if self._planning_jobs is None:
                self._planning_jobs = PlanningJobs(self.config.planner, self.api)
            return self._planning_jobs

    def proposal_partitions(self, namespace: str, name: str, proposal_id: str) -> frozenset[TopicPartition]:
        """The partitions of a resource's stored proposal ``proposal_id`` (empty if the ConfigMap holds another one
        or none), read once per id: the claims index asks on every change of every PartitionReassignment."""
        key = (namespace, name, proposal_id)
        with self._lock:
            if key in self._proposal_partitions:
                self._proposal_partitions.move_to_end(key)
                return self._proposal_partitions[key]
        stored = self.proposals.load(namespace, name)
        if stored is None or stored[0].id != proposal_id:
            return frozenset()
        partitions = frozenset(stored[0].targets)
        with self._lock:
            self._proposal_partitions[key] = partitions
            while len(self._proposal_partitions) > PROPOSALS_REMEMBERED:
                self._proposal_partitions.popitem(last=False)
        return partitions

    def cluster_name(self, cluster_ref: str | None) -> str:
        return cluster_ref or self.config.default_cluster

    def kafka(self, cluster_ref: str | None, *, gated: bool = True) -> KafkaAdmin:
        """The cluster's client, each request counted. ``gated``: through the cluster's call gate
        (:mod:`kpo.execution.gate`) -- the ticks' and the background samplers' calls; the shared look and the
        executor, which keep their own backoff and are reached only after a look answered, call the client directly."""
        name = self.cluster_name(cluster_ref)
        with self._lock:
            admin = self._admins.get(name)
            connection = self.config.connection(name)
            backoff = self._login_backoffs.get(name)
            if backoff is None:
                backoff = self._login_backoffs[name] = Backoff(initial=connection.login_backoff.initial_seconds,
                                                               maximum=connection.login_backoff.max_seconds)
            if admin is not None and admin.login_refused and not backoff.waiting(time.monotonic()):
                admin.close()
                admin = None
            if admin is None:
                settings = connection_settings(self.core, connection, self.config.namespace)
                admin = KafkaAdminAdapter(settings, on_login_refused=lambda: _next_attempt(backoff),
                                          on_login=backoff.succeeded)
                self._admins[name] = admin
                self._admins_made[name] = time.monotonic()
            counting = counted(admin, lambda request: self.on_kafka_request(name, request))
            if not gated:
                return counting
            gate = self._gates.get(name)
            if gate is None:
                timeout = connection.request_timeout_seconds
                gate = self._gates[name] = call_gate.CallGate(slow_seconds=timeout / 2, wait_seconds=6 * timeout,
                                                              first_wait_seconds=FIRST_WAIT_SECONDS)
            return call_gate.gated(counting, gate)

    def executor(self, cluster: str) -> ClusterExecutor:
        """The one executor of a Kafka cluster (:mod:`kpo.execution`), shared by all its PartitionReassignments."""
        with self._lock:
            found = self._executors.get(cluster)
            if found is not None:
                return found
            defaults = self.config.execution
            for_crs = Limits(max_moves=None, max_moves_per_broker=defaults.max_moves_per_broker,
                             max_moves_per_broker_direction=defaults.max_moves_per_broker_direction)
            poll = self.config.poll_interval_seconds
            timeout = self.config.connection(cluster).request_timeout_seconds

            def seen(look: Look) -> None:
                self.on_look(cluster)
                executor.write_rates.observe({tp: look.partition_size(tp) for tp in
                                              (tp for states in look.states.values() for tp in states)})

            bootstrap = self.config.connection(cluster).bootstrap_servers
            looks = SharedLooks(lambda: self.kafka(cluster, gated=False), interest_seconds=max(60.0, 10 * poll),
                                wait_seconds=2 * timeout + 5, on_look=seen,
                                named=f"cluster {cluster!r} (bootstrap {bootstrap})")
            executor = ClusterExecutor(cluster, lambda: self.kafka(cluster, gated=False),
                                       SchedulerConfig(defaults=for_crs, max_moves=defaults.max_moves),
                                       looks=looks, stale_after_seconds=max(30.0, 10 * poll),
                                       may_act=self._may_act,
                                       throttle_record=ConfigMapThrottleRecord(self.api, self.config.namespace,
                                                                               cluster))
            self._executors[cluster] = executor
            if self.config.refill.first_probe_seconds > 0:
                refill = RefillLoop(executor, interval=self.config.refill.first_probe_seconds,
                                    on_started=lambda count: self.on_refilled(cluster, count))
                refill.start()
                self._refills.append(refill)
            return executor

    def forget_kafka(self, cluster_ref: str | None) -> None:
        """Drop a cluster's client after a lost connection, so the next call connects afresh (and re-reads its
        Secrets). In the background: the client's own lock may be held by a call waiting out its timeout on a dead
        cluster (a balance sample takes 30 s to give up), and the tick that asks holds its resource's lock."""
        name = self.cluster_name(cluster_ref)
        with self._lock:
            admin = self._admins.get(name)
            made = self._admins_made.get(name, 0.0)
            if admin is None or name in self._forgetting:
                return
            if time.monotonic() - made < RECONNECT_AFTER_SECONDS:
                # Every tick that met the cluster's failed look says it lost Kafka; a connection made since is as
                # fresh as another would be, and dropping it each time made a new client (and read its Secrets) per
                # tick.
                return
            self._forgetting.add(name)
        threading.Thread(target=self._forget, args=(name, admin), name=f"kpo-forget-{name}", daemon=True).start()

    def _forget(self, name: str, admin: KafkaAdminAdapter) -> None:
        try:
            if admin.refused_login_meanwhile():
                return  # a refused login stays as the open circuit until its backoff step has passed
            with self._lock:
                if self._admins.get(name) is not admin:
                    return
                del self._admins[name]
            admin.close()
        finally:
            with self._lock:
                self._forgetting.discard(name)

    def refill_slots(self) -> threading.BoundedSemaphore:
        """Ticks that may watch their moves between polls at the same time (each holds a worker thread meanwhile)."""
        with self._lock:
            if self._refill_slots is None:
                self._refill_slots = threading.BoundedSemaphore(self.config.refill.max_watching_ticks)
            return self._refill_slots

    def _may_act(self) -> bool:
        # Read when acting, not when the executor is made: leader election sets it once the operator has started.
        return self.may_act()

    def write_status(self, plural: str, body: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
        """Merge-patch a resource's status (see :mod:`kpo.k8s.status`); False if the resource is gone. Raises
        :class:`~kpo.k8s.status.StaleStatus` when the object changed since ``body``."""
        written = patch_status(self.api, plural, body, status)
        if written is None:
            return False
        meta = body["metadata"]
        merged = {k: v for k, v in {**(body.get("status") or {}), **status}.items() if v is not None}
        with self._lock:
            self._written[str(meta.get("uid"))] = (written, merged)
        return True

    def current(self, uid: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """``body``, or — when this operator has written the resource's status since that copy of it — the same
        object with the status it wrote and the resourceVersion that write returned.

        Kopf hands a timer the object as its watch last delivered it, and with hundreds of resources the watch runs
        behind the operator's own status writes: ticks decided on statuses a minute old and said "Succeeded" twice.
        A resourceVersion is etcd's revision, so the larger one is the newer copy."""
        with self._lock:
            written = self._written.get(uid)
        if written is None:
            return body
        version, status = written
        meta = body.get("metadata") or {}
        try:
            newer = int(version) > int(meta.get("resourceVersion") or 0)
        except ValueError:
            return body
        if not newer:
            return body
        return {**body, "metadata": {**meta, "resourceVersion": version}, "status": status}

    def forget_written(self, uid: str) -> None:
        with self._lock:
            self._written.pop(uid, None)

    def resource_lock(self, uid: str) -> threading.Lock:
        with self._lock:
            return self._resource_locks.setdefault(uid, threading.Lock())

    def close(self) -> None:
        """Stop the refill loops (waiting for a send under way), then close the clients. At shutdown this comes
        before the Lease is released: a refill thread outliving Kopf could send one more move after the standby took
        over."""
        with self._lock:
            refills, self._refills = self._refills, []
        for refill in refills:
            refill.stop()
        for refill in refills:
            refill.join(timeout=30.0)
        with self._lock:
            admins = list(self._admins.values())
            self._admins.clear()
        for admin in admins:
            admin.close()
