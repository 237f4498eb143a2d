"""KIP-1066 cordons of a RemoveBrokers drain: the pure rules (:mod:`kpo.domain.cordon`) and where a tick sets and
takes them back (:mod:`kpo.resources.partition_reassignment.cordoning`), on the recording fake cluster."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kpo.domain import cordon as rules
from kpo.domain.cordon import CORDONED_LOG_DIRS, CordonJournal
from kpo.domain.model import Replicas, TopicPartition
from kpo.domain.throttle import ConfigChange
from kpo.resources.outcomes import Inputs, Outcome
from kpo.resources.partition_reassignment import reconciler
from kpo.resources.partition_reassignment.lifecycle import Intent, Memory, Phase
from test_partition_reassignment_tick import NOW, Recording, moving

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)

# ------------------------------------------------------------------------------------------------ the rules


def test_the_journal_records_what_each_broker_had_and_skips_one_cordoned_by_someone_else() -> None:
    configs = {4: {CORDONED_LOG_DIRS: "/data/a"}, 5: {CORDONED_LOG_DIRS: "*"}}
    mine = rules.journal({3, 4, 5}, CordonJournal(), configs, [])
    assert mine.previous == {3: "", 4: "/data/a"}


def test_a_broker_another_resource_holds_is_journaled_with_its_value_so_the_last_to_let_go_restores_it() -> None:
    other = CordonJournal({4: "/data/a"})
    mine = rules.journal({4}, CordonJournal(), {4: {CORDONED_LOG_DIRS: "*"}}, [other])
    assert mine.previous == {4: "/data/a"}
    assert rules.release_changes(mine, 4, [other]) == [], "the other still drains it"
    assert rules.release_changes(mine, 4, []) == [ConfigChange("broker", "4", CORDONED_LOG_DIRS, "SET", "/data/a")]


def test_taking_a_cordon_back_deletes_the_config_when_there_was_none() -> None:
    assert rules.release_changes(CordonJournal({4: ""}), 4, []) == [
        ConfigChange("broker", "4", CORDONED_LOG_DIRS, "DELETE")]


def test_only_brokers_not_cordoned_entirely_yet_are_set() -> None:
    mine = CordonJournal({3: "", 4: "/data/a"})
    assert rules.cordon_changes(mine, {3: {CORDONED_LOG_DIRS: "*"}}) == [
        ConfigChange("broker", "4", CORDONED_LOG_DIRS, "SET", "*")]


def test_cordons_need_metadata_version_4_3_iv0() -> None:
    assert rules.unavailable(30) is None and rules.unavailable(31) is None
    reason = rules.unavailable(27)
    assert reason is not None and "level 27 is below 30" in reason
    assert rules.unavailable(None) is not None


def test_the_journal_survives_its_json() -> None:
    mine = CordonJournal({4: "", 5: "/data/b"})
    assert CordonJournal.from_json(mine.to_json()) == mine
    assert CordonJournal.from_json(None).empty


# ------------------------------------------------------------------------------------------------ the tick


class Cordoning(Recording):
    """The recording fake with the cordon journal port; ``others`` are the journals other resources hold."""

    def __init__(self, replicas: dict[TopicPartition, Replicas], **kwargs: Any) -> None:
        super().__init__(replicas, **kwargs)
        self.cordon_journal = CordonJournal()
        self.others: list[CordonJournal] = []

    def ports(self) -> reconciler.Ports:
        def save_cordon(journal: CordonJournal) -> None:
            self.log.append("save cordon journal")
            self.cordon_journal = journal

        return replace(super().ports(), load_cordon=lambda: self.cordon_journal, save_cordon=save_cordon,
                       others_cordons=lambda: list(self.others))


#: The memory of the drain's first tick: both moves in flight.
IN_FLIGHT = Memory(phase=Phase.EXECUTING, observed_generation=1, owned={P0: (1, 2), P1: (2, 1)},
                   originals={P0: (4, 2), P1: (2, 4)})


def drain(generation: int = 1, **flags: Any) -> Intent:
    """Broker 4 drained: every replica on it moves to broker 1."""
    return moving({P0: (1, 2), P1: (2, 1)}, generation=generation, cordon=frozenset({4}), **flags)


def run(cluster: Cordoning, intent: Intent, memory: Memory, status: dict[str, Any] | None = None) -> Outcome[Any]:
    body = {"metadata": {"namespace": "ns", "name": "drain"}, "status": status or {}}
    outcome = reconciler.tick(Inputs(body, intent, memory, NOW), cluster.ports())
    assert outcome is not None
    return outcome


def reasons(outcome: Outcome[Any]) -> list[str]:
    return [e.reason for e in outcome.events]


def test_the_drained_broker_is_journaled_then_cordoned_before_any_move_is_sent() -> None:
    cluster = Cordoning({P0: (4, 2), P1: (2, 4)})
    outcome = run(cluster, drain(), Memory())
    writes = cluster.writes()
    assert writes.index("save cordon journal") < writes.index("set broker 4") < writes.index(
        "submit orders-0,orders-1"), writes
    assert cluster.cordoned == {4: "*"}
    assert outcome.status["cordon"] == {"brokers": [{"broker": 4, "previous": ""}]}
    assert "Cordoned" in reasons(outcome)


def test_a_drain_that_succeeded_keeps_its_cordon_and_rests() -> None:
    cluster = Cordoning({P0: (4, 2), P1: (2, 4)})
    first = run(cluster, drain(), Memory())
    cluster.finish_moves()
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, owned={P0: (1, 2), P1: (2, 1)},
                    originals={P0: (4, 2), P1: (2, 4)})
    done = run(cluster, drain(), memory, first.status)
    assert done.status["phase"] == "Succeeded"
    assert cluster.cordoned == {4: "*"}, "kept until the resource is deleted"
    assert done.status["cordon"]["brokers"] == [{"broker": 4, "previous": ""}]
    assert reconciler.at_rest(1, Memory(phase=Phase.SUCCEEDED, observed_generation=1), done.status)


def test_a_stop_takes_the_cordon_back_and_a_stopped_drain_holding_one_does_not_rest() -> None:
    cluster = Cordoning({P0: (4, 2), P1: (2, 4)})
    first = run(cluster, drain(), Memory())
    assert not reconciler.at_rest(1, Memory(phase=Phase.STOPPED, observed_generation=1), first.status)
    stopped = run(cluster, drain(generation=2, stop=True), IN_FLIGHT, first.status)
    assert stopped.status["phase"] == "Stopping"
    assert cluster.cordoned == {}
    assert "delete broker 4" in cluster.writes()
    assert stopped.status["cordon"] is None, "the field is removed"
    assert "Uncordoned" in reasons(stopped)


def test_the_value_a_broker_had_before_is_restored() -> None:
    cluster = Cordoning({P0: (4, 2), P1: (2, 4)})
    cluster.cordoned[4] = "/data/a"
    first = run(cluster, drain(), Memory())
    assert cluster.cordoned == {4: "*"}
    run(cluster, drain(generation=2, stop=True), IN_FLIGHT, first.status)
    assert cluster.cordoned == {4: "/data/a"}


def test_an_older_cluster_drains_without_a_cordon_and_says_so_once() -> None:
    cluster = Cordoning({P0: (4, 2), P1: (2, 4)})
    cluster.level = 27
    first = run(cluster, drain(), Memory())
    assert cluster.cordoned == {} and "save cordon journal" not in cluster.writes()
    assert "submit orders-0,orders-1" in cluster.writes(), "the drain goes on"
    assert "level 27" in first.status["cordon"]["unavailable"]
    assert reasons(first).count("CordonUnavailable") == 1
    cluster.log.clear()
    memory = Memory(phase=Phase.EXECUTING, observed_generation=1, owned={P0: (1, 2), P1: (2, 1)},
                    originals={P0: (4, 2), P1: (2, 4)})
    again = run(cluster, drain(), memory, first.status)
    assert "CordonUnavailable" not in reasons(again) and "metadata_level" not in cluster.log, "said and asked once"
    assert again.status["cordon"] == first.status["cordon"]


def test_a_broker_another_drain_holds_stays_cordoned_when_this_one_stops() -> None:
    cluster = Cordoning({P0: (4, 2), P1: (2, 4)})
    first = run(cluster, drain(), Memory())
    cluster.others = [CordonJournal({4: ""})]
    stopped = run(cluster, drain(generation=2, stop=True), IN_FLIGHT, first.status)
    assert cluster.cordoned == {4: "*"}, "still drained by the other"
    assert stopped.status["cordon"] is None


def test_deletion_uncordons_the_live_brokers_and_names_those_it_cannot_reach() -> None:
    cluster = Cordoning({P0: (1, 2)})
    cluster.cordoned = {4: "*", 9: "*"}
    holdings = reconciler.Holdings(phase=Phase.SUCCEEDED, owned={}, targets={P0: (1, 2)},
                                   journal=reconciler.ThrottleJournal(), originals_recorded=True,
                                   cordons=CordonJournal({4: "", 9: ""}))
    events = reconciler.release(holdings, cluster.ports())
    assert cluster.cordoned == {9: "*"}, "broker 9 is not in the cluster any more"
    assert [e.reason for e in events] == ["Uncordoned", "CordonLeft"]
    assert "[9]" in events[1].message and "kafka-configs.sh" in events[1].message
    assert cluster.cordon_journal.empty
