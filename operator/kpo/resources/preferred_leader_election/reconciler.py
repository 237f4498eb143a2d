"""One reconciliation tick of a PreferredLeaderElection: observe, decide, elect, report.

The I/O shell around the pure :func:`lifecycle.decide`. It observes lazily, cheapest first — the clock, then the
PartitionReassignment named in ``after`` (one Kubernetes read), then Kafka (topic names and DescribeTopics of the
selected topics) only when a run is due — so an election that waits for its schedule costs nothing. It sends the
ElectLeaders request the decision asks for and returns the status to write and the Events to post, or ``None`` when
nothing changed. It knows nothing of Kopf.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from kpo.domain.clock import utcnow
from kpo.domain.model import ClusterView
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable, topic_names_with
from kpo.resources.outcomes import Inputs, Outcome, decide_observing, unavailable_outcome, unchanged
from kpo.resources.preferred_leader_election.lifecycle import (
    Decision,
    Intent,
    Memory,
    Need,
    Observation,
    Reassignment,
    Run,
    Selection,
    decide,
    finish,
    refused_run,
    tally,
    unavailable_run,
)
from kpo.resources.preferred_leader_election.status import status_of

log = logging.getLogger(__name__)


def observe(kafka: KafkaAdmin, selection: Selection) -> ClusterView:
    """Topic names, and the partitions of the topics the selection covers, read fresh from Kafka.

    Metadata lists only the topics the principal may describe, so a topic the spec names that metadata leaves out is
    asked for by name: Kafka then refuses with TOPIC_AUTHORIZATION_FAILED (NotAuthorized, the ACL named) where the
    election used to say the topic does not exist.
    """
    names = topic_names_with(kafka, selection.named_topics())
    partitions = kafka.describe_topics(selection.topics_to_describe(names))
    return ClusterView(brokers={}, partitions=partitions, topics=frozenset(names))


@dataclass(frozen=True)
class Ports:
    """What an election's tick may read and write: Kafka, the PartitionReassignment it waits for, and a clock for
    the election's own start and end (the tick's time is the shell's)."""

    kafka: KafkaAdmin
    read_after: Callable[[str], Reassignment]
    clock: Callable[[], dt.datetime] = utcnow


def tick(inputs: Inputs[Intent, Memory], ports: Ports) -> Outcome[Decision] | None:
    """Reconcile once; ``None`` when there is nothing to write (idle, or the same status as before)."""
    status, intent, memory, now, resource = inputs.status, inputs.intent, inputs.memory, inputs.now, inputs.resource
    kafka, read_after, clock = ports.kafka, ports.read_after, ports.clock
    after = intent.after
    try:
        decision = decide_observing(
            lambda seen: decide(intent, memory, seen), Observation(now=now),
            {Need.REASSIGNMENT: lambda seen: replace(seen, after=read_after(after) if after is not None else None),
             Need.CLUSTER: lambda seen: replace(seen, cluster=observe(kafka, intent.selection))})
    except KafkaUnavailable as exc:
        return unavailable_outcome(status, str(exc), now, exc.reason)
    if decision.idle:
        return None
    if decision.election is not None:
        decision = finish(intent, memory, decision, _elect(kafka, decision, clock, resource))
    new_status = status_of(status, intent, decision, now)
    if not decision.events and unchanged(status, new_status):
        return None
    return Outcome(status=new_status, events=list(decision.events), decision=decision)


def _elect(kafka: KafkaAdmin, decision: Decision, clock: Callable[[], dt.datetime], resource: str) -> Run:
    election = decision.election
    assert election is not None
    started = clock()
    log.info("%s: electing leaders (%s) for %s", resource, "unclean" if election.unclean else "preferred",
             "every partition" if election.partitions is None else f"{len(election.partitions)} partition(s)")
    try:
        answers = kafka.elect_leaders(election.partitions, unclean=election.unclean)
    except KafkaRequestRefused as exc:
        return refused_run(decision.selected, exc.refusal, started, clock())
    except KafkaUnavailable as exc:
        return unavailable_run(str(exc), started)
    return tally(decision.selected, election, answers, started, clock())


__all__ = ["observe", "tick"]
