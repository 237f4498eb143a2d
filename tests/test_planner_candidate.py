"""The greedy candidate of the planning job (kpo.planning.spark.candidate): which plan is better, and the greedy's facts
taken from the job's own, so that it plays by the same rules. Pure: no Spark session."""

from __future__ import annotations

import pytest

from kpo.domain.greedy import Partition, place
from kpo.domain.plan_contract import BrokerInfo, Goal, PlanRequest
from kpo.planning.spark.candidate import Standing, better, facts_of, standing
from kpo.planning.spark.cluster import Cluster


def test_standing_is_the_lowest_and_highest_broker_over_the_mean() -> None:
    s = standing({1: 50.0, 2: 100.0, 3: 150.0}, bytes_moved=7)
    assert (s.bytes_moved, s.low, s.high) == (7, 0.5, 1.5)
    assert s.outside(0.1) == pytest.approx(0.4 + 0.4)
    assert standing({1: 95.0, 2: 105.0}, 0).outside(0.05) == 0


@pytest.mark.parametrize(("candidate", "incumbent", "wins"), [
    # Inside the band beats outside it, whatever the bytes.
    (Standing(200, 0.96, 1.04), Standing(100, 0.9, 1.1), True),
    (Standing(100, 0.9, 1.1), Standing(200, 0.96, 1.04), False),
    # Both inside: fewer bytes wins; equal bytes keep the incumbent.
    (Standing(90, 0.96, 1.04), Standing(100, 0.99, 1.01), True),
    (Standing(100, 0.99, 1.01), Standing(100, 0.96, 1.04), False),
    # Both outside: closer wins (issue 27's row: 0.980-1.112 against 0.738-1.536), even for more bytes ...
    (Standing(1018, 0.980, 1.112), Standing(760, 0.738, 1.536), True),
    (Standing(760, 0.738, 1.536), Standing(1018, 0.980, 1.112), False),
    # ... and as close (within 0.001): fewer bytes wins.
    (Standing(1195, 0.698, 3.751), Standing(1231, 0.6985, 3.751), True),
    (Standing(1231, 0.6985, 3.751), Standing(1195, 0.698, 3.751), False),
])
def test_better_prefers_the_band_then_fewer_bytes_then_closer(candidate: Standing, incumbent: Standing,
                                                               wins: bool) -> None:
    assert better(candidate, incumbent, 0.05) is wins


def test_the_greedys_facts_are_the_jobs_and_a_dead_brokers_replicas_stay_and_count_in_their_rack() -> None:
    infos = [BrokerInfo(id=1, rack="a"), BrokerInfo(id=2, rack="a", alive=False), BrokerInfo(id=3, rack="b"),
             BrokerInfo(id=4, rack="b"), BrokerInfo(id=5, rack="c")]
    request = PlanRequest(goal=Goal.REBALANCE, tolerance=0.1)
    cluster = Cluster.of(request, infos, [1, 2, 3, 4, 5])
    facts = facts_of(cluster, request)
    assert facts.eligible == {1, 3, 4, 5}
    assert facts.kept_rack_of == {2: "a"}
    assert not facts.drain_dead
    # [2, 3, 5]: broker 2 is dead but a Rebalance leaves it; it still holds rack a's replica, so nothing is forced,
    # and the greedy never puts a second replica in rack a.
    parts = [Partition("t", 0, (2, 3, 5), 100), Partition("t", 1, (1, 4, 5), 10), Partition("t", 2, (1, 3, 5), 10)]
    start = {p.key: list(p.replicas) for p in parts}
    result = place(facts, cluster.racks.keys(), parts, [p.key for p in parts], start)
    assert 2 in result.assignment[("t", 0)]
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c"}
    for replicas in result.assignment.values():
        assert len({racks[b] for b in replicas}) == 3
