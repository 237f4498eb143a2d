"""Guards of a PartitionReassignment: internal topics, replication-factor decreases, KIP-860's flag, and the order in
which one tick reads Kafka, so that a move finishing mid-tick is never submitted again.

The Kafka side is a recording in-memory cluster behind the KafkaAdmin Protocol, not a client: these tests check what
a tick asks Kafka and what it makes of the answers.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from executor_support import observe as executor_observe
from executor_support import ports as executor_ports
from kafka_fake import FakeCluster
from kpo.domain.model import (
    Broker,
    ClusterView,
    KafkaRefusal,
    OngoingReassignment,
    PartitionState,
    Replicas,
    TopicPartition,
)
from kpo.domain.plan_contract import Goal, PlanRequest
from kpo.domain.proposal import Proposal
from kpo.domain.reassignment import Target
from kpo.kafka.admin import KafkaRequestRefused
from kpo.resources.outcomes import Inputs, Outcome
from kpo.resources.partition_reassignment import plan_reconciler, reconciler
from kpo.resources.partition_reassignment.lifecycle import Intent, Memory, Observation, Phase, decide
from kpo.resources.partition_reassignment.plan_lifecycle import (
    Job,
    JobStatus,
    PlanIntent,
    decide_planning,
    selected_topics,
)

NOW = datetime(2025, 1, 1, 12, tzinfo=UTC)
T = "orders"
P0, P1 = TopicPartition(T, 0), TopicPartition(T, 1)
OFFSETS = TopicPartition("__consumer_offsets", 7)
TXN = TopicPartition("__transaction_state", 0)


def view(replicas: Mapping[TopicPartition, Replicas], ongoing: Mapping[TopicPartition, OngoingReassignment]
         | None = None) -> ClusterView:
    return ClusterView(brokers={b: Broker(b) for b in (1, 2, 3, 4)},
                       partitions={tp: PartitionState(r, r[0], r) for tp, r in replicas.items()},
                       ongoing=dict(ongoing or {}), topics=frozenset(tp.topic for tp in replicas),
                       min_insync={tp.topic: 1 for tp in replicas})


def intent(targets: Mapping[TopicPartition, Replicas], generation: int = 1, **flags: bool) -> Intent:
    return Intent(generation=generation, targets={tp: Target(r) for tp, r in targets.items()}, **flags)


# ----------------------------------------------------------------------------------------------- internal topics


@pytest.mark.parametrize("tp", [OFFSETS, TXN, TopicPartition("__share_group_state", 0)])
def test_an_internal_topic_without_the_flag_is_invalid_and_nothing_is_sent(tp: TopicPartition) -> None:
    d = decide(intent({tp: (2, 3, 4)}), Memory(), Observation(view({tp: (1, 2, 3)})))
    assert d.phase is Phase.INVALID and d.reason == "InternalTopic"
    assert "allowInternalTopics" in d.message and tp.topic in d.message
    assert not d.submit and not d.save_originals and not d.cancel
    assert d.events[-1].type == "Warning" and d.events[-1].reason == "InternalTopic"
    assert {c.type: c.status for c in d.conditions}["Stalled"] is True


def test_an_internal_topic_with_the_flag_is_moved() -> None:
    d = decide(intent({OFFSETS: (2, 3, 4)}, allow_internal_topics=True), Memory(),
               Observation(view({OFFSETS: (1, 2, 3)})))
    assert d.phase is Phase.EXECUTING and d.submit == {OFFSETS: (2, 3, 4)}


def test_a_spec_change_that_adds_an_internal_topic_mid_run_is_invalid_and_sends_nothing_new() -> None:
    v = view({P0: (1, 2), OFFSETS: (1, 2, 3)}, ongoing={P0: OngoingReassignment((2, 3, 1), (3,), (1,))})
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, owned={P0: (2, 3)}, originals={P0: (1, 2)})
    d = decide(intent({P0: (2, 3), OFFSETS: (2, 3, 4)}, generation=2), memory, Observation(v))
    assert d.phase is Phase.INVALID and d.reason == "InternalTopic" and not d.submit and not d.cancel


# ------------------------------------------------------------------------------------ replication factor decrease


def test_a_shorter_replica_list_without_the_flag_is_invalid_naming_both_lists() -> None:
    d = decide(intent({P0: (1, 2)}), Memory(), Observation(view({P0: (1, 2, 3)})))
    assert d.phase is Phase.INVALID and d.reason == "ReplicationFactorDecrease"
    assert "[1, 2]" in d.message and "[1, 2, 3]" in d.message and "allowReplicationFactorDecrease" in d.message
    assert not d.submit and not d.save_originals


def test_an_internal_topic_shrunk_needs_both_flags() -> None:
    shrink = {OFFSETS: (1, 2)}
    cluster = Observation(view({OFFSETS: (1, 2, 3)}))
    assert decide(intent(shrink, allow_internal_topics=True), Memory(), cluster).reason == \
        "ReplicationFactorDecrease"
    assert decide(intent(shrink, allow_replication_factor_decrease=True), Memory(), cluster).reason == \
        "InternalTopic"
    both = decide(intent(shrink, allow_internal_topics=True, allow_replication_factor_decrease=True), Memory(),
                  cluster)
    assert both.phase is Phase.EXECUTING and both.submit == shrink


def test_a_spec_change_mid_incremental_run_is_no_decrease_while_a_step_holds_an_extra_replica() -> None:
    # Incremental (1, 2, 3) -> (2, 3, 4): the first step (1, 2, 3, 4) is done, then the spec changes to (3, 4, 1).
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, originals={P0: (1, 2, 3)})
    d = decide(intent({P0: (3, 4, 1)}, generation=2, incremental=True), memory,
               Observation(view({P0: (1, 2, 3, 4)})))
    assert d.phase is Phase.EXECUTING, d.message
    shrink = decide(intent({P0: (3, 4)}, generation=2, incremental=True), memory,
                    Observation(view({P0: (1, 2, 3, 4)})))
    assert shrink.phase is Phase.INVALID and shrink.reason == "ReplicationFactorDecrease"


def test_growing_the_replication_factor_needs_no_acknowledgement() -> None:
    d = decide(intent({P0: (1, 2, 3, 4)}), Memory(), Observation(view({P0: (1, 2, 3)})))
    assert d.phase is Phase.EXECUTING and d.submit == {P0: (1, 2, 3, 4)}


def test_reverting_to_a_smaller_original_needs_no_acknowledgement() -> None:
    # The resource grew P0 from 2 to 3 replicas; onStop Revert takes it back to the 2 it had.
    memory = Memory(phase=Phase.REVERTING, observed_generation=2, originals={P0: (1, 2)})
    d = decide(intent({P0: (1, 2, 3)}, generation=2, stop=True, revert_on_stop=True), memory,
               Observation(view({P0: (1, 2, 3)})))
    assert d.phase is Phase.REVERTING and d.submit == {P0: (1, 2)}


# ------------------------------------------------------------------------------------- KIP-860 on the wire (fake)


class Cluster(FakeCluster):
    """The fake cluster, whose moves complete when a scripted call is made: ``finish_on``."""

    def __init__(self, replicas: dict[TopicPartition, Replicas], moving: dict[TopicPartition, Replicas] | None = None,
                 finish_on: str | None = None) -> None:
        super().__init__(replicas, moving)
        self.finish_on = finish_on

    def called(self, name: str, detail: str = "") -> None:
        super().called(name, detail)
        if name == self.finish_on:
            self.finish_moves()


def ports(cluster: Cluster) -> reconciler.Ports:
    return executor_ports(cluster)


def tick(cluster: Cluster, the_intent: Intent, memory: Memory, status: dict[str, Any] | None = None
         ) -> Outcome[Any]:
    body = {"metadata": {"namespace": "ns", "name": "kpr"}, "status": status or {}}
    outcome = reconciler.tick(Inputs(body, the_intent, memory, NOW), ports(cluster))
    assert outcome is not None
    return outcome


def test_a_move_that_keeps_the_replication_factor_forbids_kafka_to_change_it() -> None:
    cluster = Cluster({P0: (1, 2, 3), P1: (1, 2, 3)})
    tick(cluster, intent({P0: (2, 3, 4), P1: (1, 2, 3, 4)}), Memory())
    assert cluster.altered == [({P0: (2, 3, 4)}, False), ({P1: (1, 2, 3, 4)}, True)]


def test_a_replication_factor_changed_behind_kpos_back_is_refused_by_kafka_and_reported() -> None:
    cluster = Cluster({P0: (1, 2, 3)})
    the_intent = intent({P0: (2, 3, 4)})
    memory = Memory()
    # Someone shrinks P0 between kpo's read and its request: Kafka (KIP-860) refuses, kpo reports it.
    original_alter = cluster.alter_reassignments

    def shrunk_first(targets: Mapping[TopicPartition, Replicas | None], *,
                     allow_replication_factor_change: bool = False) -> dict[TopicPartition, KafkaRefusal | None]:
        cluster.replicas[P0] = (1, 2)
        return original_alter(targets, allow_replication_factor_change=allow_replication_factor_change)

    cluster.alter_reassignments = shrunk_first  # type: ignore[method-assign]
    outcome = tick(cluster, the_intent, memory)
    assert outcome.status["failures"] == [{"topic": T, "partition": 0, "reason": "INVALID_REPLICATION_FACTOR",
                                           "message": "The replication factor is changed from 2 to 3"}]
    assert any(e.reason == "KafkaRefused" and "INVALID_REPLICATION_FACTOR" in e.message for e in outcome.events)
    assert outcome.status["inFlight"] == []


# ------------------------------------------------------------------------------------------------- read order


def test_one_tick_reads_what_is_moving_before_where_the_replicas_are() -> None:
    cluster = Cluster({P0: (1, 2)})
    executor_observe(cluster, {P0}, with_configs=False)  # type: ignore[arg-type]
    assert cluster.calls.index("list_reassignments") < cluster.calls.index("describe_topics")


@pytest.mark.parametrize("finish_on", ["list_reassignments", "describe_topics", "log_dirs", None],
                         ids=["finished-before-both-reads", "finished-between-the-reads", "finished-after-both",
                              "still-moving"])
def test_a_move_finishing_at_any_point_of_a_tick_is_never_submitted_again(finish_on: str | None) -> None:
    # kpo's move P0 (1, 2) -> (3, 4) completes as the named call reaches Kafka, before it answers. Between the
    # reads: ListPartitionReassignments still listed the move, DescribeTopics then shows P0 at its target.
    cluster = Cluster({P0: (1, 2)}, moving={P0: (3, 4)}, finish_on=finish_on)
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, owned={P0: (3, 4)}, originals={P0: (1, 2)})
    outcome = tick(cluster, intent({P0: (3, 4)}), memory)
    assert cluster.altered == [], f"submitted again when it finished at {finish_on}: {cluster.altered}"
    assert outcome.decision is not None
    done = finish_on in ("list_reassignments", "describe_topics")
    assert outcome.decision.phase is (Phase.SUCCEEDED if done else Phase.EXECUTING)
    moves = [{k: m[k] for k in ("topic", "partition", "replicas")} for m in outcome.status["inFlight"]]
    assert moves == ([] if done else [{"topic": T, "partition": 0, "replicas": [3, 4]}])


def test_the_decision_on_both_interleavings() -> None:
    """Read first the move list, then the replicas: a move finishing in between is seen as moving plus at target
    (harmless), or, once the stale entry is dropped, as done. The old order saw it as not moving plus on its
    mid-move replicas, which the decision took for a pending partition and submitted again; a broker whose metadata
    lags shows the same in either order, so kpo's own move seen so is now left to settle for a tick."""
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, owned={P0: (3, 4)}, originals={P0: (1, 2)})
    stale = OngoingReassignment((3, 4, 1, 2), (3, 4), (1, 2))
    moving_then_at_target = view({P0: (3, 4)}, ongoing={P0: stale})
    kept = decide(intent({P0: (3, 4)}), memory, Observation(moving_then_at_target))
    assert not kept.submit and kept.phase is Phase.EXECUTING
    dropped = decide(intent({P0: (3, 4)}), memory, Observation(replace(moving_then_at_target, ongoing={})))
    assert not dropped.submit and dropped.phase is Phase.SUCCEEDED
    old_order = decide(intent({P0: (3, 4)}), memory, Observation(view({P0: (3, 4, 1, 2)})))
    assert not old_order.submit and old_order.phase is Phase.EXECUTING, "what the old read order led to: a resend"


