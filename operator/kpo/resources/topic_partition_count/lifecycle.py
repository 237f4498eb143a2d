"""The life cycle of a TopicPartitionCount, written down as a small state machine.

Growing a topic is one CreatePartitions request, but deciding whether to send it is most of the work: Kafka cannot
remove partitions, a new count changes which partition every key hashes to (KIP-253), and the new replicas should go
where the cluster has room. kpo reconciles on every tick by calling :func:`decide` with what the spec asks for
(:class:`Intent`), what the status remembers (:class:`Memory`) and what Kafka reports (:class:`Observation`). It is
pure; when it needs more than the topic and the live brokers — the replica counts of every broker for a balanced
placement, a sample of the topic's keys — it says so (:attr:`Decision.needs`) and the reconciler observes that and
asks again, so a tick that only waits for new partitions to get leaders reads no more than the topic.

::

    ┌─────────┐  CreatePartitions accepted   ┌─────────┐  every new partition has a leader  ┌───────────┐
    │ Pending ├─────────────────────────────►│ Growing ├───────────────────────────────────►│ Succeeded │
    └┬──┬──┬──┘                              └────┬────┘                                    └───────────┘
     │  │  │ already at the count: no request     │ the topic was deleted meanwhile              ▲
     │  │  └──────────────────────────────────────┼──────────────────────────────────────────────┘
     │  │ Kafka refused CreatePartitions          ▼
     │  └──────────────────────────────────────► Failed
     │ missing topic, a decrease, the key-ordering guard, explicit assignments that do not fit
     └─────────────────────────────────────────► Invalid

Phases, and what each transitions to:

- **Pending** — checks the spec against the topic. Transitions to *Invalid* (nothing is sent to Kafka: the topic does
  not exist, after :data:`TOPIC_GRACE` of waiting for it (see below); ``spec.partitions`` is below the current count —
  Kafka cannot remove partitions; it adds more than Kafka's controller accepts in one request
  (``MAX_NEW_PARTITIONS``); the key-ordering guard refuses a count that is not a multiple of the current one;
  explicit assignments of the wrong number or length, or naming brokers that are not live), *Succeeded* (the topic
  already has the count: no request), *Growing* (CreatePartitions accepted) or *Failed* (Kafka refused it). It stays
  *Pending*, Stalled, while fewer brokers are live than the replication factor needs for a balanced placement, and
  when Kafka cannot be reached; Progressing while it waits for a missing topic.
- **Growing** — CreatePartitions was accepted; waits until the topic has the requested count and every partition a
  leader. Transitions to *Succeeded*, to *Failed* if the topic disappears meanwhile, and — when the spec changed
  while growing — on to whatever *Pending* decides for the new spec once the first growth has landed.
- **Succeeded**, **Failed**, **Invalid** — terminal for this generation of the spec; a spec change sends the resource
  back to *Pending*.

A topic that is not there yet is waited for, :data:`TOPIC_GRACE` from the first tick that missed it
(``status.topicMissingSince``), before the spec is declared Invalid: GitOps tools apply a topic (or a Strimzi
KafkaTopic) and its TopicPartitionCount together, and even a topic created just before is not yet in the metadata of
every broker. Invalid is once per generation, so declaring it at the first miss would stick.

The key-remap report (``status.keyRemap``) is written whenever the change is an increase, including when the guard
refuses it, so the topic's owner sees what the change would do before overriding the guard. ``movedFraction`` is the
exact fraction of the key space whose partition changes (:mod:`kpo.domain.keyremap`), ``sources`` lists, for each new
partition that receives keys from an old partition other than itself, every old partition feeding it (at most
:data:`SOURCES_CAP` partitions, each with at most :data:`SOURCES_CAP` feeders: with gcd(N, M) = 1 every new partition
is fed by every old one, which would not fit in a status). With ``keyOrdering.sampleMessages`` > 0, kpo also reads
that many real keyed records (the newest of each partition), recomputes each key's partition under both counts with
Kafka's murmur2 partitioner, and reports the fraction that moves; records without a key are not sampled, since the
default partitioner does not hash them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fractions import Fraction
from itertools import islice

from kpo.api.topic_partition_count import MAX_NEW_PARTITIONS, PartitionCountPhase
from kpo.domain import access
from kpo.domain import conditions as cond
from kpo.domain.conditions import ConditionUpdate, Event, check_transition, transition_event
from kpo.domain.keyremap import RemapReport, remap_report
from kpo.domain.model import Broker, KafkaRefusal, PartitionState, Replicas
from kpo.domain.placement import place_new_partitions
from kpo.domain.problems import Problem, summarize
from kpo.domain.topic_wait import TOPIC_GRACE, UNKNOWN_TOPIC, WAITING_FOR_TOPIC, waiting_since

#: Caps on status.keyRemap.sources (see the module text).
SOURCES_CAP = 64

Phase = PartitionCountPhase


TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.INVALID})

TRANSITIONS: Mapping[Phase, frozenset[Phase]] = {
    Phase.PENDING: frozenset({Phase.PENDING, Phase.INVALID, Phase.SUCCEEDED, Phase.GROWING, Phase.FAILED}),
    Phase.GROWING: frozenset({Phase.GROWING, Phase.SUCCEEDED, Phase.FAILED, Phase.INVALID, Phase.PENDING}),
    Phase.SUCCEEDED: frozenset({Phase.SUCCEEDED, Phase.PENDING}),
    Phase.FAILED: frozenset({Phase.FAILED, Phase.PENDING}),
    Phase.INVALID: frozenset({Phase.INVALID, Phase.PENDING}),
}

PARTITION_DECREASE = "PartitionDecrease"
KEY_ORDERING_GUARD = "KeyOrderingGuard"
KAFKA_REFUSED = "KafkaRefused"
TOO_MANY_NEW_PARTITIONS = "TooManyNewPartitions"
NOT_ENOUGH_BROKERS = "NotEnoughBrokers"


class Need(StrEnum):
    """What a decision needs observed before it can be made."""

    BROKER_LOAD = "brokerLoad"
    KEY_SAMPLE = "keySample"


@dataclass(frozen=True)
class Placement:
    balanced: bool = True
    rack_aware: bool = True
    # Explicit: one replica list per new partition.
    assignments: tuple[Replicas, ...] | None = None


@dataclass(frozen=True)
class Intent:
    """What the spec asks for, already parsed."""

    generation: int
    topic: str
    partitions: int
    placement: Placement = Placement()
    require_multiple: bool = True
    sample_messages: int = 0


@dataclass(frozen=True)
class Memory:
    """What kpo remembers in the status."""

    phase: Phase = Phase.PENDING
    observed_generation: int = 0
    # The Ready condition's reason: what the last decision was about.
    reason: str = ""
    # The count a CreatePartitions request asked for (status.keyRemap.toPartitions while Growing).
    requested: int | None = None
    # When this generation first found the topic missing (status.topicMissingSince).
    topic_missing_since: dt.datetime | None = None


@dataclass(frozen=True)
class BrokerLoad:
    """Replicas and preferred leaderships each broker carries now, over every topic of the cluster."""

    replicas: Mapping[int, int] = field(default_factory=dict)
    leaders: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class KeySample:
    """Sampled keyed records, counted by whether their partition changes from the current to the new count:
    ``(False,)`` stays, ``(True,)`` moves (two entries at most, however many records were read)."""

    counts: Mapping[tuple[bool, ...], int] = field(default_factory=dict)

    @property
    def messages(self) -> int:
        return sum(self.counts.values())

    @property
    def moved(self) -> int:
        return sum(n for changed, n in self.counts.items() if any(changed))

    @property
    def moved_fraction(self) -> Fraction | None:
        return Fraction(self.moved, self.messages) if self.messages else None


@dataclass(frozen=True)
class Observation:
    brokers: Mapping[int, Broker]
    # The topic's partitions by index, or None when the topic does not exist.
    topic: Mapping[int, PartitionState] | None
    load: BrokerLoad | None = None
    sample: KeySample | None = None


@dataclass(frozen=True)
class Growth:
    """One CreatePartitions request."""

    topic: str
    total: int
    # One replica list per new partition; None lets the controller place them.
    assignment: tuple[Replicas, ...] | None


@dataclass(frozen=True)
class Decision:
    phase: Phase
    reason: str
    message: str
    current: int | None = None
    grow: Growth | None = None
    report: RemapReport | None = None
    sample: KeySample | None = None
    problems: tuple[Problem, ...] = ()
    events: tuple[Event, ...] = ()
    needs: frozenset[Need] = frozenset()
    idle: bool = False
    # Set while waiting for a missing topic: when it was first missed.
    topic_missing_since: dt.datetime | None = None

    @property
    def conditions(self) -> list[ConditionUpdate]:
        stalled = self.phase in (Phase.FAILED, Phase.INVALID) or self.reason == NOT_ENOUGH_BROKERS
        return cond.kstatus(ready=self.phase is Phase.SUCCEEDED,
                            progressing=not stalled and self.phase in (Phase.PENDING, Phase.GROWING),
                            stalled=stalled, reason=self.reason, message=self.message)


def decide(intent: Intent, memory: Memory, observed: Observation, now: dt.datetime) -> Decision:
    fresh = intent.generation != memory.observed_generation
    phase = memory.phase
    if phase in TERMINAL:
        if not fresh:
            return Decision(phase, phase.value, "", idle=True)
        phase = Phase.PENDING
    missing_since = None if fresh else memory.topic_missing_since
    decision = (_growing(intent, memory, observed, fresh=fresh, missing_since=missing_since, now=now)
                if phase is Phase.GROWING
                else _pending(intent, observed, missing_since, now))
    if decision.needs:
        return decision
    return _checked(phase, memory, decision)


def refused(memory: Memory, growing: Decision, refusal: KafkaRefusal) -> Decision:
    """Kafka refused the CreatePartitions request ``growing`` carried: Failed, with Kafka's reason."""
    assert growing.grow is not None
    message = (f"Kafka refused CreatePartitions for {growing.grow.topic!r} ({growing.current} -> "
               f"{growing.grow.total} partitions): {refusal}")
    decision = replace(growing, phase=Phase.FAILED, reason=access.refusal_reason([refusal]), message=message,
                       events=())
    return _checked(Phase.GROWING, memory, decision)


