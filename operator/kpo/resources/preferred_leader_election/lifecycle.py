"""The life cycle of a PreferredLeaderElection, written down as a small state machine.

A PreferredLeaderElection is kafka-leader-election.sh as a resource: each *run* is one ElectLeaders request over the
partitions the spec selects. kpo reconciles it on every tick by calling :func:`decide` with what the spec asks for
(:class:`Intent`), what the status remembers (:class:`Memory`) and what it observes now (:class:`Observation`: the
clock, the PartitionReassignment named in ``after`` and, only when a run is due, the selected topics as DescribeTopics
reports them). ``decide`` is pure. When it says a run is due (phase *Electing*, with an :class:`Election`), the
reconciler sends the request, :func:`tally` turns Kafka's answer into a :class:`Run`, and :func:`finish` says where
the run leaves the resource. A run is one request, so *Electing* is only seen in a status when Kafka could not be
reached and the run is retried on the next tick.

::

                       after: the reassignment has not Succeeded
              ┌────────────────────────► Waiting ─────────────────┐
              │                           ▲                       │ it Succeeded
        ┌─────┴───┐     run due now       │                       ▼
        │ Pending ├───────────────────────┼──────────────────► Electing ──► Succeeded   (no schedule)
        └─────┬───┘                       │                    ▲    │  └──► Failed      (request refused)
              │                           │    nextRunAt passed│    ▼
              │                           └──────────────── Scheduled                   (with a schedule)
              │ unknown topic or partition, after names nothing,
              │ a one-off selection that matches nothing
              └────────────────────────────────────────────────► Invalid

Phases, and what each transitions to:

- **Pending** — a new spec; every spec change starts over here (a changed election is a new election). Transitions
  to *Invalid* (a named topic or partition does not exist, ``after`` names no PartitionReassignment, or a one-off
  selection matches nothing: nothing is sent to Kafka), *Waiting* (``after`` has not Succeeded yet), *Scheduled* (a
  scheduled selection that matches nothing right now) or *Electing* (the run is due), and from *Electing*, within the
  same tick, to whatever the run ends in. Stays *Pending* while the only problem is a named topic that does not
  exist yet (reason *WaitingForTopic*, :mod:`kpo.domain.topic_wait`: up to its grace from the first miss, one Event;
  then *Invalid*).
- **Waiting** — ``after`` names a PartitionReassignment that has not Succeeded for its current spec: moves change the
  preferred replicas, and electing before they finish would elect the old ones. Re-checked on every tick.
  Transitions to *Electing* once it has Succeeded, to *Invalid* when it is deleted. A reassignment that ended Failed,
  Invalid, Stopped or Reverted keeps the election *Waiting* with ``Stalled=True``: it can still succeed after its
  spec is fixed, and this election then runs.
- **Electing** — the run is sent. Transitions to *Succeeded* (no schedule: Kafka answered), *Failed* (no schedule:
  Kafka refused the request as a whole, e.g. CLUSTER_AUTHORIZATION_FAILED), *Scheduled* (with a schedule: every run
  is recorded, whatever its outcome, and the next is due ``interval`` after this one started), or stays *Electing*
  while Kafka cannot be reached. A retry re-checks everything first, so it may also end in *Invalid* (a selected
  topic disappeared meanwhile) or *Waiting* (the reassignment named in ``after`` is running again).
- **Scheduled** — waiting for ``status.nextRunAt``; the schedule counts from the start of the last run, and runs
  missed while the operator was down are not caught up (one run, then the interval again). Transitions to *Electing*
  when ``nextRunAt`` has passed, *Waiting* when a run is due but ``after`` has not Succeeded, *Invalid* when a named
  topic no longer exists. A due run whose pattern matches no topic stays *Scheduled* and says so (reason
  NothingSelected): topics may appear later.
- **Succeeded**, **Failed**, **Invalid** — terminal for this generation of the spec; a spec change starts over in
  *Pending*. Two exceptions, checked again on every tick, because GitOps tools apply a set of resources in no
  guaranteed order and a topic created a moment ago may show no partition yet: *Invalid* because ``after`` names a
  PartitionReassignment that does not exist moves on once it is created, and *Invalid* because the selection matches
  no partition (NothingSelected) moves on once it matches.

What ``Ready`` means. One-off: ``True`` once the run has finished (*Succeeded*). Scheduled: ``True`` while the most
recent run finished, ``False`` before the first run, after a run whose request Kafka refused as a whole, and while the
selection matches nothing. Partitions Kafka refuses one by one (PREFERRED_LEADER_NOT_AVAILABLE: the preferred replica
is out of sync) do not fail a run — retrying at once would not help, a schedule will retry — they are listed in
``status.lastRun.failures``, reported in a Warning Event, and ``Ready``'s reason is ``PartitionsRefused`` instead of
``Elected``.

Excluded leaders (``excludeLeaders``): a selected partition whose preferred replica is on one of these brokers is
left out of the request and counted in ``status.lastRun.excluded`` — electing it would make that broker its leader,
which is what the exclusion is for (a broker about to be serviced, or one that was demoted with a DemoteBrokers plan
whose election another resource re-runs). When every selected partition is left out, the selection matches nothing
(reason NothingSelected, as above). With exclusions, a selection of every partition is sent as an explicit list.

Counting a run: ``elected`` are the partitions whose leader changed, ``alreadyPreferred`` those Kafka answered
ELECTION_NOT_NEEDED for (for an Unclean election: partitions that have a leader, so there was nothing to recover),
``failed`` the rest. When the selection is every partition of the cluster, kpo sends ElectLeaders without a partition
list, as kafka-leader-election.sh --all-topic-partitions does (partitions created meanwhile are included). Kafka then
leaves the ELECTION_NOT_NEEDED partitions out of its answer, so kpo counts them from DescribeTopics: every partition
it described and Kafka did not mention was already led by its preferred replica.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from kpo.api import ElectionPhase
from kpo.api.topic_pattern import matching
from kpo.domain import access
from kpo.domain import conditions as cond
from kpo.domain.clock import rfc3339
from kpo.domain.conditions import ConditionUpdate, Event, check_transition, transition_event
from kpo.domain.model import ClusterView, KafkaRefusal, TopicPartition
from kpo.domain.problems import Problem, summarize
from kpo.domain.topic_wait import WAITING_FOR_TOPIC, wait_for_topics

Phase = ElectionPhase


class Need(StrEnum):
    """What a decision needs observed before it can be made, cheapest first."""

    REASSIGNMENT = "reassignment"  # one Kubernetes read
    CLUSTER = "cluster"  # topic names and DescribeTopics of the selected topics


TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.INVALID})

TRANSITIONS: Mapping[Phase, frozenset[Phase]] = {
    Phase.PENDING: frozenset({Phase.PENDING, Phase.INVALID, Phase.WAITING, Phase.SCHEDULED, Phase.ELECTING}),
    Phase.WAITING: frozenset({Phase.WAITING, Phase.ELECTING, Phase.INVALID, Phase.SCHEDULED}),
    Phase.ELECTING: frozenset({Phase.ELECTING, Phase.SUCCEEDED, Phase.FAILED, Phase.SCHEDULED, Phase.INVALID,
                               Phase.WAITING}),
    Phase.SCHEDULED: frozenset({Phase.SCHEDULED, Phase.ELECTING, Phase.WAITING, Phase.INVALID}),
    Phase.SUCCEEDED: frozenset({Phase.SUCCEEDED, Phase.PENDING}),
    Phase.FAILED: frozenset({Phase.FAILED, Phase.PENDING}),
    Phase.INVALID: frozenset({Phase.INVALID, Phase.PENDING, Phase.WAITING, Phase.ELECTING, Phase.SCHEDULED}),
}

# Reasons of the Ready condition, so a status can be read back into a Memory and tests can name them.
ELECTED = "Elected"
PARTITIONS_REFUSED = "PartitionsRefused"
KAFKA_REFUSED = "KafkaRefused"
KAFKA_UNAVAILABLE = "KafkaUnavailable"
NOTHING_SELECTED = "NothingSelected"
UNKNOWN_REASSIGNMENT = "UnknownPartitionReassignment"
#: Invalid for these reasons is re-checked every tick: what is missing may appear (see the module docstring).
RECHECKED = frozenset({UNKNOWN_REASSIGNMENT, NOTHING_SELECTED})
WAITING_FOR_REASSIGNMENT = "WaitingForReassignment"
REASSIGNMENT_NOT_SUCCEEDED = "ReassignmentNotSucceeded"

# A run that Kafka answered: on a schedule, Ready stays True until a run says otherwise.
_ANSWERED = frozenset({ELECTED, PARTITIONS_REFUSED})
# Reasons that need the user (or another resource) to change something: Stalled.
_STALLED = frozenset({KAFKA_REFUSED, access.NOT_AUTHORIZED, NOTHING_SELECTED, REASSIGNMENT_NOT_SUCCEEDED,
                      UNKNOWN_REASSIGNMENT})
# A PartitionReassignment in one of these phases will not reach Succeeded without a change to its spec.
_REASSIGNMENT_ENDED = frozenset({"Failed", "Invalid", "Stopped", "Reverted"})


class SelectionKind(StrEnum):
    ALL = "all"
    TOPICS = "topics"
    PATTERN = "topicPattern"
    PARTITIONS = "partitions"


@dataclass(frozen=True)
class Selection:
    """Which partitions a run elects leaders for; exactly one kind, as the API allows."""

    kind: SelectionKind = SelectionKind.ALL
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    def __str__(self) -> str:
        if self.kind is SelectionKind.TOPICS:
            return f"spec.topics {list(self.topics)}"
        if self.kind is SelectionKind.PATTERN:
            return f"spec.topicPattern {self.pattern!r}"
        if self.kind is SelectionKind.PARTITIONS:
            return f"spec.partitions ({len(self.partitions)} partition(s))"
        return "every partition of the cluster"

    def named_topics(self) -> set[str]:
        """The topics the spec names outright (``topics``, or those of ``partitions``): the ones kpo may ask Kafka
        about by name. A pattern, or every partition, names none: it can only match what metadata lists."""
        if self.kind is SelectionKind.TOPICS:
            return set(self.topics)
        if self.kind is SelectionKind.PARTITIONS:
            return {tp.topic for tp in self.partitions}
        return set()

    def topics_to_describe(self, existing: Collection[str]) -> set[str]:
        """The topics whose partitions DescribeTopics must report for this selection (only existing ones)."""
        present = set(existing)
        if self.kind is SelectionKind.TOPICS:
            return present & set(self.topics)
        if self.kind is SelectionKind.PATTERN:
            assert self.pattern is not None
            return matching(self.pattern, present)
        if self.kind is SelectionKind.PARTITIONS:
            return present & {tp.topic for tp in self.partitions}
        return present


@dataclass(frozen=True)
class Intent:
    """What the spec asks for, already parsed."""

    generation: int
    selection: Selection = Selection()
    unclean: bool = False
    interval: timedelta | None = None
    after: str | None = None
    # Brokers not to make leaders: partitions whose preferred replica is on one are left out.
    exclude_leaders: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Memory:
    """What kpo remembers in the status."""

    phase: Phase = Phase.PENDING
    observed_generation: int = 0
    # The Ready condition's reason: what the last decision was about.
    reason: str = ""
    runs: int = 0
    next_run_at: datetime | None = None
    # When this generation's Pending first found a topic of the spec missing (status.topicMissingSince).
    topic_missing_since: datetime | None = None


@dataclass(frozen=True)
class Reassignment:
    """What the Kubernetes API says about the PartitionReassignment named in ``spec.after``."""

    name: str
    found: bool
    phase: str | None = None
    # Its status describes its current spec (status.observedGeneration == metadata.generation).
    current: bool = True


@dataclass(frozen=True)
class Observation:
    now: datetime
    after: Reassignment | None = None
    # Topic names of the cluster and the partitions of the selected topics; observed only when a run is due.
    cluster: ClusterView | None = None


@dataclass(frozen=True)
class Election:
    """One ElectLeaders request: ``partitions=None`` asks Kafka to try every partition of the cluster."""

    partitions: tuple[TopicPartition, ...] | None
    unclean: bool = False


@dataclass(frozen=True)
class Run:
    """The outcome of one run, as :func:`tally` reads Kafka's answer."""

    started_at: datetime
    finished_at: datetime
    selected: int
    elected: tuple[TopicPartition, ...] = ()
    already_preferred: int = 0
    failures: Mapping[TopicPartition, KafkaRefusal] = field(default_factory=dict)
    # Kafka refused the request as a whole (every selected partition is then listed as failed with this refusal).
    refused: KafkaRefusal | None = None
    # Kafka could not be reached: the run did not happen and is retried.
    unavailable: str | None = None
    # Selected partitions left out because their preferred replica is on an excluded broker.
    excluded: int = 0

    @property
    def summary(self) -> str:
        counts = (f"elected {len(self.elected)}, already preferred {self.already_preferred}, "
                  f"refused {len(self.failures)} of {self.selected} selected partition(s)")
        if self.excluded:
            counts += f"; {self.excluded} left out (preferred replica on a broker in excludeLeaders)"
        if self.refused is not None:
            return f"Kafka refused the election request: {self.refused} ({counts})"
        if self.failures:
            worst = sorted(self.failures)[:3]
            more = "…" if len(self.failures) > 3 else ""
            counts += "; refused: " + ", ".join(f"{tp}: {self.failures[tp].code}" for tp in worst) + more
        return counts


