"""Leadership away from brokers that must lead nothing: DemoteBrokers' brokers, and ``excludeLeaders`` followed by
``electLeadersAfter``.

A plan reorders the replica lists so that no such broker comes first where another replica could lead; a preferred
leader election then hands the leadership to the first replica. Electing only the partitions whose list the plan
changed is not enough: a list that already ends with the broker (reordered earlier, by hand or by another tool)
changes nothing, yet the broker may still lead it, since Kafka moves leadership only when asked (or when automatic
leader rebalancing is on). So every selected partition led by such a broker is elected too, and the ones a preferred
election cannot take away from it are named, with the reason:

- no other replica is in sync (``ISR``), so nobody else can lead without losing acknowledged writes;
- the preferred (first) replica is one of those brokers too, so a preferred election would keep it there.

Kafka's answer to the election is the last word: a partition it refuses (``PREFERRED_LEADER_NOT_AVAILABLE``: the
preferred replica fell out of sync meanwhile) stays where it is and is named with Kafka's reason.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from kpo.domain.model import KafkaRefusal, PartitionState, TopicPartition
from kpo.domain.plan_contract import Goal, PlanRequest
from kpo.domain.problems import Problem

#: Kafka's answer for a partition already led by its preferred replica.
ELECTION_NOT_NEEDED = "ELECTION_NOT_NEEDED"
#: The reason of a plan refused because no live broker would be left to lead (:func:`nobody_to_lead`).
NO_BROKER_TO_LEAD = "NoBrokerLeftToLead"


@dataclass(frozen=True)
class StillLeading:
    """A partition still led by a broker that should lead nothing, and why the election could not move it."""

    leader: int
    reason: str


@dataclass(frozen=True)
class LeadersAway:
    """Which partitions of a selection to elect so that ``brokers`` lead none of them, and which cannot be moved."""

    brokers: frozenset[int] = frozenset()
    #: The partitions to elect, with the broker (one of ``brokers``) leading each now.
    elect: Mapping[TopicPartition, int] = field(default_factory=dict)
    stuck: Mapping[TopicPartition, StillLeading] = field(default_factory=dict)

    def after(self, answers: Mapping[TopicPartition, KafkaRefusal | None]) -> dict[TopicPartition, StillLeading]:
        """Every partition still led by one of ``brokers`` once Kafka answered the election of :attr:`elect`: those
        that could not be moved, and those Kafka refused (an answer missing for one asked counts as refused)."""
        left = dict(self.stuck)
        for tp, leader in self.elect.items():
            answer = answers.get(tp, KafkaRefusal("NO_ANSWER", "Kafka did not answer for this partition"))
            if answer is not None and answer.code != ELECTION_NOT_NEEDED:
                left[tp] = StillLeading(leader, f"Kafka refused the preferred leader election: {answer}")
        return dict(sorted(left.items()))

    def describe(self) -> str:
        """What the election is to do, and what it cannot, in a sentence."""
        said = []
        if self.elect:
            said.append(f"broker(s) {sorted(self.brokers)} lead {len(self.elect)} selected partition(s) that another "
                        f"in-sync replica can lead: a preferred leader election moves them")
        if self.stuck:
            tp, why = next(iter(self.stuck.items()))
            more = f" and {len(self.stuck) - 1} more" if len(self.stuck) > 1 else ""
            said.append(f"{len(self.stuck)} selected partition(s) stay led by broker(s) {sorted(self.brokers)}: "
                        f"{tp} (leader {why.leader}): {why.reason}{more}")
        return "; ".join(said)


def leaders_away(partitions: Mapping[TopicPartition, PartitionState], brokers: Collection[int]) -> LeadersAway:
    """What it takes for ``brokers`` to lead none of ``partitions`` (as DescribeTopics shows them now)."""
    away = frozenset(brokers)
    elect: dict[TopicPartition, int] = {}
    stuck: dict[TopicPartition, StillLeading] = {}
    for tp, state in sorted(partitions.items()):
        if state.leader not in away:
            continue  # led elsewhere, or by nobody (offline): nothing to take away
        others = [b for b in state.isr if b not in away]
        preferred = state.replicas[0] if state.replicas else None
        if not others:
            stuck[tp] = StillLeading(state.leader, f"no other in-sync replica (replicas {list(state.replicas)}, "
                                                   f"ISR {list(state.isr)})")
        elif preferred in away:
            stuck[tp] = StillLeading(state.leader, f"its preferred replica, broker {preferred}, must lead nothing "
                                                   f"too (replicas {list(state.replicas)}): a preferred election "
                                                   f"cannot move it")
        else:
            elect[tp] = state.leader
    return LeadersAway(brokers=away, elect=elect, stuck=stuck)


def nobody_to_lead(request: PlanRequest, live: Collection[int]) -> Problem | None:
    """A plan after which no live broker could lead: every one of them demoted or in ``excludeLeaders``. The CRD
    schema cannot know the brokers, so the operator refuses it against the live cluster, before anything starts."""
    brokers = sorted(live)
    demoted = set(request.brokers) if request.goal is Goal.DEMOTE_BROKERS else set()
    excluded = set(request.exclude_leaders)
    if not brokers or not set(brokers) <= demoted | excluded:
        return None
    if set(brokers) <= demoted:
        return Problem("spec.plan.brokers", NO_BROKER_TO_LEAD,
                       f"DemoteBrokers names every live broker ({brokers}): no broker would be left to lead; demote "
                       "fewer brokers")
    if set(brokers) <= excluded:
        return Problem("spec.plan.excludeLeaders", NO_BROKER_TO_LEAD,
                       f"excludeLeaders names every live broker ({brokers}): no broker would be left to lead; "
                       "exclude fewer brokers")
    return Problem("spec.plan.excludeLeaders", NO_BROKER_TO_LEAD,
                   f"the brokers to demote ({sorted(demoted)}) and excludeLeaders ({sorted(excluded)}) cover every "
                   f"live broker ({brokers}): no broker would be left to lead; name fewer brokers")
