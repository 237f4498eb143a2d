"""Carrying out a PartitionReassignment's replication throttle: journal first, then Kafka; removal at the end.

The pure rules are in :mod:`kpo.domain.throttle`; this module reads the live configs, writes the journal to the
resource's ConfigMap before touching Kafka, and applies or takes back exactly the journal's entries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kpo.domain import throttle as rules
from kpo.domain.model import Replicas, TopicPartition
from kpo.domain.throttle import ThrottleJournal
from kpo.kafka.admin import KafkaAdmin


def ensure(kafka: KafkaAdmin, rate: int, moves: Mapping[TopicPartition, tuple[Replicas, Replicas]], *,
           previous: ThrottleJournal, others: Sequence[ThrottleJournal],
           save: Callable[[ThrottleJournal], object]) -> ThrottleJournal:
    """Make the throttle for ``moves`` be in place; returns the journal (saved before anything is applied)."""
    wanted = rules.plan(rate, moves)
    topics = set(wanted.leader_replicas) | set(wanted.follower_replicas)
    brokers = kafka.broker_configs(wanted.brokers | previous.brokers, rules.BROKER_KEYS)
    topic_configs = kafka.topic_configs(topics, rules.TOPIC_KEYS) if topics else {}
    mine = rules.journal(wanted, previous, brokers, topic_configs, others)
    if mine != previous:
        save(mine)
    changes = rules.apply_changes(mine, brokers, topic_configs)
    if changes:
        kafka.alter_configs(changes)
    return mine


def remove(kafka: KafkaAdmin, journal: ThrottleJournal, others: Sequence[ThrottleJournal],
           save: Callable[[ThrottleJournal], object]) -> ThrottleJournal:
    """Take back what ``journal`` added (and no other live resource needs); returns the empty journal."""
    if journal.empty:
        return journal
    changes = rules.removal_changes(journal, others)
    if changes:
        kafka.alter_configs(changes)
    empty = ThrottleJournal()
    save(empty)
    return empty


def to_status(journal: ThrottleJournal) -> dict[str, object] | None:
    if journal.empty:
        return None
    data = journal.to_json()
    return {"rate": data["rate"], "brokers": data["brokers"], "topics": data["topics"]}