@dataclass(frozen=True)
class Decision:
    phase: Phase
    reason: str
    message: str
    election: Election | None = None
    # The partitions the run covers, as DescribeTopics reported them (for counting an ElectLeaders-for-all answer).
    selected: tuple[TopicPartition, ...] = ()
    # Selected partitions left out of the election: their preferred replica is on a broker in excludeLeaders.
    excluded: int = 0
    next_run_at: datetime | None = None
    run: Run | None = None
    runs: int = 0
    problems: tuple[Problem, ...] = ()
    events: tuple[Event, ...] = ()
    # Nothing to do or to write this tick (a terminal phase, or a schedule whose time has not come).
    idle: bool = False
    # Observe these and decide again: the PartitionReassignment named in ``after``, then (a run is due) the cluster.
    needs: frozenset[Need] = frozenset()
    # Set while Pending waits for a missing topic (:mod:`kpo.domain.topic_wait`): when it was first missed.
    topic_missing_since: datetime | None = None

    @property
    def conditions(self) -> list[ConditionUpdate]:
        stalled = self.phase in (Phase.FAILED, Phase.INVALID) or self.reason in _STALLED
        ready = self.phase is Phase.SUCCEEDED or (self.phase is Phase.SCHEDULED and self.reason in _ANSWERED)
        progressing = not stalled and self.phase in (Phase.PENDING, Phase.WAITING, Phase.ELECTING)
        return cond.kstatus(ready=ready, progressing=progressing, stalled=stalled, reason=self.reason,
                            message=self.message)


