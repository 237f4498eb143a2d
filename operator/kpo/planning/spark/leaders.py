"""Leader balance: which replica of a partition comes first, decided after the replicas are placed.

The first replica is the preferred leader. Changing which replica comes first moves no data, so leaders are balanced
last, by reordering. Spark counts, for each pair of brokers, the partitions led by the first that have a follower on
the second able to lead (in sync, or placed by this plan and so in sync once it completes); the driver turns those
counts into a maximum flow from brokers with too many leaders to brokers with too few, through brokers in between
where no direct handover exists (:mod:`kpo.planning.spark.flow`); Spark then picks, for each link, that many partitions
with window functions, and swaps the follower to the front. A second round mops up what collided.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kpo.planning.spark.cluster import Cluster
from kpo.planning.spark.exprs import members, pair_table, uniform
from kpo.planning.spark.rounds import BrokerStats
from kpo.planning.spark.schemas import STATE_COLUMNS


def _first() -> Column:
    return F.element_at("replicas", 1)




def _able_followers(cluster: Cluster) -> Column:
    eligible = members(cluster.eligible - cluster.no_leaders)
    return F.filter(F.slice("replicas", 2, F.size("replicas")), lambda b: b.isNotNull()
                    & eligible.has(b)
                    & (F.array_contains("isr", b) | ~F.array_contains("original", b)))


def leader_links(state: DataFrame, cluster: Cluster) -> dict[tuple[int, int], int]:
    """``(leader, follower) -> partitions``: how many leaderships each broker could hand to each other broker."""
    rows = (state.filter(F.col("selected") & (F.size("replicas") > 1))
            .select(_first().alias("leader"), F.explode(_able_followers(cluster)).alias("follower"))
            .filter(members(cluster.eligible).has(F.col("leader")))
            .groupBy("leader", "follower").count().collect())
    return {(int(r["leader"]), int(r["follower"])): int(r["count"]) for r in rows}


def leader_handovers(state: DataFrame, cluster: Cluster, flows: dict[tuple[int, int], int],
                     round_no: int) -> DataFrame:
    """``topic, partition, leader, successor``: for each link ``(g, t)`` up to ``flows[(g, t)]`` partitions led by ``g``
    whose follower on ``t`` comes first. Each partition draws one of its links, weighted by the link's flow."""
    quota = pair_table({pair: float(f) for pair, f in flows.items()})

    def link(follower: Column) -> Column:
        return quota(F.col("leader"), follower)

    options = F.filter(_able_followers(cluster), lambda b: link(b).isNotNull())
    draw = F.transform("options", lambda b: F.struct(
        (-F.log(uniform(F.col("topic"), F.col("partition"), F.lit(round_no), b)) / link(b))
        .alias("key"), b.alias("broker")))
    per_link = Window.partitionBy("leader", "successor").orderBy("tiebreak", "topic", "partition")
    return (state.filter(F.col("selected") & (F.size("replicas") > 1))
            .withColumn("leader", _first()).withColumn("options", options).filter(F.size("options") > 0)
            .withColumn("successor", F.array_min(draw)["broker"])
            .withColumn("tiebreak", F.xxhash64("topic", "partition", F.lit(round_no)))
            .withColumn("n", F.row_number().over(per_link))
            .filter(F.col("n") <= link(F.col("successor")))
            .select("topic", "partition", "leader", "successor"))


def handover_deltas(chosen: DataFrame) -> dict[int | None, BrokerStats]:
    """Leaders lost and gained per broker by the chosen handovers."""
    rows = (chosen.select(F.explode(F.array(F.struct(F.col("leader").alias("broker"), F.lit(-1).alias("n")),
                                            F.struct(F.col("successor").alias("broker"), F.lit(1).alias("n"))))
                          .alias("d"))
            .groupBy("d.broker").agg(F.sum("d.n").alias("n")).collect())
    return {int(r["broker"]): BrokerStats(broker=int(r["broker"]), leaders=int(r["n"])) for r in rows}


def apply_handovers(state: DataFrame, handovers: DataFrame) -> DataFrame:
    """Swap the successor with the current first replica; every other replica keeps its place."""
    swapped = F.transform("replicas", lambda b, i: F.when(i == 0, F.col("successor"))
                          .when(b == F.col("successor"), _first()).otherwise(b))
    return (state.join(F.broadcast(handovers.drop("leader")), ["topic", "partition"], "left")
            .withColumn("replicas", F.when(F.col("successor").isNull(), F.col("replicas")).otherwise(swapped))
            .select(*STATE_COLUMNS))
