"""One test per transition of the TopicPartitionCount life cycle (see lifecycle.py's diagram)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from fractions import Fraction

import pytest

from kpo.api.topic_partition_count import MAX_NEW_PARTITIONS
from kpo.domain.keyremap import remap_report
from kpo.domain.model import Broker, KafkaRefusal, PartitionState
from kpo.resources.topic_partition_count.lifecycle import (
    KAFKA_REFUSED,
    KEY_ORDERING_GUARD,
    NOT_ENOUGH_BROKERS,
    PARTITION_DECREASE,
    SOURCES_CAP,
    TOO_MANY_NEW_PARTITIONS,
    TOPIC_GRACE,
    TRANSITIONS,
    UNKNOWN_TOPIC,
    WAITING_FOR_TOPIC,
    BrokerLoad,
    Decision,
    Growth,
    Intent,
    KeySample,
    Memory,
    Need,
    Observation,
    Phase,
    Placement,
    refused,
    report_sources,
    sample_refused,
)
from kpo.resources.topic_partition_count.lifecycle import decide as decide_at

T = "orders"
BROKERS = {1: Broker(1, "rack-a"), 2: Broker(2, "rack-b"), 3: Broker(3, "rack-c")}
EVEN = BrokerLoad(replicas={1: 4, 2: 4, 3: 4}, leaders={1: 2, 2: 2, 3: 2})
NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def decide(intent: Intent, memory: Memory, observed: Observation, now: dt.datetime = NOW) -> Decision:
    return decide_at(intent, memory, observed, now)


def topic(count: int, rf: int = 2, leaderless: tuple[int, ...] = ()) -> dict[int, PartitionState]:
    out = {}
    for p in range(count):
        replicas = tuple(1 + (p + i) % 3 for i in range(rf))
        out[p] = PartitionState(replicas, -1 if p in leaderless else replicas[0], replicas)
    return out


def intent(partitions: int, generation: int = 1, **kwargs: object) -> Intent:
    return Intent(generation=generation, topic=T, partitions=partitions, **kwargs)  # type: ignore[arg-type]


def observe(current: dict[int, PartitionState] | None, load: BrokerLoad | None = EVEN,
            sample: KeySample | None = None, brokers: dict[int, Broker] = BROKERS) -> Observation:
    return Observation(brokers=brokers, topic=current, load=load, sample=sample)


def conditions(decision: Decision) -> dict[str, bool]:
    return {c.type: c.status for c in decision.conditions}


def growing(requested: int, generation: int = 1) -> Memory:
    return Memory(phase=Phase.GROWING, observed_generation=generation, reason="Growing", requested=requested)


def test_every_phase_has_a_transition_map() -> None:
    assert set(TRANSITIONS) == set(Phase)


# ------------------------------------------------------------------------------------------------------- Pending


def test_pending_waits_for_a_missing_topic_and_remembers_since_when() -> None:
    d = decide(intent(12), Memory(), observe(None))
    assert d.phase is Phase.PENDING and d.reason == WAITING_FOR_TOPIC and d.grow is None
    assert d.topic_missing_since == NOW and "does not exist yet" in d.message
    assert conditions(d) == {"Ready": False, "Progressing": True, "Stalled": False}
    assert [e.type for e in d.events] == ["Normal"]
    memory = Memory(observed_generation=1, reason=WAITING_FOR_TOPIC, topic_missing_since=NOW)
    later = decide(intent(12), memory, observe(None), NOW + TOPIC_GRACE - dt.timedelta(seconds=1))
    assert later.phase is Phase.PENDING and later.topic_missing_since == NOW and later.events == ()


def test_pending_goes_on_when_a_topic_it_waited_for_appears() -> None:
    memory = Memory(observed_generation=1, reason=WAITING_FOR_TOPIC, topic_missing_since=NOW)
    d = decide(intent(4), memory, observe(topic(6)), NOW + dt.timedelta(seconds=2))
    assert d.phase is Phase.INVALID and d.reason == PARTITION_DECREASE and d.topic_missing_since is None


def test_a_spec_change_starts_the_wait_for_a_missing_topic_again() -> None:
    old = NOW - 10 * TOPIC_GRACE
    memory = Memory(observed_generation=1, reason=WAITING_FOR_TOPIC, topic_missing_since=old)
    d = decide(intent(12, generation=2), memory, observe(None))
    assert d.phase is Phase.PENDING and d.topic_missing_since == NOW


def test_pending_to_invalid_for_a_missing_topic_sends_nothing() -> None:
    memory = Memory(observed_generation=1, reason=WAITING_FOR_TOPIC, topic_missing_since=NOW - TOPIC_GRACE)
    d = decide(intent(12), memory, observe(None))
    assert d.phase is Phase.INVALID and d.reason == UNKNOWN_TOPIC and d.grow is None
    assert "does not exist" in d.message
    assert conditions(d) == {"Ready": False, "Progressing": False, "Stalled": True}
    assert d.events[-1].type == "Warning" and d.events[-1].message.startswith("Pending -> Invalid")


def test_pending_to_invalid_for_a_decrease() -> None:
    d = decide(intent(4), Memory(), observe(topic(6)))
    assert d.phase is Phase.INVALID and d.reason == PARTITION_DECREASE and d.grow is None
    assert "Kafka cannot remove partitions" in d.message and d.current == 6
    assert d.report is None


@pytest.mark.parametrize("wanted", [6 + MAX_NEW_PARTITIONS + 1, 20_000_001, 2**31 - 1])
def test_pending_to_invalid_when_kafka_could_not_add_that_many_in_one_request(wanted: int) -> None:
    # Asks for neither a key sample nor broker load: both would work per new partition.
    d = decide(intent(wanted, sample_messages=1000), Memory(), observe(topic(6), load=None))
    assert d.phase is Phase.INVALID and d.reason == TOO_MANY_NEW_PARTITIONS and d.grow is None and not d.needs
    assert f"at most {6 + MAX_NEW_PARTITIONS}" in d.message and "nothing was sent" in d.message
    assert d.report is not None and d.report.new_partitions == wanted
    assert d.events[-1].type == "Warning"


def test_pending_grows_by_exactly_the_most_kafka_adds_in_one_request() -> None:
    d = decide(intent(6 + MAX_NEW_PARTITIONS, require_multiple=False), Memory(), observe(topic(6)))
    assert d.phase is Phase.GROWING and d.grow is not None and len(d.grow.assignment or ()) == MAX_NEW_PARTITIONS


def test_pending_to_succeeded_without_a_request_when_the_count_is_reached() -> None:
    d = decide(intent(6), Memory(), observe(topic(6), load=None))
    assert d.phase is Phase.SUCCEEDED and d.grow is None and not d.needs
    assert d.report is not None and d.report.remapped_fraction == 0
    assert conditions(d)["Ready"] is True


def test_pending_to_invalid_when_the_guard_refuses_a_non_multiple() -> None:
    d = decide(intent(8), Memory(), observe(topic(6)))
    assert d.phase is Phase.INVALID and d.reason == KEY_ORDERING_GUARD and d.grow is None
    assert "6 -> 8" in d.message and "3/4" in d.message and "12" in d.message and "policy: Allow" in d.message
    assert d.report is not None and d.report.remapped_fraction == Fraction(3, 4), "the report shows what it would do"


def test_pending_to_growing_when_the_guard_is_overridden() -> None:
    d = decide(intent(8, require_multiple=False), Memory(), observe(topic(6)))
    assert d.phase is Phase.GROWING and d.grow is not None and d.grow.total == 8


def test_pending_asks_for_broker_load_before_a_balanced_placement() -> None:
    d = decide(intent(12), Memory(), observe(topic(6), load=None))
    assert d.needs == {Need.BROKER_LOAD} and d.grow is None and not d.events


def test_pending_to_growing_places_new_partitions_evenly_and_rack_aware() -> None:
    d = decide(intent(12), Memory(), observe(topic(6)))
    assert d.phase is Phase.GROWING and d.grow is not None
    assignment = d.grow.assignment
    assert assignment is not None and len(assignment) == 6
    per_broker = Counter(b for replicas in assignment for b in replicas)
    assert sorted(per_broker.values()) == [4, 4, 4]
    assert sorted(Counter(r[0] for r in assignment).values()) == [2, 2, 2]
    racks = [{BROKERS[b].rack for b in replicas} for replicas in assignment]
    assert all(len(r) == 2 for r in racks)
    assert d.report is not None and d.report.remapped_fraction == Fraction(1, 2)
    assert "6 to 12" in d.message and "1/2" in d.message
    assert d.events[-1].message.startswith("Pending -> Growing")


def test_pending_to_growing_fills_the_least_loaded_broker_first() -> None:
    load = BrokerLoad(replicas={1: 10, 2: 2, 3: 2}, leaders={1: 5, 2: 1, 3: 1})
    d = decide(intent(7, require_multiple=False), Memory(), observe(topic(6), load=load))
    assert d.grow is not None and d.grow.assignment is not None
    assert 1 not in d.grow.assignment[0]


def test_pending_to_growing_with_explicit_assignments_as_given() -> None:
    placement = Placement(balanced=False, assignments=((3, 1), (1, 2), (2, 3)))
    d = decide(intent(6, placement=placement), Memory(), observe(topic(3), load=None))
    assert d.phase is Phase.GROWING and not d.needs
    assert d.grow == Growth(T, 6, ((3, 1), (1, 2), (2, 3)))


@pytest.mark.parametrize(("assignments", "reason"), [
    (((3, 1), (1, 2)), "AssignmentCountMismatch"),
    (((3, 1, 2), (1, 2, 3), (2, 3, 1)), "ReplicationFactorMismatch"),
    (((3, 9), (1, 2), (2, 3)), "UnknownBroker"),
])
def test_pending_to_invalid_for_explicit_assignments_that_do_not_fit(assignments: tuple[tuple[int, ...], ...],
                                                                     reason: str) -> None:
    d = decide(intent(6, placement=Placement(balanced=False, assignments=assignments)), Memory(),
               observe(topic(3), load=None))
    assert d.phase is Phase.INVALID and d.reason == reason and d.grow is None
    assert "spec.placement.assignments" in d.message


def test_pending_stays_pending_stalled_without_enough_live_brokers() -> None:
    d = decide(intent(6), Memory(), observe(topic(3, rf=3), brokers={1: BROKERS[1], 2: BROKERS[2]}))
    assert d.phase is Phase.PENDING and d.reason == NOT_ENOUGH_BROKERS and d.grow is None
    assert conditions(d) == {"Ready": False, "Progressing": False, "Stalled": True}
    assert d.events and d.events[0].type == "Warning"
    again = decide(intent(6), Memory(reason=NOT_ENOUGH_BROKERS, observed_generation=1),
                   observe(topic(3, rf=3), brokers={1: BROKERS[1], 2: BROKERS[2]}))
    assert again.phase is Phase.PENDING and not again.events, "said once, not on every tick"


def test_pending_asks_for_a_key_sample_when_asked_to_sample() -> None:
    d = decide(intent(12, sample_messages=1000), Memory(), observe(topic(6)))
    assert d.needs == {Need.KEY_SAMPLE}
    sample = KeySample({(False,): 400, (True,): 600})
    d = decide(intent(12, sample_messages=1000), Memory(), observe(topic(6), sample=sample))
    assert d.phase is Phase.GROWING and d.sample == sample


def test_pending_to_failed_when_kafka_refuses_create_partitions() -> None:
    d = decide(intent(12), Memory(), observe(topic(6)))
    failed = refused(Memory(), d, KafkaRefusal("INVALID_REPLICA_ASSIGNMENT", "broker 7 is not registered"))
    assert failed.phase is Phase.FAILED and failed.reason == KAFKA_REFUSED
    assert "INVALID_REPLICA_ASSIGNMENT" in failed.message and "6 -> 12" in failed.message
    assert conditions(failed) == {"Ready": False, "Progressing": False, "Stalled": True}
    assert [e.message.split(":")[0] for e in failed.events] == ["Pending -> Failed"]
    assert failed.report is not None, "the report of the refused change stays"


def test_pending_to_failed_when_kafka_refuses_the_key_sample() -> None:
    failed = sample_refused(intent(12, sample_messages=10), Memory(), KafkaRefusal("TOPIC_AUTHORIZATION_FAILED"))
    assert failed.phase is Phase.FAILED and "READ" in failed.message and "sampleMessages" in failed.message


# ------------------------------------------------------------------------------------------------------- Growing


def test_growing_stays_growing_until_the_new_partitions_are_visible() -> None:
    d = decide(intent(12), growing(12), observe(topic(6), load=None))
    assert d.phase is Phase.GROWING and d.grow is None and "6 of 12" in d.message and not d.events


def test_growing_stays_growing_until_every_partition_has_a_leader() -> None:
    d = decide(intent(12), growing(12), observe(topic(12, leaderless=(7, 9)), load=None))
    assert d.phase is Phase.GROWING and "[7, 9]" in d.message


def test_growing_to_succeeded() -> None:
    d = decide(intent(12), growing(12), observe(topic(12), load=None))
    assert d.phase is Phase.SUCCEEDED and d.current == 12 and d.grow is None
    assert conditions(d) == {"Ready": True, "Progressing": False, "Stalled": False}
    assert d.events[-1].message.startswith("Growing -> Succeeded")


def test_growing_to_failed_when_the_topic_is_deleted() -> None:
    d = decide(intent(12), growing(12), observe(None))
    assert d.phase is Phase.FAILED and "deleted" in d.message


def test_growing_to_growing_again_for_a_larger_count_asked_meanwhile() -> None:
    d = decide(intent(24, generation=2), growing(12), observe(topic(12)))
    assert d.phase is Phase.GROWING and d.grow is not None and d.grow.total == 24


def test_growing_waits_for_the_first_growth_before_acting_on_a_changed_spec() -> None:
    d = decide(intent(24, generation=2), growing(12), observe(topic(6)))
    assert d.phase is Phase.GROWING and d.grow is None


def test_growing_to_invalid_when_the_spec_changed_to_a_decrease() -> None:
    d = decide(intent(8, generation=2), growing(12), observe(topic(12)))
    assert d.phase is Phase.INVALID and d.reason == PARTITION_DECREASE


def test_growing_to_pending_when_the_changed_spec_cannot_be_placed_yet() -> None:
    d = decide(intent(6, generation=2), growing(3), observe(topic(3, rf=3), brokers={1: BROKERS[1]}))
    assert d.phase is Phase.PENDING and d.reason == NOT_ENOUGH_BROKERS


# ------------------------------------------------------------------------------------------- terminal phases


@pytest.mark.parametrize("phase", [Phase.SUCCEEDED, Phase.FAILED, Phase.INVALID])
def test_terminal_phase_is_idle_for_its_generation(phase: Phase) -> None:
    d = decide(intent(12), Memory(phase=phase, observed_generation=1), observe(topic(6)))
    assert d.idle and d.grow is None


@pytest.mark.parametrize("phase", [Phase.SUCCEEDED, Phase.FAILED, Phase.INVALID])
def test_terminal_phase_to_pending_on_a_spec_change(phase: Phase) -> None:
    d = decide(intent(12, generation=2), Memory(phase=phase, observed_generation=1), observe(topic(6)))
    assert d.phase is Phase.GROWING and d.grow is not None
    assert d.events[-1].message.startswith(f"{phase.value} -> Growing")


# ------------------------------------------------------------------------------------------------- the report


def test_sources_for_a_doubling_name_one_old_partition_each() -> None:
    assert report_sources(remap_report(6, 12)) == [(p, (p - 6,)) for p in range(6, 12)]


def test_sources_for_6_to_8_list_every_feeder_of_each_receiving_partition() -> None:
    assert report_sources(remap_report(6, 8)) == [(0, (0, 2, 4)), (1, (1, 3, 5)), (2, (0, 2, 4)), (3, (1, 3, 5)),
                                                  (4, (0, 2, 4)), (5, (1, 3, 5)), (6, (0, 2, 4)), (7, (1, 3, 5))]


def test_sources_are_capped() -> None:
    sources = report_sources(remap_report(999, 1000))
    assert len(sources) == SOURCES_CAP and all(len(feeding) == SOURCES_CAP for _, feeding in sources)


def test_key_sample_counts_moved_messages() -> None:
    sample = KeySample({(False,): 5, (True,): 5})
    assert (sample.messages, sample.moved, sample.moved_fraction) == (10, 5, Fraction(1, 2))
    assert KeySample().moved_fraction is None