def decide(intent: Intent, memory: Memory, observed: Observation) -> Decision:
    fresh = intent.generation != memory.observed_generation
    phase = Phase.PENDING if fresh else memory.phase
    keep_next = memory.next_run_at if intent.interval is not None and not fresh else None
    idle = Decision(phase, memory.reason, "", next_run_at=keep_next, runs=memory.runs, idle=True)
    if phase in TERMINAL and not (phase is Phase.INVALID and memory.reason in RECHECKED):
        return idle
    if phase is Phase.SCHEDULED and memory.next_run_at is not None and observed.now < memory.next_run_at:
        return idle
    if intent.after is not None and observed.after is None:
        return _with(idle, idle=False, needs=frozenset({Need.REASSIGNMENT}))
    decision = _after_gate(intent, observed)
    if decision is None:
        if observed.cluster is None:
            return _with(idle, idle=False, needs=frozenset({Need.CLUSTER}))
        decision = _select(intent, observed.cluster, observed.now)
        if phase is Phase.PENDING:
            decision = _waiting_for_topics(decision, None if fresh else memory.topic_missing_since, observed.now)
    decision = _with(decision, runs=memory.runs, next_run_at=decision.next_run_at or keep_next)
    _check(phase, decision.phase)
    if decision.phase is not Phase.ELECTING and (decision.phase, decision.reason) != (memory.phase, memory.reason):
        decision = _with(decision, events=(_transition_event(memory.phase, decision),))
    return decision


