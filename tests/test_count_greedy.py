"""The count rounds' finish on the driver (kpo.domain.count_greedy, kpo.planning.spark.finish.count_finish and
deltas): counts brought into their band with the smallest replicas, the byte band and the racks kept, and the
per-broker sums' changes equal to a recount. Pure: no Spark session."""

from __future__ import annotations

from collections import Counter

from kpo.domain.count_greedy import Range, balance_counts
from kpo.domain.greedy import Partition, Setup, Spread
from kpo.domain.plan_contract import BrokerInfo, Goal, PlanRequest
from kpo.planning.spark.cluster import Cluster
from kpo.planning.spark.finish import Row, count_finish, count_sources, deltas
from kpo.planning.spark.rounds import STAT_FIELDS, BrokerStats

RACKS = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def _facts(eligible: frozenset[int] = frozenset(RACKS), rack_of: dict[int, str] | None = None) -> Setup:
    return Setup(alive=frozenset(RACKS), eligible=eligible, removed=frozenset(), balancing=True,
                 rack_of=RACKS if rack_of is None else rack_of, replication_factor=None, tolerance=0.1)


def _crowded() -> list[Partition]:
    """Bytes even (48 a broker), counts not: brokers 1 and 3 hold 8 small partitions (1 byte) where 2, 4, 5 and 6 hold
    one large one (8 bytes) each; 12 replicas on 1 and 3, 5 on the others. Every partition spans two racks."""
    parts = [Partition("even", i, pair, 10) for i, pair in enumerate([(1, 3), (2, 5), (4, 6)] * 4)]
    parts += [Partition("small", i, (1, 3), 1) for i in range(8)]
    parts += [Partition("large", 0, (2, 6), 8), Partition("large", 1, (4, 5), 8)]
    return parts


def _counts(parts: list[Partition], changed: dict[tuple[str, int], tuple[int, ...]]) -> Counter[int]:
    return Counter(b for p in parts for b in changed.get(p.key, p.replicas))


def _bytes(parts: list[Partition], changed: dict[tuple[str, int], tuple[int, ...]]) -> Counter[int]:
    out: Counter[int] = Counter()
    for p in parts:
        for b in changed.get(p.key, p.replicas):
            out[b] += p.size
    return out


def test_counts_come_into_their_band_with_the_smallest_replicas_and_bytes_and_racks_kept() -> None:
    parts = _crowded()
    assert _counts(parts, {}) == {1: 12, 3: 12, 2: 5, 4: 5, 5: 5, 6: 5}
    assert set(_bytes(parts, {}).values()) == {48}
    counts, bytes_band = Range(7, 8), Range(48 * 0.85, 48 * 1.15)

    changed = balance_counts(_facts(), parts, base_count={}, base_bytes={}, counts=counts, bytes_band=bytes_band,
                             max_moves=100)

    after = _counts(parts, changed)
    assert all(counts.lo <= c <= counts.hi for c in after.values()), after
    assert all(bytes_band.lo <= x <= bytes_band.hi for x in _bytes(parts, changed).values())
    assert {k[0] for k in changed} == {"small"}, "only the smallest replicas moved"
    assert sum(a != b for p in parts for a, b in zip(p.replicas, changed.get(p.key, p.replicas), strict=True)) == 8
    spread = Spread(RACKS)
    for p in parts:
        new = changed.get(p.key, p.replicas)
        assert len(set(new)) == len(new) == len(p.replicas)
        assert spread.uneven(new) == 0, (p.key, new)


def test_the_base_counts_of_partitions_not_handed_over_are_respected() -> None:
    """Only broker 1's partitions are handed over; the others count through base values (were those missing, the
    greedy would see them nearly empty and give them everything)."""
    parts = [Partition("p", i, (1,), 1) for i in range(6)]
    base_count = {1: 0, 2: 3, 3: 3, 4: 3, 5: 3, 6: 0}
    facts = _facts(rack_of={})
    changed = balance_counts(facts, parts, base_count=base_count, base_bytes=dict.fromkeys(RACKS, 0),
                             counts=Range(3, 3), bytes_band=Range(0, 100), max_moves=100)
    after = Counter(base_count)
    for p in parts:
        for b in changed.get(p.key, p.replicas):
            after[b] += 1
    assert dict(after) == dict.fromkeys(RACKS, 3)


