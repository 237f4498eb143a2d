"""Small Spark column builders shared by the transforms: driver-side dictionaries as literal columns, and a
deterministic pseudo-random number per row.

Per-broker facts (quotas, racks, capacities) are a few hundred entries, so they travel inside the query as literals
instead of as joined tables: every row looks its broker up in place, with no shuffle and no join. Broker and rack ids
are small integers in practice, so a :class:`Table` is a dense array indexed by id (one step per lookup, generated
code, where a literal map would be scanned entry by entry); ids too large for that fall back to a literal map. The
array is built from one JSON literal, which Spark folds into a constant once per query.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

_MANTISSA = 2**53
DENSE_LIMIT = 1 << 16  # largest id a dense table covers
DENSE_PAIRS = 1 << 18  # largest (max id + 1)^2 a dense table of pairs covers


@dataclass(frozen=True)
class Table:
    """An id -> value lookup as one literal column; ``table[key]`` is null for an id it does not hold."""

    column: Column
    dense: bool

    def __getitem__(self, key: Column) -> Column:
        if self.dense:
            return F.when(key >= 0, F.try_element_at(self.column, key + 1))
        return F.try_element_at(self.column, key)

    def has(self, key: Column) -> Column:
        """For a table of flags (:func:`members`): whether ``key`` is in it, never null."""
        return F.coalesce(self[key], F.lit(False))


def _dense_json(values: Mapping[int, object]) -> str:
    return json.dumps([values.get(i) for i in range(max(values) + 1)])


def table(values: Mapping[int, object], value_type: str) -> Table:
    """``values`` as a :class:`Table` of ``value_type`` (a Spark SQL type: double, int, array<double>, ...)."""
    if values and min(values) >= 0 and max(values) < DENSE_LIMIT:
        return Table(F.from_json(F.lit(_dense_json(values)), f"array<{value_type}>"), dense=True)
    if value_type.startswith("array<"):
        return Table(array_map({k: list(v) for k, v in values.items()},  # type: ignore[call-overload]
                               value_type[len("array<"):-1]), dense=False)
    return Table(int_map(values, value_type), dense=False)  # type: ignore[arg-type]


def members(ids: Iterable[int]) -> Table:
    """A set of ids as a :class:`Table` of flags; test with ``.has(key)``."""
    return table(dict.fromkeys(ids, True), "boolean")


def pair_table(values: Mapping[tuple[int, int], float]) -> Callable[[Column, Column], Column]:
    """``(a, b) -> value`` lookups: a dense matrix for small ids, a map keyed by ``a * 2^32 + b`` otherwise."""
    top = max((max(a, b) for a, b in values), default=0) + 1
    if values and min(min(a, b) for a, b in values) >= 0 and top * top <= DENSE_PAIRS:
        rows: dict[int, list[float | None]] = {}
        for (a, b), v in values.items():
            rows.setdefault(a, [None] * top)[b] = v
        matrix = table(rows, "array<double>")
        return lambda a, b: F.when(b >= 0, F.try_element_at(matrix[a], b + 1))
    keyed = int_map({a * (1 << 32) + b: v for (a, b), v in values.items()}, key_type="long")
    return lambda a, b: F.try_element_at(keyed, a.cast("long") * (1 << 32) + b)


def int_array(values: Iterable[int]) -> Column:
    items = [F.lit(int(v)) for v in values]
    return F.array(*items) if items else F.array().cast("array<int>")


def int_map(values: Mapping[int, float], value_type: str = "double", key_type: str = "int") -> Column:
    """``map<key_type, value_type>``; look entries up with ``F.try_element_at`` (a missing key is null)."""
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


def uniform(*keys: Column) -> Column:
    """A number in (0, 1) that depends only on ``keys``: reruns and backends give the same plan."""
    return (F.pmod(F.xxhash64(*keys), F.lit(_MANTISSA)) + 1) / F.lit(float(_MANTISSA + 2))
