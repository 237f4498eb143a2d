"""PreferredLeaderElection as the tick shell sees it (:class:`~kpo.resources.shell.Kind`).

A timer reconciles every ``pollIntervalSeconds``: it notices a new or changed spec, a schedule whose time has come and
a PartitionReassignment (named in ``after``) that has finished, none of which Kafka or Kubernetes would announce as an
event on this resource. A finished election has no timer at all until its spec changes; a tick waiting for its
schedule reads nothing but the clock. Nothing in Kafka belongs to an election once it has run, so the kind has
nothing to release and no finalizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from kpo.api import (
    GROUP,
    PARTITION_REASSIGNMENT,
    PREFERRED_LEADER_ELECTION,
    VERSION,
    PartitionReassignmentStatus,
    PreferredLeaderElectionSpec,
)
from kpo.resources import shell
from kpo.resources.outcomes import Inputs, Outcome, RetryLater
from kpo.resources.preferred_leader_election import reconciler
from kpo.resources.preferred_leader_election.lifecycle import RECHECKED, TERMINAL, Phase, Reassignment
from kpo.resources.preferred_leader_election.spec import intent_of, parse_spec
from kpo.resources.preferred_leader_election.status import memory_of


def read_reassignment(api: client.ApiClient, namespace: str, name: str) -> Reassignment:
    """The PartitionReassignment an election waits for, as the Kubernetes API reports it now."""
    try:
        found: Any = client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PARTITION_REASSIGNMENT.plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return Reassignment(name=name, found=False)
        raise RetryLater(f"cannot read PartitionReassignment {name!r}: {exc.reason}", delay=5) from exc
    generation = (found.get("metadata") or {}).get("generation")
    try:  # its status through its kind's own model, as every status is read
        status = PartitionReassignmentStatus.model_validate(found.get("status") or {})
    except ValidationError:
        return Reassignment(name=name, found=True, phase=None, current=False)  # not one kpo wrote: not done yet
    return Reassignment(name=name, found=True, phase=str(status.phase) if status.phase else None,
                        current=status.observed_generation == generation)


def preferredleaderelection_at_rest(generation: int, status: Mapping[str, Any]) -> bool:
    """Terminal for its current spec: the timer stops (a spec change starts it again). An election Invalid only
    because the PartitionReassignment it names does not exist yet, or because its selection matches no partition
    yet, keeps polling: neither that resource's creation nor a topic's is an event here."""
    memory = memory_of(status)
    rechecked = memory.phase is Phase.INVALID and memory.reason in RECHECKED
    return memory.phase in TERMINAL and not rechecked and memory.observed_generation == generation


def preferredleaderelection_reconcile(tick: shell.Tick[PreferredLeaderElectionSpec]) -> Outcome[Any] | None:
    return reconciler.tick(
        Inputs(tick.body, intent_of(tick.spec, tick.generation), memory_of(tick.status), tick.now),
        reconciler.Ports(kafka=tick.kafka,
                         read_after=lambda name: read_reassignment(tick.context.api, tick.namespace, name)))


KIND = shell.Kind(resource=PREFERRED_LEADER_ELECTION, parse=parse_spec,
                  at_rest=preferredleaderelection_at_rest, reconcile=preferredleaderelection_reconcile)


def register(registry: kopf.OperatorRegistry, poll_interval_seconds: float) -> None:
    shell.register(KIND, registry, poll_interval_seconds)