def test_it_stops_when_no_single_move_helps_and_moves_nothing_it_may_not() -> None:
    # Broker 6 takes no part: it neither receives nor gives, however many replicas it holds. Six replicas on five
    # brokers cannot all reach two: the greedy evens what it can and stops.
    parts = [Partition("p", i, (6, 1), 1) for i in range(6)]
    facts = _facts(eligible=frozenset({1, 2, 3, 4, 5}), rack_of={})
    changed = balance_counts(facts, parts, base_count={}, base_bytes={}, counts=Range(2, 3),
                             bytes_band=Range(0, 100), max_moves=100)
    assert all(new[0] == 6 for new in changed.values())
    assert sorted(Counter(changed.get(p.key, p.replicas)[1] for p in parts).values()) == [1, 1, 1, 1, 2]
    # A byte band no move keeps (broker 1 exactly on it, the others below): nothing moves at all.
    assert balance_counts(facts, parts, base_count={}, base_bytes={}, counts=Range(2, 3), bytes_band=Range(6, 6),
                          max_moves=100) == {}


def test_a_broker_outside_the_byte_band_is_never_taken_further_from_it() -> None:
    # Broker 1 holds the fewest replicas but is above the byte band: it takes nothing; broker 3 takes one instead.
    parts = [Partition("p", i, (2,), 1) for i in range(5)]
    parts += [Partition("q", i, (3,), 1) for i in range(3)] + [Partition("big", 0, (1,), 20)]
    facts = _facts(eligible=frozenset({1, 2, 3}), rack_of={})
    changed = balance_counts(facts, parts, base_count={}, base_bytes={}, counts=Range(2, 4),
                             bytes_band=Range(3, 10), max_moves=100)
    assert all(1 not in new for new in changed.values())
    assert list(changed.values()) == [(3,)]


REQUEST = PlanRequest(goal=Goal.REBALANCE, tolerance=0.1)


def _cluster() -> Cluster:
    return Cluster.of(REQUEST, [BrokerInfo(id=b, rack=r) for b, r in RACKS.items()], list(RACKS))


def _stats(rows: list[Row]) -> dict[int | None, BrokerStats]:
    sums: dict[int, dict[str, int]] = {b: dict.fromkeys(STAT_FIELDS, 0) for b in RACKS}
    for r in rows:
        for slot, b in enumerate(r.replicas):
            movable = slot < len(r.original) and r.original[slot] == b
            s = sums[b]
            s["bytes"] += r.size
            s["replicas"] += 1
            s["leaders"] += slot == 0
            s["movable_bytes"] += r.size * movable
            s["movable_replicas"] += movable
    return {b: BrokerStats(broker=b, **s) for b, s in sums.items()}


def test_the_finish_deltas_equal_a_recount_of_the_changed_rows() -> None:
    rows = [Row(p.topic, p.partition, p.size, p.replicas, original=p.replicas) for p in _crowded()]
    # One partition moved by an earlier round: its slot 1 is no longer movable, and moving it back makes it so again.
    rows[0] = Row("small", 0, 1, (1, 4), original=(1, 3))
    stats = _stats(rows)
    assert count_sources(stats, _cluster(), REQUEST.tolerance)
    targets = count_finish(rows, stats, _cluster(), REQUEST) | {("small", 0): (2, 3)}
    after = [Row(r.topic, r.partition, r.size, targets.get((r.topic, r.partition), r.replicas), original=r.original)
             for r in rows]
    expected = _stats(after)
    changes = deltas(rows, targets, _cluster())
    for b in RACKS:
        got = {f: getattr(stats[b], f) + (getattr(changes[b], f) if b in changes else 0) for f in STAT_FIELDS}
        assert got == {f: getattr(expected[b], f) for f in STAT_FIELDS}, b
