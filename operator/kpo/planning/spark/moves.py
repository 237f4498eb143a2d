"""One round of replica moves as DataFrame transformations: per-broker sums, picking movers, placing them, applying.

The driver decides quotas from per-broker sums (:mod:`kpo.planning.spark.rounds`); everything that touches partitions is
here, as DataFrame in, DataFrame out, with window functions and cumulative sums instead of loops:

1. :func:`replica_view` explodes the selected partitions into replicas and marks the *forced* ones (on a removed
   broker, still to be created, or in a rack that already holds its partition's share of replicas) and the
   *movable* ones (on an eligible broker, not moved yet).
2. :func:`pick_movers`: on each sender, movable replicas are ranked by how close their size is to the size the
   driver asked for, and taken while the cumulative bytes stay within the sender's quota. Forced replicas always go.
3. :func:`place_movers`: each mover draws its destination domain (a rack, or a broker when racks do not apply)
   among those it may use -- not holding another replica of its partition -- with a chance proportional to the
   domain's receiving quota. Within a domain, the movers, forced first, are laid end to end by cumulative bytes
   against the receivers' cumulative quotas: a mover goes to the receiver whose stretch holds its middle. Movers
   beyond the domain's quota wait for the next round; forced movers are squeezed in; movers that fall short of the
   quota are stretched over all of it, so every receiver gets its share of what there is. Per partition, movers that
   collide (same broker, or same rack where racks must be distinct) are resolved in order: the first one stays.
4. :func:`apply_moves` rewrites the chosen slots, keeping each replica's position (a moved leader's replacement is
   the new preferred leader).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kpo.planning.spark.cluster import Cluster
from kpo.planning.spark.exprs import int_array, members, table, uniform
from kpo.planning.spark.rounds import STAT_FIELDS, BrokerStats, RoundPlan
from kpo.planning.spark.schemas import REPLICA_COLUMNS, STATE_COLUMNS

_ROWS = (Window.unboundedPreceding, Window.currentRow)
MOVE_FIELDS = ("slot", "dest", "target", "source", "size", "forced")
MOVE_TYPE = "array<struct<slot:int,dest:int,target:int,source:int,size:bigint,forced:boolean>>"


def _per_domain(cluster: Cluster) -> Column:
    """How many replicas of the row's partition one domain may hold: one, unless the partition has more replicas
    than there are racks, in which case they are spread as evenly as the racks allow (Kafka's rule)."""
    if not cluster.rack_mode:
        return F.lit(1)
    return F.ceil(F.size("replicas") / F.lit(cluster.rack_count))


def _per_domain_floor(cluster: Cluster) -> Column:
    """How many replicas of the row's partition every rack must hold for the spread to be even: with 4 replicas
    over 3 racks, at least one each (2+1+1, never 2+2+0)."""
    return F.floor(F.size("replicas") / F.lit(max(cluster.rack_count, 1)))


def _short_of_a_rack(cluster: Cluster, occupied: Column) -> Column:
    """Whether some rack holds fewer of the row's partition's replicas (among ``occupied``) than the even share."""
    least = _per_domain_floor(cluster)
    # No rack can be short while the even share is zero (fewer replicas than racks): skip the scan of every rack.
    return F.when(least > 0, F.exists(int_array(cluster.domains),
                                      lambda d: F.size(F.filter(occupied, lambda o: o == d)) < least)
                  ).otherwise(F.lit(False))


def _open(cluster: Cluster, candidates: Column, occupied: Column) -> Column:
    """The ``candidates`` domains that can take one more replica of the row's partition, given the domains it
    occupies. With one replica per domain that is a set difference (generated code); with more, a count, and every
    rack gets its even share before any rack gets one more."""
    cap = _per_domain(cluster)
    least = _per_domain_floor(cluster)
    short = _short_of_a_rack(cluster, occupied)

    def held(d: Column) -> Column:
        return F.size(F.filter(occupied, lambda o: o == d))

    counted = F.filter(candidates, lambda d: (held(d) < cap) & ((held(d) < least) | ~short))
    return F.when(cap == 1, F.array_except(candidates, occupied)).otherwise(counted)


def replica_view(state: DataFrame, cluster: Cluster, senders: Mapping[int, float] | None = None) -> DataFrame:
    """One row per replica of every partition, with ``forced`` and ``movable`` (both false outside the selection).

    With ``senders``, only partitions that can yield a mover are exploded: those with a replica on a sender or one
    that is forced (cheap array tests on the partition row, before the explode)."""
    domain = table(cluster.domain_of, "int")
    removed = members(cluster.removed)
    if senders is not None:
        sending = members(senders)
        interesting = F.exists("replicas", lambda b: b.isNull() | sending.has(b) | removed.has(b))
        if cluster.rack_mode:
            domains = F.transform("replicas", lambda b: domain[b])
            interesting = interesting | (F.size(F.array_distinct(domains)) < F.size("replicas"))
        state = state.filter(F.col("selected") & interesting)
    reps = state.select("topic", "partition", "size", "selected", "original", "replicas",
                        F.posexplode("replicas").alias("slot", "broker"))
    same_rack_before = F.size(F.filter(F.slice("replicas", 1, F.col("slot")),
                                       lambda x: domain[x] == domain[F.col("broker")]))
    duplicate = F.lit(False)
    if cluster.rack_mode:
        # Beyond the rack's share, or beyond the even share while another rack lacks one (2+2+0 -> 2+1+1).
        racks_held = F.filter(F.transform("replicas", lambda x: domain[x]), lambda d: d.isNotNull())
        duplicate = ((same_rack_before >= _per_domain(cluster))
                     | ((same_rack_before >= _per_domain_floor(cluster)) & _short_of_a_rack(cluster, racks_held)))
    forced = F.col("selected") & (
        F.col("broker").isNull() | removed.has(F.col("broker")) | duplicate)
    unmoved = F.try_element_at("original", F.col("slot") + 1) == F.col("broker")
    movable = (F.col("selected") & ~forced & members(cluster.eligible).has(F.col("broker"))
               & F.coalesce(unmoved, F.lit(False)) & F.lit(cluster.balancing))
    return reps.select(*[c for c in REPLICA_COLUMNS if c not in ("forced", "movable")],
                       forced.alias("forced"), movable.alias("movable"))


def broker_stats(state: DataFrame, cluster: Cluster) -> dict[int | None, BrokerStats]:
    """Per-broker sums for the driver; the ``None`` entry collects replicas still to be created."""
    reps = replica_view(state, cluster)
    rows = reps.groupBy("broker").agg(
        F.sum("size").alias("bytes"),
        F.count(F.lit(1)).alias("replicas"),
        F.sum(F.when(F.col("slot") == 0, 1).otherwise(0)).alias("leaders"),
        F.sum(F.when(F.col("movable"), F.col("size")).otherwise(0)).alias("movable_bytes"),
        F.sum(F.when(F.col("movable"), 1).otherwise(0)).alias("movable_replicas"),
        F.sum(F.when(F.col("forced"), F.col("size")).otherwise(0)).alias("forced_bytes"),
        F.sum(F.when(F.col("forced"), 1).otherwise(0)).alias("forced_replicas"),
    ).collect()
    return {r["broker"]: BrokerStats(broker=r["broker"], **{c: int(r[c] or 0) for c in STAT_FIELDS}) for r in rows}


def _occupied(cluster: Cluster) -> Column:
    """Domains the row's partition holds apart from the row itself (in broker mode, including its own broker)."""
    if not cluster.rack_mode:
        return F.filter("replicas", lambda x: x.isNotNull())
    domain = table(cluster.domain_of, "int")
    others = F.transform("replicas", lambda x, j: F.when((j == F.col("slot")) | x.isNull(), F.lit(None))
                         .otherwise(domain[x]))
    return F.filter(others, lambda d: d.isNotNull())


def forced_by_domain(state: DataFrame, cluster: Cluster) -> dict[int, float]:
    """Bytes of forced replicas per domain they can go to (split evenly where several are open): only needed when
    every partition is bound to its racks, so each rack must absorb its own forced replicas."""
    all_domains = int_array(cluster.domains)
    reps = replica_view(state, cluster).filter("forced")
    occupied = _occupied(cluster)
    allowed = _open(cluster, all_domains, occupied)
    rows = (reps.select("size", allowed.alias("allowed"))
            .select((F.col("size") / F.greatest(F.size("allowed"), F.lit(1))).alias("share"),
                    F.explode("allowed").alias("domain"))
            .groupBy("domain").agg(F.sum("share").alias("bytes")).collect())
    return {int(r["domain"]): float(r["bytes"]) for r in rows}


def _weight(plan: RoundPlan) -> Column:
    return F.col("size") if plan.unit == "bytes" else F.lit(1).cast("long")


def pick_movers(reps: DataFrame, plan: RoundPlan, cluster: Cluster, round_no: int) -> DataFrame:
    """Forced replicas plus, on each sender, the movable replicas that fill its quota. Only replicas that have
    somewhere to go are candidates: a receiving domain their partition does not already occupy."""
    _, caps = _capacities(cluster, plan.into)
    receiving = int_array(d for d, c in caps.items() if c > 0)
    occupied = _occupied(cluster)
    can_go = F.size(_open(cluster, receiving, occupied)) > 0
    out = table(plan.out, "double")
    weight = _weight(plan)
    tiebreak = F.xxhash64("topic", "partition", "slot", F.lit(round_no))
    if plan.unit == "bytes":
        wanted = table(plan.mover_size, "double")[F.col("broker")]
        rank = F.abs(F.log1p(F.col("size").cast("double")) - F.log1p(wanted))
    else:
        rank = F.col("size").cast("double")  # a count round moves the smallest replicas: fewest bytes
    # Forced replicas (a byte round only) come along in the same scan of the replicas; the window's partitions keep
    # them apart from the optional ones, which alone are ranked against their sender's quota.
    by_sender = Window.partitionBy("forced", "broker").orderBy("rank", "tiebreak", "topic", "partition", "slot"
                                                               ).rowsBetween(*_ROWS)
    optional = F.col("movable") & out[F.col("broker")].isNotNull() & can_go
    forced = F.col("forced") if plan.unit == "bytes" else F.lit(False)
    columns = ["topic", "partition", "slot", "broker", "size", "replicas", "forced", "weight"]
    return (reps.filter(optional | forced)
            .withColumn("weight", weight).withColumn("rank", rank).withColumn("tiebreak", tiebreak)
            .withColumn("filled", F.sum("weight").over(by_sender))
            .filter(forced | (F.col("filled") - F.col("weight") / 2 < out[F.col("broker")]))
            .select(*columns))


def _capacities(cluster: Cluster, into: Mapping[int, float]) -> tuple[dict[int, list[float]], dict[int, float]]:
    bounds: dict[int, list[float]] = {}
    caps: dict[int, float] = {}
    for d, brokers in cluster.domains.items():
        running, edges = 0.0, []
        for b in brokers:
            running += max(0.0, into.get(b, 0.0))
            edges.append(running)
        bounds[d], caps[d] = edges, running
    return bounds, caps


def place_movers(movers: DataFrame, plan: RoundPlan, cluster: Cluster, round_no: int) -> DataFrame:
    """Destinations for the movers: one row per partition that changes, its kept ``moves``."""
    bounds, caps = _capacities(cluster, plan.into)
    brokers_of = {d: list(bs) for d, bs in cluster.domains.items()}
    units = {d: [float(i + 1) for i in range(len(bs))] for d, bs in cluster.domains.items()}
    receiving = [d for d, c in caps.items() if c > 0]
    floor = max(1e-9, 1e-6 * sum(caps.values()))  # lets a forced mover reach a domain with no quota left
    chance = table({d: c + floor for d, c in caps.items()}, "double")
    cap = table(caps, "double")[F.col("dest")]
    occupied = _occupied(cluster)
    candidates = F.when(F.col("forced"), int_array(cluster.domains)).otherwise(int_array(receiving))
    allowed = _open(cluster, candidates, occupied)
    draw = F.transform(allowed, lambda d: F.struct(
        (-F.log(uniform(F.col("topic"), F.col("partition"), F.col("slot"), F.lit(round_no), d))
         / chance[d]).alias("key"), d.alias("domain")))
    tiebreak = F.xxhash64("topic", "partition", "slot", F.lit(round_no + 7919))
    in_domain = Window.partitionBy("dest").orderBy(F.desc("forced"), "tiebreak", "topic", "partition", "slot")
    # Where the mover starts in the domain's queue: it fits if it starts inside the receivers' quota, so a receiver
    # may end up to one replica above its quota (receivers sit low in the band) but a quota smaller than a replica
    # still takes one.
    filled = F.sum("weight").over(in_domain.rowsBetween(*_ROWS)) - F.col("weight")
    forced_here = F.sum(F.when(F.col("forced"), F.col("weight")).otherwise(0)).over(Window.partitionBy("dest"))
    arriving = F.sum("weight").over(Window.partitionBy("dest"))
    # A domain offered less than its quota spreads what arrives over all its receivers in proportion to their quotas:
    # laid end to end unscaled, the last receivers in id order would get nothing, round after round.
    position = (F.when(cap <= 0, F.col("filled") * F.size(F.col("edges")) / F.col("forced_here"))
                .when(F.col("forced") & (F.col("forced_here") > cap), F.col("filled") * cap / F.col("forced_here"))
                .when(F.col("arriving") < cap, F.col("filled") * cap / F.col("arriving"))
                .otherwise(F.col("filled")))
    edges = F.when(cap <= 0, table(units, "array<double>")[F.col("dest")]).otherwise(
        table(bounds, "array<double>")[F.col("dest")])
    index = F.size(F.filter("edges", lambda e: e <= F.col("position")))
    n = F.size("edges")
    slot_index = F.when(F.col("forced"), F.least(index, n - 1)).when(index < n, index)
    brokers = table(brokers_of, "array<int>")[F.col("dest")]
    # Start at the chosen receiver; step past a broker that already holds the partition (only possible when a
    # partition has more replicas than there are racks).
    rotated = F.concat(F.slice(brokers, F.col("at") + 1, n), F.slice(brokers, F.lit(1), F.col("at")))
    hosted = F.filter("replicas", lambda x: x.isNotNull())
    target = F.try_element_at(F.filter(rotated, lambda b: ~F.array_contains(hosted, b)), F.lit(1))
    placed = (movers.withColumn("dest", F.array_min(draw)["domain"]).filter(F.col("dest").isNotNull())
              .withColumn("tiebreak", tiebreak)
              .withColumn("filled", filled).withColumn("forced_here", forced_here).withColumn("arriving", arriving)
              .withColumn("edges", edges).withColumn("position", position)
              .withColumn("at", slot_index).filter(F.col("at").isNotNull())
              .withColumn("target", target).filter(F.col("target").isNotNull()))
    return _resolve_collisions(placed)


def _resolve_collisions(placed: DataFrame) -> DataFrame:
    """Per partition, keep movers in order (forced first, then by slot) unless an earlier kept one already took the
    same broker or the same domain (one arrival per domain and round keeps every rack within its share). One row per
    changed partition: ``moves``, the
    kept movers (slot, target, and where they came from, for the driver's per-broker sums)."""
    wanted = F.array_sort(F.collect_list(F.struct(
        (~F.col("forced")).alias("later"), F.col("slot"), F.col("dest"), F.col("target"),
        F.col("broker").alias("source"), F.col("size"), F.col("forced"))))
    empty = F.array().cast(MOVE_TYPE)

    def keep(acc: Column, m: Column) -> Column:
        clash = F.exists(acc, lambda k: (k["target"] == m["target"]) | (k["dest"] == m["dest"]))
        return F.when(clash, acc).otherwise(F.concat(acc, F.array(F.struct(
            *[m[name].alias(name) for name in MOVE_FIELDS]))))

    return (placed.groupBy("topic", "partition").agg(wanted.alias("wanted"))
            .select("topic", "partition", F.aggregate(F.col("wanted"), empty, keep).alias("moves")))


def move_deltas(placed: DataFrame) -> dict[int | None, BrokerStats]:
    """How the round's kept moves change the per-broker sums: a small aggregate over the moves only."""
    moved = placed.select(F.explode("moves").alias("m")).select("m.*")
    leaving = moved.select(F.col("source").alias("broker"), (-F.col("size")).alias("bytes"),
                           F.lit(-1).alias("replicas"), F.when(F.col("slot") == 0, -1).otherwise(0).alias("leaders"),
                           F.when(~F.col("forced"), -F.col("size")).otherwise(0).alias("movable_bytes"),
                           F.when(~F.col("forced"), -1).otherwise(0).alias("movable_replicas"),
                           F.when(F.col("forced"), -F.col("size")).otherwise(0).alias("forced_bytes"),
                           F.when(F.col("forced"), -1).otherwise(0).alias("forced_replicas"))
    arriving = moved.select(F.col("target").alias("broker"), F.col("size").alias("bytes"), F.lit(1).alias("replicas"),
                            F.when(F.col("slot") == 0, 1).otherwise(0).alias("leaders"),
                            *[F.lit(0).alias(c) for c in ("movable_bytes", "movable_replicas", "forced_bytes",
                                                          "forced_replicas")])
    rows = leaving.unionByName(arriving).groupBy("broker").agg(
        *[F.sum(c).alias(c) for c in STAT_FIELDS]).collect()
    return {r["broker"]: BrokerStats(broker=r["broker"], **{c: int(r[c]) for c in STAT_FIELDS}) for r in rows}


def apply_moves(state: DataFrame, moves: DataFrame) -> DataFrame:
    """Rewrite the moved slots; ``moves`` is small next to the state, so it is broadcast instead of shuffled."""
    targets = F.map_from_arrays(F.transform("moves", lambda m: m["slot"]), F.transform("moves", lambda m: m["target"]))
    rewritten = F.transform("replicas", lambda x, i: F.coalesce(F.try_element_at(targets, i), x))
    return (state.join(F.broadcast(moves), ["topic", "partition"], "left")
            .withColumn("replicas", F.when(F.col("moves").isNull(), F.col("replicas")).otherwise(rewritten))
            .select(*STATE_COLUMNS))