def finish(intent: Intent, memory: Memory, electing: Decision, run: Run) -> Decision:
    """Where a run leaves the resource; ``electing`` is the decision that asked for it."""
    assert electing.phase is Phase.ELECTING and electing.election is not None
    if run.unavailable is not None:
        decision = _with(electing, reason=KAFKA_UNAVAILABLE, run=None,
                         message=f"Kafka could not be reached, retrying: {run.unavailable}",
                         events=(Event("Warning", KAFKA_UNAVAILABLE, f"will retry: {run.unavailable}"),))
        _check(Phase.ELECTING, decision.phase)
        return decision
    run = replace(run, excluded=electing.excluded)
    scheduled = intent.interval is not None
    next_run_at = run.started_at + intent.interval if intent.interval is not None else None
    if run.refused is not None:
        # NotAuthorized when an ACL is missing (ElectLeaders needs Alter on the cluster), else KafkaRefused.
        phase, reason = (Phase.SCHEDULED if scheduled else Phase.FAILED), access.refusal_reason([run.refused])
    else:
        phase, reason = (Phase.SCHEDULED if scheduled else Phase.SUCCEEDED), (
            PARTITIONS_REFUSED if run.failures else ELECTED)
    runs = memory.runs + 1
    message = f"run {runs}: {run.summary}"
    if next_run_at is not None:
        message += f"; next run at {rfc3339(next_run_at)}"
    _check(Phase.ELECTING, phase)
    event = transition_event(memory.phase, phase, reason, message,
                             warning=run.refused is not None or bool(run.failures))
    return _with(electing, phase=phase, reason=reason, message=message, run=run, runs=runs,
                 next_run_at=next_run_at, events=(event,))