# ------------------------------------------------------------------------------------------------ generated plans


def plan_view() -> ClusterView:
    parts = {P0: (1, 2, 3), P1: (2, 3, 1), OFFSETS: (1, 2, 3), TXN: (3, 1, 2)}
    return ClusterView(brokers={b: Broker(b) for b in (1, 2, 3, 4)},
                       partitions={tp: PartitionState(r, r[0], r) for tp, r in parts.items()},
                       topics=frozenset({T, OFFSETS.topic, TXN.topic}))


def plan_intent(request: PlanRequest, *, approved: str | None = None, **flags: bool) -> PlanIntent:
    return PlanIntent(generation=1, request=request, automatic=False, approved_id=approved, **flags)


def test_a_plan_selects_internal_topics_only_when_allowed_and_then_by_name_or_pattern() -> None:
    topics = plan_view().topics
    everything = PlanRequest(goal=Goal.REBALANCE, topic_pattern=".*")
    assert selected_topics(everything, topics) == {T}
    assert selected_topics(everything, topics, allow_internal=True) == {T, OFFSETS.topic, TXN.topic}
    assert selected_topics(PlanRequest(goal=Goal.REBALANCE), topics, allow_internal=True) == {T}


def test_a_plan_naming_an_internal_topic_without_the_flag_is_invalid() -> None:
    request = PlanRequest(goal=Goal.REBALANCE, topics=(T, OFFSETS.topic))
    d = decide_planning(Phase.PENDING, plan_intent(request), Job(JobStatus.NONE), None, plan_view())
    assert d.phase is Phase.INVALID and d.reason == "InternalTopic" and not d.start_job
    allowed = decide_planning(Phase.PENDING, plan_intent(request, allow_internal_topics=True), Job(JobStatus.NONE),
                              None, plan_view())
    assert allowed.phase is Phase.PLANNING


