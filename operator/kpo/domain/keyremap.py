"""How many keys change partition when a topic grows from N to M partitions (KIP-253).

Kafka's default partitioner sends a keyed record to `(murmur2(key) & 0x7fffffff) % N`. Growing the topic to M
partitions sends the same key to `h % M` from then on, so every key whose hash has `h % N != h % M` lands in another
partition and loses its ordering with the records written before. Topic owners need that figure before they grow a
topic, and the ordering guard needs to know which old partitions feed each new one.

The maths only depend on `h` modulo lcm(N, M): over one such period `h % N == h % M` holds exactly when `h` is below
min(N, M) (both residues then equal `h`, and by the Chinese remainder theorem no other `h` in the period has two equal
residues). Hence the closed form: the fraction of the key space that moves is `1 - min(N, M) / lcm(N, M)`. For M = 2N
that is exactly 1/2, and for 6 -> 8 it is 3/4. The brute-force count over the period is kept alongside as the
definition the closed form is tested against.

New partition p receives the hashes `h ≡ p (mod M)`; their residues modulo N are exactly the old partitions `a` with
`a ≡ p (mod gcd(N, M))`, each contributing the same share. So when M is a multiple of N each new partition is fed by a
single old partition, which is what makes per-key ordering recoverable (consumers can drain the old partition first).

murmur2 itself is not here: the domain imports no Kafka client, and the checks against real keys use kafka-python's
`kafka.partitioner.default.murmur2`, which is byte-for-byte Java's `Utils.murmur2`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from math import gcd, lcm

#: The partitioner masks the hash's sign bit, so hashes are spread over [0, 2**31).
POSITIVE_HASH_VALUES = 2**31


def _check_counts(old_partitions: int, new_partitions: int) -> None:
    if old_partitions < 1 or new_partitions < 1:
        raise ValueError(f"partition counts must be at least 1, got {old_partitions} -> {new_partitions}")


def remapped_fraction(old_partitions: int, new_partitions: int) -> Fraction:
    """The exact fraction of the key space whose partition changes from N to M partitions (closed form)."""
    _check_counts(old_partitions, new_partitions)
    period = lcm(old_partitions, new_partitions)
    return 1 - Fraction(min(old_partitions, new_partitions), period)


def remapped_fraction_by_count(old_partitions: int, new_partitions: int) -> Fraction:
    """The same fraction by definition: count the hashes in one period lcm(N, M) whose partition changes.

    O(lcm(N, M)) time: the definition the closed form is tested against, never called by the operator.
    """
    _check_counts(old_partitions, new_partitions)
    period = lcm(old_partitions, new_partitions)
    moved = sum(1 for h in range(period) if h % old_partitions != h % new_partitions)
    return Fraction(moved, period)


def remapped_fraction_of_hash_range(old_partitions: int, new_partitions: int) -> Fraction:
    """The fraction over all 2**31 hash values rather than one period.

    2**31 is rarely a multiple of lcm(N, M), so the last, partial period makes this differ from `remapped_fraction`
    by less than lcm(N, M) / 2**31; it is the figure for a perfectly uniform hash.
    """
    _check_counts(old_partitions, new_partitions)
    period = lcm(old_partitions, new_partitions)
    unchanged_per_period = min(old_partitions, new_partitions)
    full_periods, rest = divmod(POSITIVE_HASH_VALUES, period)
    unchanged = full_periods * unchanged_per_period + min(rest, unchanged_per_period)
    return 1 - Fraction(unchanged, POSITIVE_HASH_VALUES)


def old_partitions_feeding(old_partitions: int, new_partitions: int, partition: int) -> tuple[int, ...]:
    """The old partitions whose keys go to new `partition`: {h % N : h % M == partition}, each an equal share."""
    return tuple(RemapReport(old_partitions, new_partitions).feeders(partition))


def new_partitions_fed_by(old_partitions: int, new_partitions: int, partition: int) -> tuple[int, ...]:
    """The new partitions that old `partition`'s keys spread over: {h % M : h % N == partition}, in equal shares."""
    _check_counts(old_partitions, new_partitions)
    if not 0 <= partition < old_partitions:
        raise ValueError(f"partition {partition} is not one of the {old_partitions} old partitions")
    step = gcd(old_partitions, new_partitions)
    return tuple(range(partition % step, new_partitions, step))


@dataclass(frozen=True)
class RemapReport:
    """What growing N -> M partitions does to keyed records, as TopicPartitionCount's status reports it.

    Everything in it is arithmetic on N and M, so it holds the two counts and nothing else: M comes from the user
    (``spec.partitions``), and a report that listed the feeders of every new partition would cost memory in
    proportion to it. The feeders of one partition are a ``range``, computed when asked for.
    """

    old_partitions: int
    new_partitions: int

    def __post_init__(self) -> None:
        _check_counts(self.old_partitions, self.new_partitions)

    @property
    def remapped_fraction(self) -> Fraction:
        return remapped_fraction(self.old_partitions, self.new_partitions)

    @property
    def single_source(self) -> bool:
        """True when every new partition takes its keys from exactly one old partition (M a multiple of N)."""
        return self.new_partitions % self.old_partitions == 0

    def feeders(self, partition: int) -> range:
        """The old partitions feeding new ``partition`` (see :func:`old_partitions_feeding`), lazily."""
        if not 0 <= partition < self.new_partitions:
            raise ValueError(f"partition {partition} is not one of the {self.new_partitions} new partitions")
        step = gcd(self.old_partitions, self.new_partitions)
        return range(partition % step, self.old_partitions, step)

    def receiving(self) -> Iterator[int]:
        """The new partitions that take keys from an old partition other than themselves, in order, lazily.

        When N divides M, partitions below N keep exactly their own keys (their only feeder is themselves), so the
        receivers start at N; otherwise every new partition is fed by N / gcd(N, M) >= 2 old ones.
        """
        first = self.old_partitions if self.single_source else 0
        return iter(range(first, self.new_partitions))


def remap_report(old_partitions: int, new_partitions: int) -> RemapReport:
    """The key-remap report for N -> M partitions: O(1) to build, whatever the counts."""
    return RemapReport(old_partitions=old_partitions, new_partitions=new_partitions)
