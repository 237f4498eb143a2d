"""Topic patterns run through RE2: whole-name matches, linear time whatever the pattern, RE2's refusals as Invalid."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kpo.api import kind_named
from kpo.api.topic_pattern import TopicPatternError, compile_topic_pattern, matching
from kpo.domain.plan_contract import Goal, PlanRequest
from kpo.resources.partition_reassignment.plan_lifecycle import selected_topics


def test_a_pattern_matches_whole_names_only() -> None:
    assert matching("billing-.*", ["billing-eu", "old-billing-eu", "billing"]) == {"billing-eu"}
    assert matching("a|b", ["a", "b", "ab"]) == {"a", "b"}


@pytest.mark.timeout(60)
def test_a_pattern_that_backtracks_exponentially_in_re_is_answered_at_once() -> None:
    # Python's re needs about 2**n steps for this pair: n = 10,000 would never end; RE2 answers in linear time.
    names = ["a" * 10_000, "a" * 10_000 + "b", "b"]
    assert matching("(a+)+b", names) == {"a" * 10_000 + "b"}
    assert matching("(a|aa)*c", names) == set()


@pytest.mark.parametrize(("pattern", "reason"), [
    ("(a)\\1", "invalid escape sequence"),
    ("(?=orders)orders.*", "invalid perl operator"),
    ("(?<!x)y", "invalid perl operator"),
    ("(a{100}){100}", "invalid repetition size"),
    ("[", "missing ]"),
])
def test_what_re2_cannot_run_is_refused_with_its_reason(pattern: str, reason: str) -> None:
    with pytest.raises(TopicPatternError, match=rf"not a pattern RE2 can run: .*{reason}"):
        compile_topic_pattern(pattern)


@pytest.mark.parametrize(("kind", "spec"), [
    ("PreferredLeaderElection", {"topicPattern": "(a)\\1"}),
    ("PartitionReassignment", {"plan": {"goal": "Rebalance", "topicPattern": "(?=a)a"}}),
    ("PartitionReassignment", {"plan": {"goal": "Rebalance", "excludeTopicPattern": "(a)\\1"}}),
])
def test_the_models_refuse_a_pattern_re2_cannot_run(kind: str, spec: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="not a pattern RE2 can run"):
        kind_named(kind).spec.model_validate(spec)


def test_a_plan_selects_by_pattern_and_excludes_by_pattern_with_re2() -> None:
    topics = frozenset({"aaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "orders-eu", "orders-us", "payments"})
    request = PlanRequest(goal=Goal.REBALANCE, topic_pattern="(a+)+b|orders-.*", exclude_topic_pattern="(a+)+|.*-us")
    assert selected_topics(request, topics) == {"orders-eu"}