def test_a_plan_lowering_the_replication_factor_needs_the_flag() -> None:
    request = PlanRequest(goal=Goal.REPLICATION_FACTOR, replication_factor=2, topics=(T,))
    d = decide_planning(Phase.PENDING, plan_intent(request), Job(JobStatus.NONE), None, plan_view())
    assert d.phase is Phase.INVALID and d.reason == "ReplicationFactorDecrease"
    assert "allowReplicationFactorDecrease" in d.message
    ok = decide_planning(Phase.PENDING, plan_intent(request, allow_replication_factor_decrease=True),
                         Job(JobStatus.NONE), None, plan_view())
    assert ok.phase is Phase.PLANNING
    up = PlanRequest(goal=Goal.REPLICATION_FACTOR, replication_factor=4, topics=(T,))
    assert decide_planning(Phase.PENDING, plan_intent(up), Job(JobStatus.NONE), None, plan_view()).phase is \
        Phase.PLANNING


SHRINKING = Proposal(id="p1", generation=1, targets={P0: (1, 2)}, basis={P0: (1, 2, 3)})
INTERNAL = Proposal(id="p2", generation=1, targets={OFFSETS: (2, 3, 4)}, basis={OFFSETS: (1, 2, 3)})


@pytest.mark.parametrize(("proposal", "reason"), [(SHRINKING, "ReplicationFactorDecrease"),
                                                  (INTERNAL, "InternalTopic")])
