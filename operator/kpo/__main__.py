"""``python -m kpo``: run the operator.

Reads the configuration (``KPO_CONFIG`` or ``KPO_BOOTSTRAP_SERVERS``), logs in to Kubernetes the usual way (in-cluster
service account, else ``KUBECONFIG``), registers every kind's handlers and hands control to Kopf. Kopf keeps its own
bookkeeping in annotations, so the CRD status schemas stay exactly what the API documents; its diff base is a digest
(:mod:`kpo.persistence`), so a spec of any admitted size fits the API server's 256 KiB limit on annotations.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import logging
import os
import socket
import sys
import uuid
from typing import Any

import kopf
from kubernetes import client, config

from kpo import leadership, metrics
from kpo.background.balance_sampler import ClusterBalanceSampler
from kpo.background.broker_changes import BrokerChangeWatcher
from kpo.config import LeaderElectionConfig, OperatorConfig
from kpo.k8s.auto_proposals import AutoProposals
from kpo.k8s.lease import LeaseStore
from kpo.k8s.outage import RepeatedRequestErrors
from kpo.kopf_namespaces import serve_listed_namespaces
from kpo.persistence import BoundedAnnotationsProgressStorage, DigestDiffBaseStorage
from kpo.resources.partition_reassignment import handlers as partition_reassignment
from kpo.resources.preferred_leader_election import handlers as preferred_leader_election
from kpo.resources.topic_partition_count import handlers as topic_partition_count
from kpo.runtime import OperatorContext


class _CountedApiClient(client.ApiClient):
    """The kubernetes client, each request counted by verb (``kpo_kubernetes_requests_total``)."""

    def call_api(self, method: str, *args: Any, **kwargs: Any) -> Any:
        metrics.kubernetes_request(str(method).upper())
        return super().call_api(method, *args, **kwargs)


def kubernetes_client() -> client.ApiClient:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return _CountedApiClient()


API_RETRY_BACKOFFS = (1, 1, 2, 3, 5, 8, 13, 21, *([30] * 18))

#: How long a deletion waits in memory for a running tick to end before Kopf polls for it (each poll a patch).
INSTANT_EXIT_SECONDS = 5.0


def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.progress_storage = BoundedAnnotationsProgressStorage(prefix="kpo.dev")
    settings.persistence.diffbase_storage = DigestDiffBaseStorage(prefix="kpo.dev")
    settings.persistence.finalizer = "kpo.dev/finalizer"
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 60
    # Ticks are short now that a cluster is read once for all of them (kpo.execution), but a tick of a resource on a
    # cluster that does not answer still waits for the one look that fails: enough workers that a few broken
    # clusters never hold up the healthy ones.
    settings.execution.max_workers = 16
    # Kopf retries a failed API request on these steps, then gives up; a status patch that gives up ends that
    # resource's timer for good. ~10 minutes of retries ride out an API server restart or upgrade.
    settings.networking.error_backoffs = API_RETRY_BACKOFFS
    # A resource being deleted is let go only once its timer has stopped, and a tick under way when the deletion came
    # keeps it running: Kopf then looked again only after its default minute (``cancellation_polling``), so a
    # deletion that met a tick -- one watching its moves between polls lasts most of a poll interval -- took a minute.
    # Wait for the tick itself instead (it ends at its next probe, seeing the deletion), and look every second after.
    settings.background.instant_exit_timeout = INSTANT_EXIT_SECONDS
    settings.background.cancellation_polling = 1.0


def lead(election: LeaderElectionConfig, namespace: str, liveness: str) -> None:
    """With leader election on, block until this replica holds the Lease (:mod:`kpo.leadership`)."""
    if not election.enabled:
        return
    # The pod's name (the chart passes it through the downward API) and a suffix: a restarted container is a new
    # candidate, never mistaken for the old holder.
    identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    store = LeaseStore(kubernetes_client(), namespace, election.lease_name)
    leadership.lead(leadership.Leadership(store, identity, election.timing()), liveness)


#: glibc's mallopt parameter M_ARENA_MAX.
_M_ARENA_MAX = -8


def fewer_malloc_arenas(arenas: int = 2) -> None:
    """Let glibc keep ``arenas`` malloc arenas instead of up to eight per core.

    Every thread that allocates while another holds an arena gets one of its own, and Kopf's worker threads, the
    clusters' look and refill threads and librdkafka's all allocate: with hundreds of resources the operator's memory
    grew with the arenas' fragmentation rather than with the work. Set before any thread starts; a no-op where the C
    library is not glibc."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, arenas)