def sample_refused(intent: Intent, memory: Memory, refusal: KafkaRefusal) -> Decision:
    """Kafka refused reading the topic for the key sample: Failed, with what to change. Nothing was sent."""
    message = (f"Kafka refused reading {intent.topic!r} for the key sample (spec.keyOrdering.sampleMessages): "
               f"{refusal}; grant kpo READ on the topic, or set sampleMessages to 0; nothing was sent to Kafka")
    return _checked(Phase.PENDING, memory, Decision(Phase.FAILED, KAFKA_REFUSED, message))


def report_sources(report: RemapReport) -> list[tuple[int, tuple[int, ...]]]:
    """Each new partition that receives keys from another old partition, with its feeders (capped)."""
    # O(SOURCES_CAP**2) whatever the counts: the report computes feeders lazily, and only the first few are asked for.
    return [(p, tuple(report.feeders(p)[:SOURCES_CAP])) for p in islice(report.receiving(), SOURCES_CAP)]


# --------------------------------------------------------------------------------------------------------- phases


def _pending(intent: Intent, observed: Observation, missing_since: dt.datetime | None, now: dt.datetime
             ) -> Decision:
    topic = observed.topic
    if topic is None:
        missing = Problem("spec.topic", UNKNOWN_TOPIC, f"topic {intent.topic!r} does not exist")
        since = waiting_since([missing], missing_since, now)
        if since is not None:
            return Decision(Phase.PENDING, WAITING_FOR_TOPIC,
                            f"spec.topic: topic {intent.topic!r} does not exist yet; kpo waits up to "
                            f"{int(TOPIC_GRACE.total_seconds())} s for it to appear before declaring the spec "
                            "invalid", topic_missing_since=since)
        return Decision(Phase.INVALID, UNKNOWN_TOPIC,
                        f"spec.topic: topic {intent.topic!r} does not exist; TopicPartitionCount grows existing "
                        "topics only: create it first (with the partitions you want), or fix the name",
                        problems=(missing,))
    current, wanted = len(topic), intent.partitions
    if wanted < current:
        return Decision(Phase.INVALID, PARTITION_DECREASE,
                        f"spec.partitions: Kafka cannot remove partitions: {intent.topic!r} has {current}, the spec "
                        f"asks for {wanted}; set spec.partitions to {current} or more (to shrink a topic, create a "
                        "new one and migrate its data)", current=current,
                        problems=(Problem("spec.partitions", PARTITION_DECREASE,
                                          f"{wanted} is fewer than the {current} partitions the topic has"),))
    if wanted == current:
        return Decision(Phase.SUCCEEDED, "Succeeded", f"{intent.topic!r} already has {current} partitions; "
                        "nothing was sent to Kafka", current=current, report=remap_report(current, current))
    report = remap_report(current, wanted)
    if wanted - current > MAX_NEW_PARTITIONS:
        # Checked before sampling and placement, which both work per new partition: a count Kafka cannot add in
        # one request costs nothing but this message (and the report, which is O(1)).
        return Decision(Phase.INVALID, TOO_MANY_NEW_PARTITIONS,
                        f"spec.partitions: {current} -> {wanted} adds {wanted - current} partitions, but Kafka's "
                        f"controller adds at most {MAX_NEW_PARTITIONS} per CreatePartitions request; set "
                        f"spec.partitions to at most {current + MAX_NEW_PARTITIONS} and grow again from there; "
                        "nothing was sent to Kafka", current=current, report=report,
                        problems=(Problem("spec.partitions", TOO_MANY_NEW_PARTITIONS,
                                          f"{wanted - current} new partitions exceed {MAX_NEW_PARTITIONS}"),))
    if intent.sample_messages > 0 and observed.sample is None:
        return Decision(Phase.PENDING, "Sampling", "", needs=frozenset({Need.KEY_SAMPLE}))
    problems = _guard(intent, report) + _explicit_problems(intent, observed, current)
    if problems:
        return Decision(Phase.INVALID, problems[0].reason,
                        summarize(problems) + "; nothing was sent to Kafka", current=current,
                        report=report, sample=observed.sample, problems=tuple(problems))
    assignment = intent.placement.assignments
    if intent.placement.balanced:
        if observed.load is None:
            return Decision(Phase.PENDING, "Placing", "", needs=frozenset({Need.BROKER_LOAD}))
        brokers = [b if intent.placement.rack_aware else Broker(b.id, None, b.host, b.port)
                   for b in observed.brokers.values()]
        factor = len(topic[min(topic)].replicas)
        try:
            placed = place_new_partitions(brokers, observed.load.replicas, observed.load.leaders, factor,
                                          wanted - current)
        except ValueError as exc:
            return Decision(Phase.PENDING, NOT_ENOUGH_BROKERS, f"cannot place the new partitions yet: {exc}; kpo "
                            "tries again when more brokers are live", current=current, report=report,
                            sample=observed.sample)
        assignment = tuple(placed)
    return Decision(Phase.GROWING, "Growing", f"growing {intent.topic!r} from {current} to {wanted} partitions "
                    f"({_fraction_text(report.remapped_fraction)} of the key space changes partition)",
                    current=current, grow=Growth(intent.topic, wanted, assignment), report=report,
                    sample=observed.sample)