def tally(selected: Sequence[TopicPartition], election: Election,
          answers: Mapping[TopicPartition, KafkaRefusal | None], started_at: datetime, finished_at: datetime) -> Run:
    """Count Kafka's ElectLeaders answer: elected, already preferred, refused (see the module text)."""
    elected = tuple(sorted(tp for tp, answer in answers.items() if answer is None))
    not_needed = [tp for tp, answer in answers.items() if answer is not None and answer.code == "ELECTION_NOT_NEEDED"]
    failures = {tp: answer for tp, answer in answers.items()
                if answer is not None and answer.code != "ELECTION_NOT_NEEDED"}
    if election.partitions is None:
        # Kafka leaves out what needed no election; whatever was described and not mentioned was already preferred.
        unmentioned = set(selected) - set(answers)
        return Run(started_at, finished_at, selected=len(set(selected) | set(answers)), elected=elected,
                   already_preferred=len(unmentioned) + len(not_needed), failures=failures)
    for tp in election.partitions:
        if tp not in answers:
            failures[tp] = KafkaRefusal("NO_ANSWER", "Kafka's answer did not mention this partition")
    return Run(started_at, finished_at, selected=len(election.partitions), elected=elected,
               already_preferred=len(not_needed), failures=failures)


def refused_run(selected: Sequence[TopicPartition], refusal: KafkaRefusal, started_at: datetime,
                finished_at: datetime) -> Run:
    """A run whose request Kafka refused as a whole: no partition was elected, each is listed with the refusal."""
    return Run(started_at, finished_at, selected=len(selected), failures=dict.fromkeys(selected, refusal),
               refused=refusal)


def unavailable_run(message: str, started_at: datetime) -> Run:
    return Run(started_at, started_at, selected=0, unavailable=message)


def resolve(selection: Selection, view: ClusterView) -> tuple[list[TopicPartition], list[Problem]]:
    """The partitions a selection stands for on this cluster, and what in it does not exist."""
    problems: list[Problem] = []
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in view.partitions:
        by_topic.setdefault(tp.topic, []).append(tp)
    chosen: set[TopicPartition] = set()
    if selection.kind is SelectionKind.PARTITIONS:
        for index, tp in enumerate(selection.partitions):
            if tp.topic not in view.topics:
                problems.append(Problem(f"spec.partitions[{index}].topic", "UnknownTopic",
                                        f"topic {tp.topic!r} does not exist"))
            elif tp not in view.partitions:
                count = len(by_topic.get(tp.topic, []))
                problems.append(Problem(f"spec.partitions[{index}].partition", "UnknownPartition",
                                        f"topic {tp.topic!r} has {count} partition(s), so no partition "
                                        f"{tp.partition}"))
            else:
                chosen.add(tp)
        return sorted(chosen), problems
    if selection.kind is SelectionKind.TOPICS:
        for index, topic in enumerate(selection.topics):
            if topic not in view.topics:
                problems.append(Problem(f"spec.topics[{index}]", "UnknownTopic", f"topic {topic!r} does not exist"))
    wanted = selection.topics_to_describe(view.topics)
    for topic in wanted:
        chosen.update(by_topic.get(topic, []))
    return sorted(chosen), problems


# --------------------------------------------------------------------------------------------------------- phases


