"""From the snapshot to the planner's state: which partitions the request may change, and at what replication factor.

A ``ReplicationFactor`` request changes the length of the replica lists before any balancing: a longer list gets
empty slots (replicas to create, placed by the first round like any forced move), a shorter one loses replicas. The
replicas kept are, in order of preference: the current leader, replicas on eligible brokers, in-sync replicas,
replicas in a rack not yet used, and replicas on lightly loaded brokers -- so a decrease also helps the balance.

A partition with no replica on an alive broker is *offline*: no broker could serve a copy of it, so a move of it
would never finish. It is left out of the selection, and counted and named in the metrics instead.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kpo.api.topic_pattern import matching
from kpo.domain.plan_contract import Goal, PlanRequest
from kpo.planning.spark.cluster import Cluster
from kpo.planning.spark.exprs import members, table
from kpo.planning.spark.schemas import STATE_COLUMNS


def selection(request: PlanRequest, partitions: DataFrame) -> Column:
    """Whether the request may change a partition of ``topic``. A pattern matches the whole name.

    Patterns run through RE2 on the distinct topic names, in the driver: Spark's ``rlike`` is Java's backtracking
    engine, which one pattern such as ``(a+)+b`` stalls for minutes, and a cluster has far fewer topics than
    partitions, so the names are a small list while the partitions stay in Spark.
    """
    names: list[str] = []
    if request.topic_pattern or request.exclude_topic_pattern:
        names = [row["topic"] for row in partitions.select("topic").distinct().collect()]
    chosen: Column | None = None
    if request.topics:
        chosen = F.col("topic").isin(list(request.topics))
    if request.topic_pattern:
        matched = F.col("topic").isin(sorted(matching(request.topic_pattern, names)))
        chosen = matched if chosen is None else chosen | matched
    if chosen is None:
        chosen = F.lit(True)
    if request.exclude_topics:
        chosen = chosen & ~F.col("topic").isin(list(request.exclude_topics))
    if request.exclude_topic_pattern:
        chosen = chosen & ~F.col("topic").isin(sorted(matching(request.exclude_topic_pattern, names)))
    return chosen


def offline(cluster: Cluster) -> Column:
    """Whether the row's partition has no replica on an alive broker."""
    alive = members(cluster.alive)
    return ~F.exists("replicas", alive.has)


def offline_partitions(partitions: DataFrame, request: PlanRequest, cluster: Cluster, examples: int = 10
                       ) -> tuple[int, tuple[str, ...]]:
    """How many selected partitions are offline, and the first few of them as ``topic-partition``."""
    found = partitions.filter(selection(request, partitions) & offline(cluster))
    count = found.count()
    first = found.orderBy("topic", "partition").limit(examples).collect() if count else []
    return count, tuple(f"{r['topic']}-{r['partition']}" for r in first)


def _resized(replicas: Column, factor: int, cluster: Cluster, load_share: Mapping[int, float]) -> Column:
    eligible = members(cluster.eligible)
    domain = table(cluster.domain_of, "int")
    share = table(load_share, "double")

    def score(b: Column, i: Column) -> Column:
        outside = ~eligible.has(b)
        repeated_rack = F.exists(F.slice(replicas, 1, i), lambda x: domain[x] == domain[b])
        return (F.when((i == 0) & ~outside, 0.0).otherwise(8.0)
                + F.when(outside, 4.0).otherwise(0.0)
                + F.when(~F.array_contains(F.coalesce(F.col("isr"), F.array()), b), 2.0).otherwise(0.0)
                + F.when(repeated_rack, 1.0).otherwise(0.0)
                + F.coalesce(share[b], F.lit(0.0)) * 0.5)

    ranked = F.array_sort(F.transform(replicas, lambda b, i: F.struct(score(b, i).alias("score"), i.alias("i"),
                                                                      b.alias("b"))))
    kept = F.array_sort(F.transform(F.slice(ranked, 1, factor), lambda s: F.struct(s["i"].alias("i"),
                                                                                      s["b"].alias("b"))))
    shrunk = F.transform(kept, lambda s: s["b"])
    grown = F.concat(replicas, F.array_repeat(F.lit(None).cast("int"), F.lit(factor) - F.size(replicas)))
    return (F.when(F.size(replicas) > factor, shrunk).when(F.size(replicas) < factor, grown)
            .otherwise(replicas))


def to_state(partitions: DataFrame, request: PlanRequest, cluster: Cluster,
             load_share: Mapping[int, float] | None = None) -> DataFrame:
    """The planner's state (``STATE_COLUMNS``); ``load_share`` (broker -> load / heaviest load) guides decreases."""
    selected = selection(request, partitions) & ~offline(cluster)
    replicas = F.col("replicas")
    if request.goal is Goal.REPLICATION_FACTOR and request.replication_factor is not None:
        resized = _resized(replicas, request.replication_factor, cluster, load_share or {})
        replicas = F.when(selected, resized).otherwise(replicas)
    return partitions.select(
        "topic", "partition",
        F.coalesce(F.col("size_bytes"), F.lit(0)).cast("long").alias("size"),
        selected.alias("selected"),
        F.coalesce(F.col("isr"), F.array().cast("array<int>")).alias("isr"),
        F.col("replicas").alias("original"),
        replicas.cast("array<int>").alias("replicas"),
    ).select(*STATE_COLUMNS)


def rack_bound(state: DataFrame, cluster: Cluster, min_rf: int) -> bool:
    """Whether no selected replica can change rack, so that each rack balances on its own (the rounds fill rack by
    rack, and the movement lower bound is the sum of the racks' bounds).

    That needs every selected partition to hold its full share in every rack taking part: as many replicas as the
    racks allow in each (a replication factor that is a multiple of the racks taking part), and no replica outside
    those racks. A replica on a broker that takes no part in a rack of its own (``excludeBrokers``, a ``Rebalance``
    naming other brokers, a dead broker) leaves a rack taking part that the partition does not hold, and its other
    replicas may move there: with brokers 1, 2, 3 in racks a, b, c and broker 3 excluded, ``[1, 3]`` may become
    ``[2, 3]``, and a per-rack bound of 0 would be no bound. Replicas still to be created and replicas on removed
    brokers must move anyway and are placed as forced moves, so they do not open a rack.
    """
    racks = cluster.rack_count
    if not cluster.rack_mode or min_rf < racks:
        return False
    domain = table(cluster.domain_of, "int")
    taking_part = members(cluster.domains)
    removed = members(cluster.removed)
    outside = F.exists("replicas", lambda b: b.isNotNull() & ~removed.has(b) & ~taking_part.has(domain[b]))
    open_rack = F.col("selected") & ((F.size("replicas") % F.lit(racks) != 0) | outside)
    return state.filter(open_rack).limit(1).count() == 0
