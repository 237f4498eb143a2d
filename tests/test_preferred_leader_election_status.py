"""What a PreferredLeaderElection tick writes: a status the API model (and so the CRD) accepts, lazy observation
(an idle tick asks Kafka nothing), and no write when nothing changed.

The Kafka side is a recording in-memory table of partitions, not a client: the reconciler only sees the KafkaAdmin
Protocol, and these tests check what it asks and what it makes of the answers.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kpo.api import ELECTED_PARTITIONS_CAP, PreferredLeaderElectionStatus
from kpo.domain.model import KafkaRefusal, PartitionState, TopicPartition
from kpo.kafka.admin import KafkaRequestRefused
from kpo.resources.outcomes import Inputs, Outcome, invalid_outcome
from kpo.resources.preferred_leader_election import reconciler
from kpo.resources.preferred_leader_election.lifecycle import Intent, Reassignment, Selection, SelectionKind
from kpo.resources.preferred_leader_election.spec import intent_of, parse_spec
from kpo.resources.preferred_leader_election.status import memory_of

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


class Cluster:
    """Partitions with a leader each; ElectLeaders moves leadership to the first replica when it is in sync."""

    def __init__(self, partitions: dict[TopicPartition, PartitionState], refuse: KafkaRefusal | None = None) -> None:
        self.partitions = partitions
        self.refuse = refuse
        self.calls: list[str] = []

    def topic_names(self) -> set[str]:
        self.calls.append("topic_names")
        return {tp.topic for tp in self.partitions}

    def describe_topics(self, topics: Collection[str]) -> dict[TopicPartition, PartitionState]:
        self.calls.append("describe_topics")
        return {tp: s for tp, s in self.partitions.items() if tp.topic in topics}

    def elect_leaders(self, partitions: Sequence[TopicPartition] | None, unclean: bool = False
                      ) -> dict[TopicPartition, KafkaRefusal | None]:
        self.calls.append("elect_leaders")
        if self.refuse is not None:
            raise KafkaRequestRefused(self.refuse)
        answers: dict[TopicPartition, KafkaRefusal | None] = {}
        for tp in partitions if partitions is not None else list(self.partitions):
            state = self.partitions[tp]
            if state.leader == state.replicas[0]:
                if partitions is not None:
                    answers[tp] = KafkaRefusal("ELECTION_NOT_NEEDED")
            elif state.replicas[0] in state.isr:
                self.partitions[tp] = PartitionState(state.replicas, state.replicas[0], state.isr)
                answers[tp] = None
            else:
                answers[tp] = KafkaRefusal("PREFERRED_LEADER_NOT_AVAILABLE", "not in sync")
        return answers


def displaced(topic: str, count: int, off: Collection[int] = (), out_of_sync: Collection[int] = ()
              ) -> dict[TopicPartition, PartitionState]:
    """Partitions with rotating replicas; those in ``off`` led by their second replica."""
    out = {}
    for p in range(count):
        replicas = (1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3)
        isr = replicas[1:] if p in out_of_sync else replicas
        out[TopicPartition(topic, p)] = PartitionState(replicas, replicas[1] if p in off else replicas[0], isr)
    return out


def not_called(name: str) -> Reassignment:
    raise AssertionError(f"read the PartitionReassignment {name} although spec.after is not set")


def tick(cluster: Cluster, spec: dict[str, Any], status: dict[str, Any] | None = None, *, generation: int = 1,
         now: datetime = NOW, after: Reassignment | None = None) -> Outcome[Any] | None:
    intent: Intent = intent_of(parse_spec(spec), generation)
    status = status or {}
    body = {"metadata": {"namespace": "ns", "name": "elect"}, "status": status}
    return reconciler.tick(Inputs(body, intent, memory_of(status), now),
                           reconciler.Ports(kafka=cluster,  # type: ignore[arg-type]
                                            read_after=(lambda _name: after) if after is not None else not_called,
                                            clock=lambda: now))


def valid(status: dict[str, Any]) -> PreferredLeaderElectionStatus:
    return PreferredLeaderElectionStatus.model_validate({k: v for k, v in status.items() if v is not None})


def test_a_one_off_run_writes_a_status_the_api_accepts() -> None:
    cluster = Cluster(displaced("orders", 6, off={0, 3}, out_of_sync={4}) | displaced("other", 2, off={0}))
    outcome = tick(cluster, {"topics": ["orders"]})
    assert outcome is not None
    status = valid(outcome.status)
    assert status.phase is not None and status.phase.value == "Succeeded"
    assert status.runs == 1 and status.next_run_at is None
    assert status.last_run is not None
    assert (status.last_run.elected, status.last_run.already_preferred, status.last_run.failed) == (2, 4, 0)
    assert status.last_run.elected_partitions == ["orders-0", "orders-3"]
    assert cluster.partitions[TopicPartition("other", 0)].leader == 2, "outside the selection: untouched"
    ready = status.condition("Ready")
    assert ready is not None and ready.status.value == "True" and ready.reason == "Elected"


def test_the_all_partitions_run_counts_already_preferred_from_describe() -> None:
    cluster = Cluster(displaced("a", 3, off={1}) | displaced("b", 3, off={0}, out_of_sync={0}))
    outcome = tick(cluster, {})
    assert outcome is not None
    run = valid(outcome.status).last_run
    assert run is not None
    assert (run.elected, run.already_preferred, run.failed) == (1, 4, 1)
    assert [(f.topic, f.partition, f.reason) for f in run.failures] == [("b", 0, "PREFERRED_LEADER_NOT_AVAILABLE")]


def test_a_refused_request_is_failed_with_kafkas_reason() -> None:
    cluster = Cluster(displaced("orders", 2, off={0}), refuse=KafkaRefusal("CLUSTER_AUTHORIZATION_FAILED", "no"))
    outcome = tick(cluster, {"topics": ["orders"]})
    assert outcome is not None
    status = valid(outcome.status)
    assert status.phase is not None and status.phase.value == "Failed"
    stalled = status.condition("Stalled")
    assert stalled is not None and stalled.status.value == "True" and "CLUSTER_AUTHORIZATION_FAILED" in stalled.message
    assert [e.reason for e in outcome.events] == ["NotAuthorized"], "a missing ACL is named as such"
    assert stalled.reason == "NotAuthorized"


def test_a_refused_request_that_is_not_about_acls_is_kafka_refused() -> None:
    cluster = Cluster(displaced("orders", 2, off={0}), refuse=KafkaRefusal("INVALID_REQUEST", "no"))
    outcome = tick(cluster, {"topics": ["orders"]})
    assert outcome is not None
    stalled = valid(outcome.status).condition("Stalled")
    assert stalled is not None and stalled.status.value == "True" and stalled.reason == "KafkaRefused"
    assert [e.reason for e in outcome.events] == ["KafkaRefused"]


class HidingCluster(Cluster):
    """Metadata lists only the topics the principal may describe (Kafka's rule); asked by name, Kafka refuses those
    in ``hidden`` with TOPIC_AUTHORIZATION_FAILED and leaves out those that do not exist."""

    def __init__(self, partitions: dict[TopicPartition, PartitionState], hidden: Collection[str]) -> None:
        super().__init__(partitions)
        self.hidden = set(hidden)

    def topic_names(self) -> set[str]:
        return super().topic_names() - self.hidden

    def describe_topics(self, topics: Collection[str]) -> dict[TopicPartition, PartitionState]:
        refused = sorted(self.hidden & set(topics))
        if refused:
            self.calls.append("describe_topics")
            raise KafkaRequestRefused(KafkaRefusal("TOPIC_AUTHORIZATION_FAILED", f"no Describe on {refused[0]!r}"))
        return super().describe_topics(topics)


@pytest.mark.parametrize("spec", [{"topics": ["orders"]}, {"partitions": [{"topic": "orders", "partition": 0}]}],
                         ids=["topics", "partitions"])
def test_a_named_topic_the_principal_may_not_describe_is_a_refusal_not_an_unknown_topic(spec: dict[str, Any]
                                                                                       ) -> None:
    cluster = HidingCluster(displaced("orders", 2, off={0}), hidden={"orders"})
    with pytest.raises(KafkaRequestRefused) as refused:  # the shell makes it Failed / NotAuthorized, ACL named
        tick(cluster, spec)
    assert refused.value.refusal.code == "TOPIC_AUTHORIZATION_FAILED"
    assert "elect_leaders" not in cluster.calls, "nothing is elected"


def test_a_named_topic_missing_from_metadata_and_from_describe_is_waited_for_then_unknown() -> None:
    cluster = HidingCluster(displaced("orders", 2, off={0}), hidden=())
    waiting = tick(cluster, {"topics": ["orders", "gone"]})
    assert waiting is not None and waiting.status["phase"] == "Pending"
    assert waiting.status["topicMissingSince"] == "2025-01-01T12:00:00Z"
    assert [e.reason for e in waiting.events] == ["WaitingForTopic"]
    assert cluster.calls == ["topic_names", "describe_topics", "describe_topics"], "'gone' asked for by name once"
    outcome = tick(cluster, {"topics": ["orders", "gone"]}, waiting.status, now=NOW + timedelta(seconds=30))
    assert outcome is not None and outcome.status["phase"] == "Invalid"
    assert outcome.status["topicMissingSince"] is None, "removed (merge patch)"
    ready = valid(outcome.status).condition("Ready")
    assert ready is not None and ready.reason == "UnknownTopic" and "'gone' does not exist" in ready.message
    assert "elect_leaders" not in cluster.calls


def test_a_pattern_asks_kafka_for_no_topic_by_name() -> None:
    cluster = Cluster(displaced("orders", 2, off={0}))
    outcome = tick(cluster, {"topicPattern": "ord.*"})
    assert outcome is not None and outcome.status["phase"] == "Succeeded"
    assert cluster.calls == ["topic_names", "describe_topics", "elect_leaders"]


def test_partition_lists_are_capped_and_counters_complete() -> None:
    cluster = Cluster(displaced("big", 3 * ELECTED_PARTITIONS_CAP, off=set(range(0, 3 * ELECTED_PARTITIONS_CAP))))
    outcome = tick(cluster, {"topics": ["big"]})
    assert outcome is not None
    run = valid(outcome.status).last_run
    assert run is not None and run.elected == 3 * ELECTED_PARTITIONS_CAP
    assert len(run.elected_partitions) == ELECTED_PARTITIONS_CAP


def test_a_finished_election_is_idle_and_asks_kafka_nothing() -> None:
    cluster = Cluster(displaced("orders", 2, off={0}))
    first = tick(cluster, {"topics": ["orders"]})
    assert first is not None
    cluster.calls.clear()
    assert tick(cluster, {"topics": ["orders"]}, first.status) is None
    assert cluster.calls == []


def test_a_schedule_waits_for_next_run_at_then_runs_again() -> None:
    spec = {"topics": ["orders"], "schedule": {"interval": "30s"}}
    cluster = Cluster(displaced("orders", 3, off={1}))
    first = tick(cluster, spec)
    assert first is not None
    status = valid(first.status)
    assert status.phase is not None and status.phase.value == "Scheduled" and status.runs == 1
    assert status.next_run_at == NOW + timedelta(seconds=30)
    cluster.calls.clear()
    assert tick(cluster, spec, first.status, now=NOW + timedelta(seconds=29)) is None
    assert cluster.calls == [], "waiting for the schedule costs no Kafka request"
    second = tick(cluster, spec, first.status, now=NOW + timedelta(seconds=30))
    assert second is not None
    status = valid(second.status)
    assert status.runs == 2 and status.last_run is not None and status.last_run.already_preferred == 3
    assert status.next_run_at == NOW + timedelta(seconds=60)
    assert [e.reason for e in second.events] == ["Elected"]


def test_waiting_writes_once_then_stays_quiet_and_never_asks_kafka() -> None:
    spec = {"topics": ["orders"], "after": "move"}
    cluster = Cluster(displaced("orders", 2, off={0}))
    moving = Reassignment("move", True, "Executing")
    first = tick(cluster, spec, after=moving)
    assert first is not None and first.status["phase"] == "Waiting"
    assert tick(cluster, spec, first.status, after=moving, now=NOW + timedelta(seconds=5)) is None
    assert cluster.calls == []
    done = tick(cluster, spec, first.status, after=Reassignment("move", True, "Succeeded"))
    assert done is not None and done.status["phase"] == "Succeeded"
    assert cluster.partitions[TopicPartition("orders", 0)].leader == 1


def test_an_invalid_pattern_is_reported_by_the_handler_path() -> None:
    outcome = invalid_outcome({}, 3, [], NOW)
    assert outcome is not None and outcome.status["phase"] == "Invalid"
    assert invalid_outcome(outcome.status, 3, [], NOW) is None, "written once per generation"


def test_selection_of_each_kind_is_parsed() -> None:
    def kind(spec: dict[str, Any]) -> SelectionKind:
        return intent_of(parse_spec(spec), 1).selection.kind

    assert kind({}) is SelectionKind.ALL
    assert kind({"topics": ["a"]}) is SelectionKind.TOPICS
    assert kind({"topicPattern": "a.*"}) is SelectionKind.PATTERN
    assert kind({"partitions": [{"topic": "a", "partition": 0}]}) is SelectionKind.PARTITIONS
    unclean = intent_of(parse_spec({"electionType": "Unclean", "topics": ["a"]}), 1)
    assert unclean.unclean and unclean.selection == Selection(SelectionKind.TOPICS, topics=("a",))