def _after_gate(intent: Intent, observed: Observation) -> Decision | None:
    """None when nothing holds the run back; otherwise why it waits (or why it cannot ever run)."""
    if intent.after is None:
        return None
    found = observed.after
    name = intent.after
    if found is None or not found.found:
        return Decision(Phase.INVALID, UNKNOWN_REASSIGNMENT,
                        f"spec.after: no PartitionReassignment named {name!r} in this namespace; create it, or fix "
                        "or remove spec.after (kpo checks again on every tick)")
    if found.phase == "Succeeded" and found.current:
        return None
    if found.phase in _REASSIGNMENT_ENDED and found.current:
        return Decision(Phase.WAITING, REASSIGNMENT_NOT_SUCCEEDED,
                        f"waiting for PartitionReassignment {name!r}, which ended {found.phase}: this election runs "
                        "only after it has Succeeded; fix that reassignment, or remove spec.after")
    state = found.phase or "not started"
    if found.phase == "Succeeded":
        state = "Succeeded for an older spec"
    return Decision(Phase.WAITING, WAITING_FOR_REASSIGNMENT,
                    f"waiting for PartitionReassignment {name!r} to succeed (now: {state})")


def _select(intent: Intent, view: ClusterView, now: datetime) -> Decision:
    selected, problems = resolve(intent.selection, view)
    if problems:
        return Decision(Phase.INVALID, problems[0].reason, summarize(problems) +
                        "; nothing was sent to Kafka", problems=tuple(problems))
    if not selected:
        message = f"{intent.selection} matches no partition; nothing was sent to Kafka"
        if intent.interval is None:
            return Decision(Phase.INVALID, NOTHING_SELECTED, message)
        next_run_at = now + intent.interval
        return Decision(Phase.SCHEDULED, NOTHING_SELECTED, f"{message}; trying again at {rfc3339(next_run_at)}",
                        next_run_at=next_run_at)
    excluded = [tp for tp in selected if _preferred(view, tp) in intent.exclude_leaders]
    if excluded:
        selected = [tp for tp in selected if _preferred(view, tp) not in intent.exclude_leaders]
        if not selected:
            return Decision(Phase.INVALID if intent.interval is None else Phase.SCHEDULED, NOTHING_SELECTED,
                            f"every one of the {len(excluded)} selected partition(s) has its preferred replica on a "
                            f"broker in excludeLeaders {sorted(intent.exclude_leaders)}; nothing was sent to Kafka",
                            excluded=len(excluded),
                            next_run_at=now + intent.interval if intent.interval is not None else None)
    # Without a partition list Kafka elects every partition: with exclusions the list must be explicit.
    everything = intent.selection.kind is SelectionKind.ALL and not excluded
    kind = "unclean" if intent.unclean else "preferred"
    left_out = f", {len(excluded)} left out (preferred replica in excludeLeaders)" if excluded else ""
    return Decision(Phase.ELECTING, "Electing", f"{kind} election for {len(selected)} partition(s){left_out}",
                    election=Election(None if everything else tuple(selected), unclean=intent.unclean),
                    selected=tuple(selected), excluded=len(excluded))


def _waiting_for_topics(decision: Decision, missing_since: datetime | None, now: datetime) -> Decision:
    """A new spec refused only for topics that do not exist yet waits for them (:mod:`kpo.domain.topic_wait`)."""
    if decision.phase is not Phase.INVALID:
        return decision
    wait = wait_for_topics(decision.problems, missing_since, now)
    if wait is None:
        return decision
    return Decision(Phase.PENDING, WAITING_FOR_TOPIC, wait.message, problems=decision.problems,
                    topic_missing_since=wait.since)


def _preferred(view: ClusterView, tp: TopicPartition) -> int | None:
    replicas = view.partitions[tp].replicas
    return replicas[0] if replicas else None


# -------------------------------------------------------------------------------------------------------- helpers


def _check(before: Phase, after: Phase) -> None:
    check_transition(TRANSITIONS, before, after)


def _transition_event(before: Phase, decision: Decision) -> Event:
    return transition_event(before, decision.phase, decision.reason, decision.message,
                            warning=decision.phase in (Phase.FAILED, Phase.INVALID) or decision.reason in _STALLED)


def _with(decision: Decision, **changes: object) -> Decision:
    return replace(decision, **changes)  # type: ignore[arg-type]