def main(argv: list[str] | None = None) -> int:
    fewer_malloc_arenas()
    parser = argparse.ArgumentParser(prog="python -m kpo", description="kpo, the Kafka Partition Operator")
    parser.add_argument("--namespace", action="append", default=[],
                        help="watch only this namespace (repeatable); default: all namespaces")
    parser.add_argument("--liveness", default="http://0.0.0.0:8081/healthz", help="Kopf liveness endpoint")
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="Prometheus metrics port (default: metricsPort of the configuration; 0: off)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        # One line per outage (then one per doubling window), not one per failed attempt of each watch stream.
        handler.addFilter(RepeatedRequestErrors())
    if not args.verbose:
        # The kubernetes client's urllib3 retries: the ticks' ApiOutage says once what failed.
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
        # kafka-python logs every connection (and every failed reconnect to a dead node as an ERROR), Kopf every timer
        # run: with a tick every few seconds that drowns the operator's own lines, and kpo says what a lost node means
        # (BrokerUnavailable, KafkaUnavailable) once. --verbose brings them back.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    operator_config = OperatorConfig.load()
    metrics_port = operator_config.metrics_port if args.metrics_port is None else args.metrics_port
    if metrics_port:
        # A resource whose ticks stop leaves the move and throttle gauges after a few missed ticks; kpo_resources
        # counts it (at rest too) until it is deleted.
        metrics.serve(metrics_port, clusters=operator_config.clusters,
                      stale_after=max(120.0, 10 * operator_config.poll_interval_seconds))
    # A standby waits here (answering the probes); nothing below acts before this replica holds the Lease.
    lead(operator_config.leader_election, operator_config.namespace, args.liveness)
    # Each cluster's executor asks before every write to Kafka: a replica whose Lease renewal failed sends nothing
    # more, even in the moment before its process exits.
    context = OperatorContext(config=operator_config, api=kubernetes_client(), may_act=leadership.holding,
                              on_kafka_request=metrics.kafka_request, on_look=metrics.executor_pass,
                              on_refilled=lambda cluster, count: metrics.refilled(
                                  partition_reassignment.KIND.resource, cluster, count))
    balance = operator_config.balance_score
    sampler = None
    if metrics_port and balance.interval_seconds > 0 and operator_config.clusters:
        # The kpo_cluster_* balance gauges: a background thread, through the same Kafka adapters as the ticks.
        sampler = ClusterBalanceSampler(operator_config.clusters, balance.interval_seconds, kafka=context.kafka,
                                        forget=context.forget_kafka, sink=metrics.BALANCES,
                                        topics_per_request=balance.topics_per_request)
        sampler.start()
    auto_propose = operator_config.auto_propose
    watcher = None
    if auto_propose.clusters:
        # New brokers get an AddBrokers proposal; off unless the configuration names clusters.
        watcher = BrokerChangeWatcher(auto_propose.clusters, auto_propose.interval_seconds, kafka=context.kafka,
                                      forget=context.forget_kafka, proposals=AutoProposals(context.api),
                                      topics_per_request=auto_propose.topics_per_request)
        watcher.start()
    # A namespace matching a --namespace pattern made while Kopf (re)lists namespaces is served too.
    serve_listed_namespaces()
    registry = kopf.OperatorRegistry()
    kopf.on.startup(id="kpo_settings", registry=registry)(configure)
    # The same credentials the kubernetes client found (service account in a pod, else KUBECONFIG).
    kopf.on.login(id="kpo_login", registry=registry)(kopf.login_via_client)
    # Ticks on a fixed grid only with refill between polls, which hands a watching tick over to the next one.
    partition_reassignment.register(registry, operator_config.poll_interval_seconds,
                                    sharp=operator_config.refill.first_probe_seconds > 0)
    preferred_leader_election.register(registry, operator_config.poll_interval_seconds)
    topic_partition_count.register(registry, operator_config.poll_interval_seconds)
    try:
        asyncio.run(kopf.operator(
            registry=registry,
            standalone=True,
            clusterwide=not args.namespace,
            namespaces=list(args.namespace),
            memo=kopf.Memo(context=context),
            liveness_endpoint=args.liveness or None,
        ))
    finally:
        if sampler is not None:
            sampler.stop()
        if watcher is not None:
            watcher.stop()
        context.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
