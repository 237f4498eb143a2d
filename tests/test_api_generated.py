"""Generated specs near the edges of the API, for checking that the models and the server agree.

The strategies build camelCase spec dicts the way users write them, mostly valid but with values just past each
boundary mixed in (broker -1, tolerance 0, a duplicate replica, an unknown enum value, a forbidden field
combination). Here they check that whatever the models accept survives a round trip through ``to_k8s()``;
``e2e/test_api_admission.py`` sends the same specs to the kube-apiserver and requires the server to accept exactly
what the models accept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kpo.api import PARTITION_REASSIGNMENT, PREFERRED_LEADER_ELECTION, TOPIC_PARTITION_COUNT, ResourceKind, kind_named

Strategy = st.SearchStrategy[Any]


Apply = Callable[[dict[str, Any], st.DrawFn], None]


@dataclass(frozen=True)
class Defect:
    """One way to break a valid spec, named for test ids (on some specs it may turn out harmless)."""

    name: str
    apply: Apply
    #: False for a defect only the models can see (a partition listed twice in an atomic list): the server accepts
    #: it, the operator makes the resource Invalid.
    at_admission: bool = True


def defect(apply: Apply, *, at_admission: bool = True) -> Defect:
    return Defect(apply.__name__.strip("_").replace("_", "-"), apply, at_admission)


def maybe(value: Strategy) -> Strategy:
    """An optional field: absent (None, dropped by :func:`compact`) or ``value``."""
    return st.one_of(st.none(), value)


def compact(entries: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in entries.items() if value is not None}


def set_at(path: tuple[str | int, ...], bad: Strategy) -> Defect:
    """A defect that puts a drawn bad value at ``path``, creating missing objects on the way."""

    def corrupt(spec: dict[str, Any], draw: st.DrawFn) -> None:
        parent: Any = spec
        for key in path[:-1]:
            if isinstance(key, int):
                if not isinstance(parent, list) or len(parent) <= key:
                    return  # nothing to corrupt here: the spec stays as it was
                parent = parent[key]
            else:
                parent = parent.setdefault(key, {})
        parent[path[-1]] = draw(bad)

    return Defect("bad-" + ".".join(map(str, path)), corrupt)


def delete_at(*path: str) -> Defect:
    def corrupt(spec: dict[str, Any], _draw: st.DrawFn) -> None:
        parent: Any = spec
        for key in path[:-1]:
            parent = parent.get(key, {})
        parent.pop(path[-1], None)

    return Defect("no-" + ".".join(path), corrupt)


@st.composite
def with_one_defect(draw: st.DrawFn, valid: Strategy, defects: tuple[Defect, ...]) -> dict[str, Any]:
    """A valid spec, and half of the time the same spec with one defect."""
    spec: dict[str, Any] = draw(valid)
    if draw(st.booleans()):
        draw(st.sampled_from(defects)).apply(spec, draw)
    return spec


@st.composite
def with_defect(draw: st.DrawFn, valid: Strategy, broken: Defect | None) -> dict[str, Any]:
    """A valid spec with the given defect applied (None: left valid)."""
    spec: dict[str, Any] = draw(valid)
    if broken is not None:
        broken.apply(spec, draw)
    return spec


TOPIC = st.sampled_from(["orders", "payments", "audit.log", "a_b-c", "t" * 249])
BAD_TOPIC = st.sampled_from(["", "bad topic", "t" * 250, "x/y"])
TOPICS = st.lists(TOPIC, min_size=1, max_size=3, unique=True)
PATTERN = st.sampled_from(["orders.*", "^audit\\.", "x", "(a|b)-[0-9]+"])
BROKERS = st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True)
BAD_BROKERS = st.sampled_from([[], [1, 1], [-1], [0, -2], [1, 2, 2]])
CLUSTER_REF = st.sampled_from(["prod", "analytics-2", "a"])
BAD_CLUSTER_REF = st.sampled_from(["Prod_1", "x" * 64, "", "-a"])
LOG_DIR = st.sampled_from(["any", "/data/a", "/data/b"])
GOALS = ("Rebalance", "RemoveBrokers", "AddBrokers", "ReplicationFactor")


@st.composite
def _reassignment_target(draw: st.DrawFn) -> dict[str, Any]:
    replicas = draw(BROKERS)
    same_length = st.lists(LOG_DIR, min_size=len(replicas), max_size=len(replicas))
    return compact({"topic": draw(TOPIC), "partition": draw(st.integers(0, 3)), "replicas": replicas,
                    "logDirs": draw(maybe(same_length))})


@st.composite
def _plan(draw: st.DrawFn) -> dict[str, Any]:
    goal = draw(maybe(st.sampled_from(GOALS)))
    selection = draw(st.sampled_from(["all", "topics", "pattern"]))
    return compact(
        {
            "goal": goal,
            "topics": draw(TOPICS) if selection == "topics" else None,
            "topicPattern": draw(PATTERN) if selection == "pattern" else None,
            "excludeTopics": draw(maybe(TOPICS)),
            "brokers": draw(BROKERS) if goal in ("RemoveBrokers", "AddBrokers") else None,
            "replicationFactor": draw(st.integers(1, 4)) if goal == "ReplicationFactor" else None,
            "tolerance": draw(maybe(st.sampled_from([0.05, 0.1, 1, 0.5, 1e-6]))),
            "rackAware": draw(maybe(st.booleans())),
        }
    )


@st.composite
def _valid_reassignment(draw: st.DrawFn) -> dict[str, Any]:
    uses_plan = draw(st.booleans())
    mode = draw(maybe(st.sampled_from(["Manual", "Automatic"])))
    proposal = draw(maybe(st.just("p-1"))) if uses_plan and mode != "Automatic" else None
    max_moves = draw(maybe(st.integers(1, 6)))
    execution = compact(
        {
            "strategy": draw(maybe(st.sampled_from(["AllAtOnce", "Incremental"]))),
            "maxMoves": max_moves,
            "maxMovesPerBroker": draw(maybe(st.integers(1, max_moves or 6))),
            "maxMovesPerBrokerDirection": draw(maybe(st.integers(1, max_moves or 6))),
            "order": draw(maybe(st.sampled_from(["AsGiven", "SmallestFirst", "LargestFirst"]))),
            "throttle": draw(maybe(st.sampled_from([1024, 10485760]))),
            "electLeadersAfter": draw(maybe(st.booleans())),
        }
    )
    partitions = st.lists(_reassignment_target(), min_size=1, max_size=4, unique_by=_partition_key)
    return compact(
        {
            "clusterRef": draw(maybe(CLUSTER_REF)),
            "partitions": None if uses_plan else draw(partitions),
            "plan": draw(_plan()) if uses_plan else None,
            "approval": compact({"mode": mode, "proposalId": proposal}) if mode or proposal else None,
            "execution": execution or None,
            "stop": draw(maybe(st.booleans())),
            "onStop": draw(maybe(st.sampled_from(["Keep", "Revert"]))),
            "deletionPolicy": draw(maybe(st.sampled_from(["Cancel", "Orphan"]))),
        }
    )


def _partition_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    return (entry["topic"], entry["partition"])


def _with_partitions(broken: Defect) -> Defect:
    """Apply ``corruption`` to a spec with explicit partitions (turning a plan-based spec into one first)."""

    def corrupt(spec: dict[str, Any], draw: st.DrawFn) -> None:
        if "partitions" not in spec:
            spec.pop("plan", None)
            spec.pop("approval", None)
            spec["partitions"] = [{"topic": "orders", "partition": 0, "replicas": [1, 2]}]
        broken.apply(spec, draw)

    return Defect(broken.name, corrupt, broken.at_admission)


def _with_plan(broken: Defect) -> Defect:
    """Apply ``corruption`` to a spec with a plan (turning an explicit spec into one first)."""

    def corrupt(spec: dict[str, Any], draw: st.DrawFn) -> None:
        if "plan" not in spec:
            spec.pop("partitions", None)
            spec["plan"] = draw(_plan())
        broken.apply(spec, draw)

    return Defect(broken.name, corrupt)


def _both_targets(spec: dict[str, Any], draw: st.DrawFn) -> None:
    spec.setdefault("partitions", [{"topic": "orders", "partition": 0, "replicas": [1]}])
    spec.setdefault("plan", draw(_plan()))


def _duplicate_first_partition(spec: dict[str, Any], _draw: st.DrawFn) -> None:
    spec["partitions"].append({**spec["partitions"][0], "replicas": [5]})


def _mismatched_log_dirs(spec: dict[str, Any], _draw: st.DrawFn) -> None:
    target = spec["partitions"][0]
    target["logDirs"] = ["any"] * (len(target["replicas"]) + 1)


def _plan_field_for_the_wrong_goal(spec: dict[str, Any], draw: st.DrawFn) -> None:
    """Leave out what the goal needs, or add what only another goal uses."""
    plan = spec["plan"]
    goal = plan.get("goal", "Rebalance")
    needed = {"RemoveBrokers": "brokers", "AddBrokers": "brokers", "ReplicationFactor": "replicationFactor"}
    if goal in needed and draw(st.booleans()):
        del plan[needed[goal]]
    else:
        extra = draw(st.sampled_from([f for f in ("brokers", "replicationFactor") if f != needed.get(goal)]))
        plan[extra] = [1] if extra == "brokers" else 3


def _topics_and_pattern(spec: dict[str, Any], draw: st.DrawFn) -> None:
    spec["plan"].update(topics=draw(TOPICS), topicPattern=draw(PATTERN))


def _per_broker_above_total(spec: dict[str, Any], draw: st.DrawFn) -> None:
    total = draw(st.integers(1, 5))
    spec["execution"] = {**spec.get("execution", {}), "maxMoves": total, "maxMovesPerBroker": total + 1}


def _per_direction_above_total(spec: dict[str, Any], draw: st.DrawFn) -> None:
    total = draw(st.integers(1, 5))
    spec["execution"] = {**spec.get("execution", {}), "maxMoves": total, "maxMovesPerBrokerDirection": total + 1}


def _proposal_without_manual_mode(spec: dict[str, Any], _draw: st.DrawFn) -> None:
    spec["approval"] = {"mode": "Automatic", "proposalId": "p-1"}


def _proposal_without_plan(spec: dict[str, Any], _draw: st.DrawFn) -> None:
    spec["approval"] = {"proposalId": "p-1"}


REASSIGNMENT_DEFECTS: tuple[Defect, ...] = (
    _with_partitions(set_at(("partitions", 0, "topic"), BAD_TOPIC)),
    _with_partitions(set_at(("partitions", 0, "partition"), st.sampled_from([-1, "0", 2**31]))),
    _with_partitions(set_at(("partitions", 0, "replicas"), BAD_BROKERS)),
    _with_partitions(set_at(("partitions", 0, "logDirs"), st.sampled_from([["rel"], [], ["any"] * 65]))),
    _with_partitions(set_at(("partitions",), st.just([]))),
    _with_partitions(defect(_mismatched_log_dirs)),
    _with_partitions(defect(_duplicate_first_partition, at_admission=False)),
    _with_partitions(defect(_proposal_without_plan)),
    defect(_both_targets),
    _with_partitions(delete_at("partitions")),
    _with_plan(delete_at("plan")),
    _with_plan(defect(_plan_field_for_the_wrong_goal)),
    _with_plan(defect(_topics_and_pattern)),
    _with_plan(defect(_proposal_without_manual_mode)),
    _with_plan(set_at(("plan", "goal"), st.just("Shrink"))),
    _with_plan(set_at(("plan", "tolerance"), st.sampled_from([0, 1.5, -0.1, "0.1"]))),
    _with_plan(set_at(("plan", "brokers"), BAD_BROKERS)),
    _with_plan(set_at(("plan", "replicationFactor"), st.sampled_from([0, 17]))),
    _with_plan(set_at(("plan", "excludeTopics"), st.sampled_from([["a", "a"], ["bad topic"]]))),
    set_at(("approval", "mode"), st.just("Auto")),
    set_at(("approval", "proposalId"), st.just("")),
    set_at(("execution", "strategy"), st.just("Bulk")),
    set_at(("execution", "maxMoves"), st.just(0)),
    set_at(("execution", "maxMovesPerBroker"), st.just(0)),
    defect(_per_broker_above_total),
    set_at(("execution", "maxMovesPerBrokerDirection"), st.just(0)),
    defect(_per_direction_above_total),
    set_at(("execution", "order"), st.just("Random")),
    set_at(("execution", "throttle"), st.sampled_from([1023, 0])),
    set_at(("execution", "electLeadersAfter"), st.just("true")),
    set_at(("clusterRef",), BAD_CLUSTER_REF),
    set_at(("stop",), st.sampled_from(["yes", 1])),
    set_at(("onStop",), st.just("Delete")),
    set_at(("deletionPolicy",), st.just("Keep")),
)


@st.composite
def _valid_election(draw: st.DrawFn) -> dict[str, Any]:
    selection = draw(st.sampled_from(["all", "topics", "pattern", "partitions"]))
    election_type = draw(maybe(st.sampled_from(["Preferred", "Unclean"])))
    if election_type == "Unclean" and selection == "all":
        selection = "topics"
    partition = st.fixed_dictionaries({"topic": TOPIC, "partition": st.integers(0, 3)})
    interval = st.sampled_from(["15m", "1h30m", "90s", "10s", "2h", "0h0m10s", "1h0m0s"])
    return compact(
        {
            "clusterRef": draw(maybe(CLUSTER_REF)),
            "topics": draw(TOPICS) if selection == "topics" else None,
            "topicPattern": draw(PATTERN) if selection == "pattern" else None,
            "partitions": draw(st.lists(partition, min_size=1, max_size=3, unique_by=_partition_key))
            if selection == "partitions"
            else None,
            "electionType": election_type,
            "schedule": draw(maybe(st.fixed_dictionaries({"interval": interval})))
            if election_type != "Unclean"
            else None,
            "after": draw(maybe(st.sampled_from(["payments-move", "a.b", "x"]))),
        }
    )


SELECTORS = ("topics", "topicPattern", "partitions")


def _selectors(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "topics": draw(TOPICS),
        "topicPattern": draw(PATTERN),
        "partitions": [{"topic": draw(TOPIC), "partition": draw(st.integers(0, 3))}],
    }


def _two_selectors(spec: dict[str, Any], draw: st.DrawFn) -> None:
    chosen = draw(st.sampled_from([("topics", "topicPattern"), ("topics", "partitions"),
                                   ("topicPattern", "partitions")]))
    values = _selectors(draw)
    for selector in SELECTORS:
        spec.pop(selector, None)
    spec.update({selector: values[selector] for selector in chosen})


def _unclean_everything(spec: dict[str, Any], _draw: st.DrawFn) -> None:
    for selector in (*SELECTORS, "schedule"):
        spec.pop(selector, None)
    spec["electionType"] = "Unclean"


def _unclean_scheduled(spec: dict[str, Any], draw: st.DrawFn) -> None:
    if not any(selector in spec for selector in SELECTORS):
        spec["topics"] = draw(TOPICS)
    spec.update(electionType="Unclean", schedule={"interval": "1h"})


def _same_partition_twice(spec: dict[str, Any], _draw: st.DrawFn) -> None:
    spec.pop("topics", None)
    spec.pop("topicPattern", None)
    spec["partitions"] = [{"topic": "a", "partition": 1}, {"topic": "a", "partition": 1}]


ELECTION_DEFECTS: tuple[Defect, ...] = (
    set_at(("topics",), st.sampled_from([[], ["orders", "orders"], ["bad topic"]])),
    set_at(("partitions",), st.sampled_from([[], [{"topic": "a", "partition": -1}], [{"topic": "a"}]])),
    defect(_same_partition_twice, at_admission=False),
    defect(_two_selectors),
    defect(_unclean_everything),
    defect(_unclean_scheduled),
    set_at(("electionType",), st.just("Dirty")),
    set_at(("schedule",), st.sampled_from([{}, {"interval": "9s"}, {"interval": "0s"}, {"interval": "soon"},
                                           {"interval": "1d"}, {"interval": "m"}, {"interval": "0h0m9s"}])),
    set_at(("after",), st.sampled_from(["Payments_Move", "-x", ""])),
    set_at(("clusterRef",), BAD_CLUSTER_REF),
)


@st.composite
def _valid_partition_count(draw: st.DrawFn) -> dict[str, Any]:
    strategy = draw(maybe(st.sampled_from(["Balanced", "Explicit"])))
    replication = draw(st.integers(1, 3))
    replica_list = st.lists(st.integers(0, 5), min_size=replication, max_size=replication, unique=True)
    placement = compact(
        {
            "strategy": strategy,
            "rackAware": draw(maybe(st.booleans())),
            "assignments": draw(st.lists(replica_list, min_size=1, max_size=3)) if strategy == "Explicit" else None,
        }
    )
    key_ordering = compact(
        {
            "policy": draw(maybe(st.sampled_from(["RequireMultiple", "Allow"]))),
            "sampleMessages": draw(maybe(st.integers(0, 100_000))),
        }
    )
    return compact(
        {
            "clusterRef": draw(maybe(CLUSTER_REF)),
            "topic": draw(TOPIC),
            "partitions": draw(st.integers(1, 4096)),
            "placement": placement or None,
            "keyOrdering": key_ordering or None,
        }
    )


def _explicit_without_assignments(spec: dict[str, Any], _draw: st.DrawFn) -> None:
    spec["placement"] = {**spec.get("placement", {}), "strategy": "Explicit"}
    spec["placement"].pop("assignments", None)


def _balanced_with_assignments(spec: dict[str, Any], draw: st.DrawFn) -> None:
    strategy = draw(st.sampled_from([{"strategy": "Balanced"}, {}]))
    spec["placement"] = {**strategy, "assignments": [[1, 2]]}


def _bad_explicit_assignments(spec: dict[str, Any], draw: st.DrawFn) -> None:
    bad = draw(st.sampled_from([[[1], [1, 2]], [[1, 1]], [[]], [], [[-1]], [[1, 2], [3]]]))
    spec["placement"] = {"strategy": "Explicit", "assignments": bad}


PARTITION_COUNT_DEFECTS: tuple[Defect, ...] = (
    set_at(("topic",), BAD_TOPIC),
    delete_at("topic"),
    set_at(("partitions",), st.sampled_from([0, -3, "12", 2**31])),
    delete_at("partitions"),
    set_at(("placement", "strategy"), st.just("RoundRobin")),
    defect(_explicit_without_assignments),
    defect(_balanced_with_assignments),
    defect(_bad_explicit_assignments),
    set_at(("placement", "rackAware"), st.just("no")),
    set_at(("keyOrdering", "policy"), st.just("Never")),
    set_at(("keyOrdering", "sampleMessages"), st.sampled_from([-1, 100_000_001])),
    set_at(("clusterRef",), BAD_CLUSTER_REF),
)


VALID: dict[str, Strategy] = {
    PARTITION_REASSIGNMENT.kind: _valid_reassignment(),
    PREFERRED_LEADER_ELECTION.kind: _valid_election(),
    TOPIC_PARTITION_COUNT.kind: _valid_partition_count(),
}
DEFECTS: dict[str, tuple[Defect, ...]] = {
    PARTITION_REASSIGNMENT.kind: REASSIGNMENT_DEFECTS,
    PREFERRED_LEADER_ELECTION.kind: ELECTION_DEFECTS,
    TOPIC_PARTITION_COUNT.kind: PARTITION_COUNT_DEFECTS,
}
#: Mixed: half valid, half with one defect.
SPECS: dict[str, Strategy] = {kind: with_one_defect(VALID[kind], DEFECTS[kind]) for kind in VALID}
#: (kind, defect) for every defect, plus (kind, None) for the valid specs: one parameter per way to break a spec.
SPEC_FAMILIES: list[tuple[str, Defect | None]] = [
    (kind, broken) for kind in VALID for broken in (None, *DEFECTS[kind])
]


def family_id(family: tuple[str, Defect | None]) -> str:
    kind, broken = family
    return f"{kind}:{broken.name if broken else 'valid'}"


def model_accepts(kind: ResourceKind, spec: dict[str, Any]) -> bool:
    try:
        kind.spec.model_validate(spec)
    except ValidationError:
        return False
    return True


def _round_trips(kind: ResourceKind, spec: dict[str, Any]) -> None:
    if model_accepts(kind, spec):
        parsed = kind.spec.model_validate(spec)
        assert kind.spec.model_validate(parsed.to_k8s()) == parsed
        # Every key the user wrote survives the dump, with the value it had (defaults may be added).
        dumped = parsed.to_k8s()
        for key, value in spec.items():
            assert key in dumped
            if not isinstance(value, dict):
                assert dumped[key] == value


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(spec=SPECS[PARTITION_REASSIGNMENT.kind])
def test_accepted_reassignment_specs_round_trip(spec: dict[str, Any]) -> None:
    _round_trips(PARTITION_REASSIGNMENT, spec)


@settings(max_examples=150)
@given(spec=SPECS[PREFERRED_LEADER_ELECTION.kind])
def test_accepted_election_specs_round_trip(spec: dict[str, Any]) -> None:
    _round_trips(PREFERRED_LEADER_ELECTION, spec)


@settings(max_examples=150)
@given(spec=SPECS[TOPIC_PARTITION_COUNT.kind])
def test_accepted_partition_count_specs_round_trip(spec: dict[str, Any]) -> None:
    _round_trips(TOPIC_PARTITION_COUNT, spec)


@pytest.mark.parametrize("kind", [PARTITION_REASSIGNMENT, PREFERRED_LEADER_ELECTION, TOPIC_PARTITION_COUNT],
                         ids=lambda k: k.kind)
def test_the_generators_produce_both_accepted_and_refused_specs(kind: ResourceKind) -> None:
    # A generator that only produced invalid (or only valid) specs would make the server comparison vacuous.
    outcomes: list[bool] = []

    @settings(max_examples=200, database=None)
    @given(spec=SPECS[kind.kind])
    def collect(spec: dict[str, Any]) -> None:
        outcomes.append(model_accepts(kind, spec))

    collect()
    assert 0.2 < sum(outcomes) / len(outcomes) < 0.95


def test_defect_names_are_unique_per_kind() -> None:
    ids = [family_id(f) for f in SPEC_FAMILIES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("family", SPEC_FAMILIES, ids=family_id)
def test_each_family_is_what_it_claims(family: tuple[str, Defect | None]) -> None:
    # Valid specs are always accepted; each defect makes the models refuse at least most of its specs (a defect
    # that never breaks anything would add nothing to the comparison with the server).
    kind_name, broken = family
    kind = kind_named(kind_name)
    outcomes: list[bool] = []

    @settings(max_examples=25, database=None)
    @given(spec=with_defect(VALID[kind_name], broken))
    def collect(spec: dict[str, Any]) -> None:
        outcomes.append(model_accepts(kind, spec))

    collect()
    if broken is None:
        assert all(outcomes)
    else:
        assert sum(outcomes) <= len(outcomes) // 2, f"{broken.name} rarely breaks a spec"
