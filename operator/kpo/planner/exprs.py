"""Small Spark column builders shared by the transforms: driver-side dictionaries as literal columns, and a
deterministic pseudo-random number per row.

Per-broker facts (quotas, racks, capacities) are a few hundred entries, so they travel inside the query as literal
maps and arrays instead of as joined tables: every row looks its broker up in place, with no shuffle and no join.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

_MANTISSA = 2**53


def int_array(values: Iterable[int]) -> Column:
    items = [F.lit(int(v)) for v in values]
    return F.array(*items) if items else F.array().cast("array<int>")


def int_map(values: Mapping[int, float], value_type: str = "double", key_type: str = "int") -> Column:
    """``map<key_type, value_type>``; look entries up with :func:`lookup` (a missing key is null, not an error)."""
    if not values:
        return F.create_map().cast(f"map<{key_type},{value_type}>")
    pairs: list[Column] = []
    for key, value in sorted(values.items()):
        pairs += [F.lit(int(key)).cast(key_type), F.lit(value).cast(value_type)]
    return F.create_map(*pairs)


def array_map(values: Mapping[int, Sequence[float]], element_type: str) -> Column:
    """``map<int, array<element_type>>`` for per-domain lists (brokers of a rack, their cumulative capacities)."""
    if not values:
        return F.create_map().cast(f"map<int,array<{element_type}>>")
    pairs: list[Column] = []
    for key, items in sorted(values.items()):
        pairs += [F.lit(int(key)), F.array(*[F.lit(v).cast(element_type) for v in items])]
    return F.create_map(*pairs)


def lookup(mapping: Column, key: Column) -> Column:
    return F.try_element_at(mapping, key)


def uniform(*keys: Column) -> Column:
    """A number in (0, 1) that depends only on ``keys``: reruns and backends give the same plan."""
    return (F.pmod(F.xxhash64(*keys), F.lit(_MANTISSA)) + 1) / F.lit(float(_MANTISSA + 2))
