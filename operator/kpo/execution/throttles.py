"""Carrying out a PartitionReassignment's replication throttle: journal first, then Kafka; removal at the end.

The pure rules are in :mod:`kpo.domain.throttle`; this module reads the live configs, writes the journal to the
resource's ConfigMap before touching Kafka, and applies or takes back exactly the journal's entries. It runs under
the cluster's :class:`~kpo.execution.ledger.ThrottleLedger`, one resource at a time, with the other resources'
journals as the ledger knows them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace

from kpo.domain import throttle as rules
from kpo.domain.throttle import ThrottleJournal, ThrottlePlan
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable

#: How long a removal waits for Kafka to show it (see ``_gone``) before leaving it to the next tick.
READ_BACK_SECONDS = 2.0


def ensure(kafka: KafkaAdmin, wanted: ThrottlePlan, *, previous: ThrottleJournal, others: Sequence[ThrottleJournal],
           save: Callable[[ThrottleJournal], object], live_brokers: Collection[int]) -> ThrottleJournal:
    """Make the throttle ``wanted`` (:func:`kpo.domain.throttle.plan`) be in place; returns the journal (saved
    before anything is applied).

    One entity (broker, topic) at a time: when Kafka refuses one, the journal is cut back to what was applied and
    the refusal is raised. A broker that is not live is neither read nor written: librdkafka sends a broker's configs
    to that broker, and waiting out the timeout on a dead one every tick would hold back what comes after it (a
    revert's cancellations among them). It joins the journal, and gets its rates, on the first tick that finds it
    back.
    """
    live = frozenset(live_brokers)
    wanted = replace(wanted, brokers=wanted.brokers & live, log_dir_brokers=wanted.log_dir_brokers & live)
    topics = set(wanted.leader_replicas) | set(wanted.follower_replicas)
    brokers = kafka.broker_configs((wanted.brokers | wanted.log_dir_brokers | previous.all_brokers) & live,
                                   rules.HELD_BROKER_KEYS)
    topic_configs = kafka.topic_configs(topics, rules.TOPIC_KEYS) if topics else {}
    mine = rules.journal(wanted, previous, brokers, topic_configs, others)
    if mine != previous:
        save(mine)
    changes = rules.reachable(rules.apply_changes(mine, brokers, topic_configs, others), live)
    entities = list(dict.fromkeys(rules.entity(c) for c in changes))
    for at, target in enumerate(entities):
        try:
            kafka.alter_configs([c for c in changes if rules.entity(c) == target])
        except KafkaRequestRefused:
            # Refused (an ACL): this entity and the ones not tried were not applied, so the journal must not name
            # them. A connection lost instead leaves the journal as it is: what was sent may have been applied.
            applied = rules.applied_only(mine, previous, entities[at:])
            if applied != mine:
                save(applied)
            raise
    return mine


def remove(kafka: KafkaAdmin, journal: ThrottleJournal, others: Sequence[ThrottleJournal],
           save: Callable[[ThrottleJournal], object], live_brokers: Collection[int] | None = None,
           *, read_back_seconds: float = READ_BACK_SECONDS) -> ThrottleJournal:
    """Take back what ``journal`` added (and no other live resource needs), one entity at a time; returns what is
    left: the empty journal, or the entities that could not be cleaned yet (a broker down or not answering).

    Topics go first: their replica lists are changed through any broker, so a broker being down never keeps them.
    Each broker's rates are taken back on their own, and a broker that is not live (``live_brokers``) is not even
    asked: librdkafka sends a broker's configs to that broker, and waiting on a dead one would stall the tick.
    """
    if journal.empty:
        return journal
    try:
        # What the topics list now, so a list left empty is deleted rather than kept as an empty value.
        current: Mapping[str, Mapping[str, str]] | None = kafka.topic_configs(journal.topics, rules.TOPIC_KEYS)
    except KafkaUnavailable:
        current = None
    changes = rules.removal_changes(journal, others, current)
    left = journal
    for topic in sorted(journal.topics):
        mine = [c for c in changes if c.resource == "topic" and c.name == topic]
        if _apply(kafka, mine) and _gone(kafka, mine, read_back_seconds):
            left = left.without(topics=[topic])
    for broker in sorted(journal.all_brokers):
        if live_brokers is not None and broker not in live_brokers:
            continue
        mine = [c for c in changes if c.resource == "broker" and c.name == str(broker)]
        if _apply(kafka, mine) and _gone(kafka, mine, read_back_seconds):
            left = left.without(brokers=[broker])
    if left != journal:
        save(left if not left.empty else ThrottleJournal())
    return left if not left.empty else ThrottleJournal()


def _apply(kafka: KafkaAdmin, changes: Sequence[rules.ConfigChange]) -> bool:
    """Apply one entity's changes; ``False`` when Kafka could not be reached for it (tried again later)."""
    if not changes:
        return True
    try:
        kafka.alter_configs(changes)
    except KafkaUnavailable:
        return False
    return True


def _gone(kafka: KafkaAdmin, changes: Sequence[rules.ConfigChange], within: float) -> bool:
    """Whether one entity's configs, read back, show ``changes`` taken within ``within`` seconds; ``False`` (kept in
    the journal, removed again next tick) when they do not or cannot be read: the journal, and the status, never say
    a throttle is gone that Kafka still shows. Read more than once because a KRaft broker answers DescribeConfigs
    from the metadata it has applied, which follows the controller's acknowledgement by some milliseconds (on the
    bed's 4.1 brokers, 1 to 3 reads over 20-110 ms)."""
    if not changes:
        return True
    kind, name = changes[0].resource, changes[0].name
    keys = sorted({c.key for c in changes})
    deadline, pause = time.monotonic() + within, 0.02
    while True:
        try:
            if kind == "broker":
                now = kafka.broker_configs([int(name)], keys).get(int(name), {})
            else:
                now = kafka.topic_configs([name], keys).get(name, {})
        except KafkaUnavailable:
            return False
        if not rules.still_set(changes, now):
            return True
        if time.monotonic() + pause > deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
