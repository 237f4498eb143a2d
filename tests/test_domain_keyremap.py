"""KIP-253 key-remap maths: closed forms against brute force over the hash period, and against real murmur2 hashes."""

from __future__ import annotations

import itertools
import random
import tracemalloc
from fractions import Fraction
from math import lcm

import pytest
from kafka.partitioner.default import murmur2

from kpo.domain.keyremap import (
    new_partitions_fed_by,
    old_partitions_feeding,
    remap_report,
    remapped_fraction,
    remapped_fraction_by_count,
    remapped_fraction_of_hash_range,
)

COUNTS = range(1, 65)


def test_doubling_moves_exactly_half_and_each_new_partition_has_one_source() -> None:
    for old in (1, 3, 6, 17, 64):
        report = remap_report(old, 2 * old)
        assert report.remapped_fraction == Fraction(1, 2)
        assert report.single_source
        assert [tuple(report.feeders(p)) for p in range(2 * old)] == [(p % old,) for p in range(2 * old)]


def test_six_to_eight_and_six_to_twelve() -> None:
    assert remapped_fraction(6, 8) == Fraction(3, 4)
    assert remapped_fraction(6, 12) == Fraction(1, 2)
    assert [tuple(remap_report(6, 8).feeders(p)) for p in range(8)] == [(0, 2, 4) if p % 2 == 0 else (1, 3, 5)
                                                                      for p in range(8)]
    assert not remap_report(6, 8).single_source


def test_same_count_moves_nothing_and_coprime_counts_move_almost_everything() -> None:
    assert remapped_fraction(7, 7) == 0
    assert remapped_fraction(4, 5) == Fraction(4 * 5 - 4, 4 * 5)


def test_closed_form_equals_the_count_over_the_period_for_all_counts_up_to_64() -> None:
    for old in COUNTS:
        for new in COUNTS:
            assert remapped_fraction(old, new) == remapped_fraction_by_count(old, new), (old, new)


def test_sources_and_destinations_equal_brute_force_for_all_counts_up_to_64() -> None:
    for old in COUNTS:
        for new in COUNTS:
            sources: list[set[int]] = [set() for _ in range(new)]
            destinations: list[set[int]] = [set() for _ in range(old)]
            for h in range(lcm(old, new)):
                sources[h % new].add(h % old)
                destinations[h % old].add(h % new)
            assert [set(old_partitions_feeding(old, new, p)) for p in range(new)] == sources, (old, new)
            assert [set(new_partitions_fed_by(old, new, p)) for p in range(old)] == destinations, (old, new)


def test_the_full_hash_range_differs_from_the_period_by_less_than_one_period() -> None:
    assert remapped_fraction_of_hash_range(4, 8) == Fraction(1, 2)  # 8 divides 2**31: the range is whole periods
    for old, new in ((6, 8), (6, 12), (7, 9), (10, 64), (3, 5)):
        difference = abs(remapped_fraction_of_hash_range(old, new) - remapped_fraction(old, new))
        assert difference < Fraction(lcm(old, new), 2**31)
    assert remapped_fraction_of_hash_range(6, 8) != remapped_fraction(6, 8)


@pytest.mark.parametrize(("old", "new"), [(6, 8), (6, 12), (5, 7)])
def test_real_murmur2_hashes_of_random_keys_agree_with_the_exact_fraction(old: int, new: int) -> None:
    rng = random.Random(253)
    keys = [rng.randbytes(rng.randint(1, 24)) for _ in range(20_000)]
    hashes = [murmur2(key) & 0x7FFFFFFF for key in keys]
    observed = sum(1 for h in hashes if h % old != h % new) / len(hashes)
    expected = float(remapped_fraction(old, new))
    # Binomial standard deviation for 20,000 keys is at most 0.0036; five of them is a false alarm once in 10**6.
    assert abs(observed - expected) < 5 * (expected * (1 - expected) / len(hashes)) ** 0.5 + 1e-9
    for h in hashes:
        assert h % old in old_partitions_feeding(old, new, h % new)


@pytest.mark.parametrize(("old", "new", "partition"), [(0, 4, 0), (4, 0, 0), (4, 8, 8), (4, 8, -1)])
def test_invalid_counts_and_partitions_are_refused(old: int, new: int, partition: int) -> None:
    with pytest.raises(ValueError):
        old_partitions_feeding(old, new, partition)


def test_receiving_partitions_are_those_fed_by_another_old_partition() -> None:
    for old in range(1, 25):
        for new in range(old, 50):
            report = remap_report(old, new)
            by_definition = [p for p in range(new) if old_partitions_feeding(old, new, p) != (p,)]
            assert list(report.receiving()) == by_definition, (old, new)
            assert report.single_source == all(len(report.feeders(p)) == 1 for p in range(new)), (old, new)


def test_a_huge_count_costs_no_memory() -> None:
    """The report is arithmetic on N and M: growing to 2**31 - 1 partitions allocates nothing per partition."""
    tracemalloc.start()
    try:
        for new in (20_000_001, 2**31 - 1):
            report = remap_report(6, new)
            fraction = report.remapped_fraction
            receivers = list(itertools.islice(report.receiving(), 64))
            feeders = report.feeders(new - 1)
            assert len(receivers) == 64 and len(feeders) in (1, 2, 3, 6)
            assert 0 < fraction < 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000, f"{peak} bytes"
