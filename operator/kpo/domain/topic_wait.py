"""A topic that does not exist yet is waited for a short while before a spec naming it is declared Invalid.

GitOps tools apply a topic (a Strimzi KafkaTopic, a Job running kafka-topics.sh) and the resources naming it in no
fixed order, and even a topic created a moment ago is not yet in the metadata of every broker: the one that answers
may not list it. Invalid is decided once per generation of a spec, so declaring it at the first miss would stick until
the user edits the spec. Every kind therefore waits :data:`TOPIC_GRACE` from the first look that missed the topic
(``status.topicMissingSince``), as Pending with reason :data:`WAITING_FOR_TOPIC`, and says so with one Event.

Only a spec whose every problem is a missing topic waits: another problem (an unknown broker, an internal topic)
will not go away by itself, so the spec is Invalid at once, missing topics included in the message.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from kpo.domain.conditions import Event
from kpo.domain.problems import Problem, summarize

TOPIC_GRACE = dt.timedelta(seconds=30)
WAITING_FOR_TOPIC = "WaitingForTopic"
UNKNOWN_TOPIC = "UnknownTopic"
# A selection that names only missing topics selects nothing: that follows from the missing topics, and clears with
# them.
NOTHING_SELECTED = "NothingSelected"


def waiting_since(problems: Sequence[Problem], missing_since: dt.datetime | None,
                  now: dt.datetime | None) -> dt.datetime | None:
    """Since when the topics the problems name have been missing, while they are still worth waiting for: every
    problem is a missing topic (or the empty selection that follows from one) and less than :data:`TOPIC_GRACE` has
    passed since the first miss (``missing_since``; ``None``: this look is the first). ``None``: judge the problems
    now (no clock, ``now`` ``None``, means no wait)."""
    if now is None or not problems:
        return None
    reasons = {p.reason for p in problems}
    if UNKNOWN_TOPIC not in reasons or not reasons <= {UNKNOWN_TOPIC, NOTHING_SELECTED}:
        return None
    since = missing_since or now
    return since if now - since < TOPIC_GRACE else None


def waiting_message(problems: Sequence[Problem]) -> str:
    """The message of a spec waiting for its topics: what is missing, and how long kpo waits."""
    missing = [p for p in problems if p.reason == UNKNOWN_TOPIC]
    return (f"{summarize(missing)}: not yet, kpo waits up to {int(TOPIC_GRACE.total_seconds())} s for the topic(s) "
            "to appear before declaring the spec invalid")


@dataclass(frozen=True)
class TopicWait:
    """A spec waiting for its topics: since when, what it says, and whether this look started the wait."""

    since: dt.datetime
    message: str
    starts: bool

    @property
    def event(self) -> Event:
        """The one Event of a wait, posted by the look that starts it."""
        return Event("Normal", WAITING_FOR_TOPIC, self.message)


def wait_for_topics(problems: Sequence[Problem], missing_since: dt.datetime | None,
                    now: dt.datetime | None) -> TopicWait | None:
    """The wait the problems call for (:func:`waiting_since`); ``None``: judge them now."""
    since = waiting_since(problems, missing_since, now)
    if since is None:
        return None
    return TopicWait(since, waiting_message(problems), starts=missing_since is None)
