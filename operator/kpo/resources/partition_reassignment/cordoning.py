"""Carrying out a RemoveBrokers drain's cordons (KIP-1066): journal first, then Kafka; taken back when not wanted.

The pure rules are in :mod:`kpo.domain.cordon`. Each tick says which brokers it wants cordoned — the plan's brokers
while the resource executes, is paused or has succeeded, none otherwise (stopping, reverting, stopped, reverted,
failed, a new spec) — and :func:`follow` makes the cluster match: brokers no longer wanted are uncordoned first, then
new ones are journaled and cordoned. A broker that is not live is neither read nor written (librdkafka sends a
broker's configs to that broker): it waits in the journal for a tick that finds it back. On deletion
:func:`release` lets go of everything, and a broker that cannot be reached any more (it was drained to be removed)
is named in a Warning instead of holding the finalizer for ever.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from kpo.domain import cordon as rules
from kpo.domain.conditions import Event
from kpo.domain.cordon import CordonJournal, CordonState
from kpo.domain.throttle import ConfigChange
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable
from kpo.resources.partition_reassignment.lifecycle import Phase

#: The phases in which a RemoveBrokers drain holds its brokers cordoned.
HOLDING = frozenset({Phase.EXECUTING, Phase.PAUSED, Phase.SUCCEEDED})


def follow(kafka: KafkaAdmin, wanted: frozenset[int], state: CordonState, *, others: Sequence[CordonJournal],
           save: Callable[[CordonJournal], object], live_brokers: Collection[int]) -> tuple[CordonState, list[Event]]:
    """Cordon ``wanted`` and uncordon the rest of the journal; the new state and the Events to post."""
    live, events = frozenset(live_brokers), []
    mine = state.journal
    taken_back = []
    for broker in sorted((mine.brokers - wanted) & live):
        if _apply(kafka, rules.release_changes(mine, broker, others)):
            taken_back.append(broker)
    if taken_back:
        mine = mine.without(taken_back)
        save(mine)
        events.append(Event("Normal", "Uncordoned", f"broker(s) {taken_back} uncordoned: new partitions may be "
                                                    f"placed on them again"))
    unavailable = state.unavailable if wanted else None
    adding = (wanted & live) - mine.brokers
    if adding and unavailable is None:
        unavailable = rules.unavailable(kafka.metadata_level())
        if unavailable is not None:
            events.append(Event("Warning", "CordonUnavailable", unavailable))
    if adding and unavailable is None:
        configs = kafka.broker_configs(adding, [rules.CORDONED_LOG_DIRS])
        planned = rules.journal(adding, mine, configs, others)
        if planned != mine:
            save(planned)  # before Kafka: a restart in between must know what to take back
        cordoned = []
        for change in rules.cordon_changes(planned.without(mine.brokers), configs):
            try:
                kafka.alter_configs([change])
            except KafkaRequestRefused as exc:
                # Not applied: the journal must not name it (it would be "taken back" later). Drain without it.
                planned = planned.without([int(change.name)])
                save(planned)
                unavailable = f"Kafka refused to cordon broker {change.name}: {exc.refusal}"
                events.append(Event("Warning", "CordonRefused", unavailable))
                break
            cordoned.append(int(change.name))
        if cordoned:
            events.append(Event("Normal", "Cordoned", f"broker(s) {cordoned} cordoned (KIP-1066): no new partition "
                                                      f"is placed on them while they are drained"))
        mine = planned
    return CordonState(mine, unavailable), events


def release(kafka: KafkaAdmin, journal: CordonJournal, *, others: Sequence[CordonJournal],
            save: Callable[[CordonJournal], object], live_brokers: Collection[int]) -> list[Event]:
    """Take every cordon of a deleted resource back; a broker that is not live is left cordoned and named."""
    if journal.empty:
        return []
    live = frozenset(live_brokers)
    unreachable = sorted(journal.brokers - live)
    mine = journal
    for broker in sorted(journal.brokers & live):
        if not _apply(kafka, rules.release_changes(journal, broker, others)):
            raise KafkaUnavailable(f"broker {broker} did not answer while its cordon was taken back")
        mine = mine.without([broker])
        save(mine)
    events = [Event("Normal", "Uncordoned", f"broker(s) {sorted(journal.brokers & live)} uncordoned")] \
        if journal.brokers & live else []
    if unreachable:
        save(CordonJournal())  # let go: the Warning names what stays, and nothing will take it back
        events.append(Event("Warning", "CordonLeft", rules.left_behind(unreachable)))
    return events


def _apply(kafka: KafkaAdmin, changes: Sequence[ConfigChange]) -> bool:
    """Apply one broker's changes; ``False`` when it could not be reached (tried again later)."""
    if not changes:
        return True
    try:
        kafka.alter_configs(changes)
    except KafkaUnavailable:
        return False
    return True