def test_a_proposal_the_spec_does_not_allow_is_never_proposed_nor_executed(proposal: Proposal, reason: str) -> None:
    request = PlanRequest(goal=Goal.REBALANCE)
    answered = decide_planning(Phase.PLANNING, plan_intent(request), Job(JobStatus.SUCCEEDED, proposal=proposal),
                               None, plan_view())
    assert answered.phase is Phase.INVALID and answered.reason == reason
    # Allowed when proposed, then the flag is withdrawn before approval: not executed.
    approved = decide_planning(Phase.PROPOSED, plan_intent(request, approved=proposal.id), Job(JobStatus.NONE),
                               proposal, plan_view())
    assert approved.phase is Phase.INVALID and approved.reason == reason and approved.proposal is None
    both = plan_intent(request, approved=proposal.id, allow_internal_topics=True,
                       allow_replication_factor_decrease=True)
    assert decide_planning(Phase.PROPOSED, both, Job(JobStatus.NONE), proposal, plan_view()).phase is \
        Phase.EXECUTING


# ---------------------------------------------------------------------------------------------- authorization


class HidingCluster(Cluster):
    """Metadata lists only the topics the principal may describe (Kafka's rule); asked by name, Kafka refuses."""

    def topic_names(self) -> set[str]:
        return set()

    def describe_topics(self, topics: Collection[str]) -> dict[TopicPartition, PartitionState]:
        if T in topics:
            raise KafkaRequestRefused(KafkaRefusal("TOPIC_AUTHORIZATION_FAILED", f"no Describe on {T!r}"))
        return super().describe_topics(topics)


def test_a_topic_the_principal_may_not_describe_is_a_refusal_not_a_missing_topic() -> None:
    with pytest.raises(KafkaRequestRefused) as refused:
        executor_observe(HidingCluster({P0: (1, 2)}), {P0}, with_configs=False)  # type: ignore[arg-type]
    assert refused.value.refusal.code == "TOPIC_AUTHORIZATION_FAILED"


def test_a_topic_missing_from_metadata_and_from_describe_is_missing() -> None:
    cluster = Cluster({P0: (1, 2)})
    gone = TopicPartition("gone", 0)
    view = executor_observe(cluster, {P0, gone}, with_configs=False)  # type: ignore[arg-type]
    assert gone not in view.partitions and "gone" not in view.topics and P0 in view.partitions
    assert cluster.calls.count("describe_topics") == 2  # once for the topic metadata did not list, by name


def test_a_plan_naming_a_topic_the_principal_may_not_describe_is_a_refusal() -> None:
    request = PlanRequest(goal=Goal.REBALANCE, topics=(T,))
    with pytest.raises(KafkaRequestRefused) as refused:
        plan_reconciler.snapshot(HidingCluster({P0: (1, 2)}), request)  # type: ignore[arg-type]
    assert refused.value.refusal.code == "TOPIC_AUTHORIZATION_FAILED"
    shown = plan_reconciler.snapshot(Cluster({P0: (1, 2)}), request)  # type: ignore[arg-type]
    assert P0 in shown.view.partitions