def _growing(intent: Intent, memory: Memory, observed: Observation, *, fresh: bool,
             missing_since: dt.datetime | None, now: dt.datetime) -> Decision:
    topic = observed.topic
    requested = memory.requested or intent.partitions
    if topic is None:
        return Decision(Phase.FAILED, UNKNOWN_TOPIC, f"topic {intent.topic!r} was deleted while it was growing")
    current = len(topic)
    if current < requested:
        return Decision(Phase.GROWING, "Growing", f"CreatePartitions accepted: {current} of {requested} "
                        "partitions visible so far", current=current)
    leaderless = sorted(p for p, state in topic.items() if state.leader < 0)
    if leaderless:
        return Decision(Phase.GROWING, "Growing", f"{len(leaderless)} partition(s) have no leader yet: "
                        f"{leaderless[:10]}", current=current)
    if fresh:
        return _pending(intent, observed, missing_since, now)
    return Decision(Phase.SUCCEEDED, "Succeeded", f"{intent.topic!r} has {current} partitions, every one with a "
                    "leader", current=current)


def _guard(intent: Intent, report: RemapReport) -> list[Problem]:
    if not intent.require_multiple or report.new_partitions % report.old_partitions == 0:
        return []
    n, m = report.old_partitions, report.new_partitions
    lower, upper = (m // n) * n, (m // n + 1) * n
    choices = f"{upper}" if lower == n else f"{lower} or {upper}"
    return [Problem("spec.partitions", KEY_ORDERING_GUARD,
                    f"the key-ordering guard refuses {n} -> {m}: {m} is not a multiple of {n}, so "
                    f"{_fraction_text(report.remapped_fraction)} of the key space changes partition and new "
                    "partitions take keys from several old ones (see status.keyRemap); choose a multiple of "
                    f"{n} ({choices}), or set spec.keyOrdering.policy: Allow")]


def _explicit_problems(intent: Intent, observed: Observation, current: int) -> list[Problem]:
    assignments = intent.placement.assignments
    if intent.placement.balanced or assignments is None:
        return []
    problems: list[Problem] = []
    new = intent.partitions - current
    if len(assignments) != new:
        problems.append(Problem("spec.placement.assignments", "AssignmentCountMismatch",
                                f"{len(assignments)} replica list(s) for {new} new partition(s) "
                                f"({current} -> {intent.partitions}): give exactly one per new partition"))
    topic = observed.topic or {}
    factor = len(topic[min(topic)].replicas) if topic else 0
    for index, replicas in enumerate(assignments):
        where = f"spec.placement.assignments[{index}]"
        if len(replicas) != factor:
            problems.append(Problem(where, "ReplicationFactorMismatch",
                                    f"{len(replicas)} replica(s), but the topic's replication factor is {factor}"))
        unknown = [b for b in replicas if b not in observed.brokers]
        if unknown:
            problems.append(Problem(where, "UnknownBroker", f"broker(s) {unknown} are not live brokers "
                                    f"(live: {sorted(observed.brokers)})"))
    return problems


# -------------------------------------------------------------------------------------------------------- helpers


def _checked(effective: Phase, memory: Memory, decision: Decision) -> Decision:
    """Check the transition is on the diagram; post an Event when the phase or its reason changed."""
    check_transition(TRANSITIONS, effective, decision.phase)
    if (decision.phase, decision.reason) == (memory.phase, memory.reason) and effective is memory.phase:
        return decision
    warning = decision.phase in (Phase.FAILED, Phase.INVALID) or decision.reason == NOT_ENOUGH_BROKERS
    event = transition_event(memory.phase, decision.phase, decision.reason, decision.message, warning=warning)
    return replace(decision, events=(*decision.events, event))


def _fraction_text(fraction: Fraction) -> str:
    return f"{fraction.numerator}/{fraction.denominator}" if fraction else "none"
