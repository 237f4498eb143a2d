"""Disk plans (JBOD, KIP-858): replicas moved between the log dirs of their own broker, never to another broker.

Platform teams run brokers with several disks and page on full ones. Two goals plan copies inside a broker, which
Kafka carries out with AlterReplicaLogDirs (a future replica in the new dir, swapped in when it caught up):

- ``RemoveDisks`` empties the named dirs (a disk to replace or retire) onto the broker's other online dirs;
- ``RebalanceDisks`` evens out the bytes on each broker's dirs, within ``tolerance`` of the broker's mean dir.

Both are the same two steps per broker, with no loop in the driver: pick the replicas that leave a dir (every selected
replica of a drained dir; for a rebalance, the largest first until the dir has shed its share of the excess), then
hand them to the dirs that have room by cumulative bytes. Laid end to end in size order, the movers fill the
receivers' room in turn, the receiver with the most room first: each mover goes to the receiver whose stretch of
that line its midpoint falls into, so every receiver ends within one replica of its share, as a greedy largest-first
packing would. The room of a receiver is
what brings it to the broker's mean (after a drain: the broker's bytes over its remaining dirs); when some receivers
are already above it, the others' room is scaled to take every mover.

The bytes moved are close to the least any plan moves: a drain moves exactly the drained dirs' selected replicas, a
rebalance sheds from each dir above the band only what the band or the dirs below it need. Unselected replicas stay
where they are but count in every dir's bytes. A replica whose dir the snapshot does not know stays too.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from kpo.domain.plan_contract import BrokerInfo, DirLoad, Goal, PlanRequest
from kpo.planning.spark import storage
from kpo.planning.spark.cluster import PlanError
from kpo.planning.spark.schemas import DIR_MOVE_COLUMNS

# One row per online log dir: broker, log_dir, drained (RemoveDisks), in_scope (its broker is planned).
DIR_COLUMNS = ("broker", "log_dir", "drained", "in_scope")
# One row per replica with a known dir: topic, partition, slot, broker, log_dir, size, selected.
REPLICA_DIR_COLUMNS = ("topic", "partition", "slot", "broker", "log_dir", "size", "selected")


def dir_facts(spark: SparkSession, request: PlanRequest, brokers: Iterable[BrokerInfo]) -> DataFrame:
    """The online log dirs of the alive brokers, which to drain and which brokers the plan concerns; refuses a
    request that names a dir the broker does not have online, or that leaves a broker no dir."""
    online = {b.id: set(b.log_dirs) for b in brokers if b.alive and b.log_dirs}
    drained = {(d.broker, d.log_dir) for d in request.disks}
    for broker, log_dir in sorted(drained):
        if log_dir not in online.get(broker, set()):
            have = sorted(online.get(broker, set()))
            raise PlanError(f"broker {broker} has no online log dir {log_dir}"
                            + (f" (its online dirs: {', '.join(have)})" if have else " (it is down or has no dir)"))
    for broker in sorted({b for b, _ in drained}):
        if online[broker] <= {d for b, d in drained if b == broker}:
            raise PlanError(f"broker {broker} would have no online log dir left to take the replicas of "
                            f"{', '.join(sorted(online[broker]))}")
    if request.goal is Goal.REMOVE_DISKS:
        scope = {b for b, _ in drained}
    else:
        unknown = sorted(set(request.brokers) - online.keys())
        if unknown:
            raise PlanError(f"brokers {unknown} are not alive with known log dirs: check 'brokers'")
        scope = set(request.brokers) or {b for b, dirs in online.items() if len(dirs) > 1}
    rows = [(b, d, (b, d) in drained, b in scope) for b, dirs in sorted(online.items()) for d in sorted(dirs)]
    return spark.createDataFrame(rows, "broker int, log_dir string, drained boolean, in_scope boolean")


def replica_dirs(partitions: DataFrame, selected: Column) -> DataFrame:
    """One row per replica whose log dir the snapshot knows."""
    dirs = F.coalesce(F.col("log_dirs"), F.array_repeat(F.lit(None).cast("string"), F.size("replicas")))
    exploded = partitions.select(
        "topic", "partition", F.coalesce("size_bytes", F.lit(0)).cast("long").alias("size"),
        selected.alias("selected"), F.posexplode(F.arrays_zip(F.col("replicas").alias("broker"),
                                                              dirs.alias("log_dir"))).alias("slot", "r"))
    return exploded.filter(F.col("r.log_dir").isNotNull()).select(
        "topic", "partition", (F.col("slot") + 1).alias("slot"), F.col("r.broker").alias("broker"),
        F.col("r.log_dir").alias("log_dir"), "size", "selected")


def dir_loads(replicas: DataFrame, dirs: DataFrame) -> DataFrame:
    """Every online dir with its bytes and replicas (0 for an empty one): broker, log_dir, bytes, count, and the
    dir's facts."""
    used = replicas.groupBy("broker", "log_dir").agg(F.sum("size").alias("bytes"), F.count("*").alias("count"))
    return (dirs.join(used, ["broker", "log_dir"], "left")
            .select(*DIR_COLUMNS, F.coalesce("bytes", F.lit(0)).cast("long").alias("bytes"),
                    F.coalesce("count", F.lit(0)).cast("long").alias("count")))


def _shares(loads: DataFrame, goal: Goal, tolerance: float) -> DataFrame:
    """Per dir of a planned broker: ``shed`` (bytes to leave it) and ``room`` (its share of what arrives)."""
    per_broker = Window.partitionBy("broker")
    kept = ~F.col("drained")
    total = F.sum("bytes").over(per_broker)
    kept_dirs = F.sum(F.when(kept, 1).otherwise(0)).over(per_broker)
    mean = total / kept_dirs
    above = F.greatest(F.col("bytes") - F.col("mean"), F.lit(0.0))
    below = F.when(kept, F.greatest(F.col("mean") - F.col("bytes"), F.lit(0.0))).otherwise(0.0)
    staged = loads.filter("in_scope").withColumn("mean", mean).withColumn("above", above).withColumn("below", below)
    if goal is Goal.REMOVE_DISKS:
        shed = F.when(F.col("drained"), F.lit(float("inf"))).otherwise(0.0)
    else:
        # Out of the band on either side: shed what brings the high dirs to its top edge, or what the low dirs need
        # to reach its bottom edge, whichever is more, from the dirs above the mean in proportion to their excess.
        # Aimed at 80 % of the band: whole replicas land within half a replica of the aim, and one aimed at the edge
        # itself ended just outside it (1.0502 x the mean under a 5 % band in the bench).
        aim = 0.8 * tolerance
        over = F.sum(F.greatest(F.col("bytes") - F.col("mean") * (1 + aim), F.lit(0.0))).over(per_broker)
        under = F.sum(F.greatest(F.col("mean") * (1 - aim) - F.col("bytes"), F.lit(0.0))).over(per_broker)
        excess = F.sum("above").over(per_broker)
        shed = F.when(excess > 0, F.greatest(over, under) * F.col("above") / excess).otherwise(0.0)
    return staged.select("broker", "log_dir", "bytes", shed.alias("shed"), F.col("below").alias("room"))


def movers(replicas: DataFrame, shares: DataFrame) -> DataFrame:
    """The selected replicas that leave their dir: every one of a drained dir; for a rebalance, of those no larger
    than the dir's ``shed``, the largest first while what the dir shed before one plus half of it stays within the
    ``shed``. A replica larger than the whole shed would overshoot it by more than it corrects (a heavy-tailed
    partition of twice the excess moved alone left its new dir 1.76 x the mean in the bench), so it stays."""
    in_dir = Window.partitionBy("broker", "log_dir").orderBy(F.desc("size"), "topic", "partition")
    before = F.coalesce(F.sum("size").over(in_dir.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0))
    return (replicas.filter("selected").join(shares.select("broker", "log_dir", "shed"), ["broker", "log_dir"])
            .filter("shed > 0 AND size <= shed").withColumn("before", before)
            .filter(F.col("before") + F.col("size") / 2 <= F.col("shed"))
            .select("topic", "partition", "slot", "broker", "size", F.col("log_dir").alias("from_dir")))


def assign(leaving: DataFrame, shares: DataFrame) -> DataFrame:
    """Each mover to a receiving dir of its broker (see the module text): the movers' midpoints on the line of their
    cumulative bytes, against the receivers' stretches of it, scaled to the movers' total."""
    line = Window.partitionBy("broker").orderBy(F.desc("size"), "topic", "partition", "slot")
    placed = leaving.withColumn("mid", F.sum("size").over(line) - F.col("size") / 2)
    moved = leaving.groupBy("broker").agg(F.sum("size").alias("moved"))
    receivers = shares.filter("shed = 0").join(moved, "broker")
    by_broker = Window.partitionBy("broker")
    # The receiver with the most room first: the largest movers, at the start of the line, land there.
    in_order = by_broker.orderBy(F.desc("room"), "log_dir")
    room_total = F.sum("room").over(by_broker)
    dirs = F.count("*").over(by_broker)
    # No room anywhere (every kept dir at the mean or above it): the movers are spread evenly.
    room = F.when(room_total > 0, F.col("room") / room_total).otherwise(F.lit(1.0) / dirs) * F.col("moved")
    stretches = (receivers.withColumn("room", room)
                 .withColumn("end", F.sum("room").over(in_order.rowsBetween(Window.unboundedPreceding, 0)))
                 .withColumn("last", F.row_number().over(by_broker.orderBy(F.asc("room"), F.desc("log_dir"))) == 1)
                 .select(F.col("broker").alias("to_broker"), F.col("log_dir").alias("to_dir"),
                         (F.col("end") - F.col("room")).alias("start"), "end", "last"))
    joined = placed.join(stretches, (F.col("broker") == F.col("to_broker")) & (F.col("mid") >= F.col("start"))
                         & ((F.col("mid") < F.col("end")) | F.col("last")))
    # A midpoint on a boundary of floating point sums may fall in two stretches: the first one takes it.
    first = Window.partitionBy("topic", "partition", "slot").orderBy("start")
    return joined.withColumn("n", F.row_number().over(first)).filter("n = 1").select(*DIR_MOVE_COLUMNS)


#: Rounds of a disk rebalance: each round's movers are judged against the dirs as the rounds before left them.
MAX_DIR_ROUNDS = 4


def plan_dir_moves(partitions: DataFrame, selected: Column, request: PlanRequest, brokers: Iterable[BrokerInfo]
                   ) -> tuple[DataFrame, DataFrame]:
    """The copies between log dirs the request asks for, and every online dir's load before them.

    A drain is one round. A rebalance runs rounds (at most :data:`MAX_DIR_ROUNDS`, a few Spark jobs each) while
    some dir still sheds: one round's movers are placed by their sizes against the receivers' room, and with heavy
    tailed sizes a receiver can end outside the band; the next round evens out what the last one left. A replica
    moved twice is one copy from its first dir to its last (none if it came back)."""
    original = replica_dirs(partitions, selected).localCheckpoint(eager=True)
    facts = dir_facts(partitions.sparkSession, request, brokers)
    loads = dir_loads(original, facts)
    current, rounds = original, 1 if request.goal is Goal.REMOVE_DISKS else MAX_DIR_ROUNDS
    for _ in range(rounds):
        shares = _shares(dir_loads(current, facts), request.goal, request.tolerance).localCheckpoint(eager=True)
        placed = assign(movers(current, shares), shares).localCheckpoint(eager=True)
        if placed.isEmpty():
            break
        moved = placed.select("topic", "partition", "slot", F.col("to_dir").alias("new_dir"))
        current = (current.join(moved, ["topic", "partition", "slot"], "left")
                   .select("topic", "partition", "slot", "broker",
                           F.coalesce("new_dir", "log_dir").alias("log_dir"), "size", "selected")
                   .localCheckpoint(eager=True))
    ended = (original.join(current.select("topic", "partition", "slot", F.col("log_dir").alias("to_dir")),
                           ["topic", "partition", "slot"])
             .filter(F.col("to_dir") != F.col("log_dir"))
             .select("topic", "partition", "slot", "broker", "size", F.col("log_dir").alias("from_dir"), "to_dir"))
    return ended.select(*DIR_MOVE_COLUMNS), loads


def loads_after(loads: DataFrame, dir_moves: DataFrame) -> DataFrame:
    """``loads`` with the moves applied: broker, log_dir, bytes, count."""
    out = dir_moves.groupBy("broker", F.col("from_dir").alias("log_dir")).agg(
        (-F.sum("size")).alias("delta"), (-F.count("*")).alias("n"))
    into = dir_moves.groupBy("broker", F.col("to_dir").alias("log_dir")).agg(
        F.sum("size").alias("delta"), F.count("*").alias("n"))
    deltas = out.unionByName(into).groupBy("broker", "log_dir").agg(F.sum("delta").alias("delta"),
                                                                     F.sum("n").alias("n"))
    return (loads.join(deltas, ["broker", "log_dir"], "left")
            .select("broker", "log_dir", (F.col("bytes") + F.coalesce("delta", F.lit(0))).cast("long").alias("bytes"),
                    (F.col("count") + F.coalesce("n", F.lit(0))).cast("long").alias("count")))


def collect_loads(loads: DataFrame) -> tuple[DirLoad, ...]:
    return tuple(DirLoad(broker=r["broker"], log_dir=r["log_dir"], bytes=int(r["bytes"]), replicas=int(r["count"]))
                 for r in loads.select("broker", "log_dir", "bytes", "count").orderBy("broker", "log_dir").collect())


def dir_plan_lines(partitions: DataFrame, dir_moves: DataFrame) -> DataFrame:
    """``plan.json``'s lines (:func:`storage.plan_json_lines`) for the moved partitions: replicas as they are,
    ``log_dirs`` naming the new dir of each moved replica and ``any`` for the others."""
    moved = dir_moves.groupBy("topic", "partition").agg(
        F.map_from_entries(F.collect_list(F.struct("slot", "to_dir"))).alias("to"))
    return storage.plan_json_lines(
        partitions.join(moved, ["topic", "partition"]),
        F.transform("replicas", lambda _b, i: F.coalesce(F.element_at("to", (i + 1).cast("int")), F.lit("any"))))


def least_bytes(request: PlanRequest, loads: DataFrame, partitions: DataFrame, selected: Column) -> int:
    """The fewest bytes any plan of the request moves: a drain, every selected byte in the drained dirs; a
    rebalance, per broker the more of what its dirs hold above the band and what they lack below it."""
    if request.goal is Goal.REMOVE_DISKS:
        drained = loads.filter("drained").select("broker", "log_dir")
        row = (replica_dirs(partitions, selected).filter("selected").join(drained, ["broker", "log_dir"])
               .agg(F.coalesce(F.sum("size"), F.lit(0)).alias("bytes")).first())
        return int(row["bytes"]) if row is not None else 0
    least = 0.0
    for dirs in _in_scope(loads).values():
        mean = sum(dirs.values()) / len(dirs)
        over = sum(max(b - mean * (1 + request.tolerance), 0.0) for b in dirs.values())
        under = sum(max(mean * (1 - request.tolerance) - b, 0.0) for b in dirs.values())
        least += max(over, under)
    return int(least)


def band_of(request: PlanRequest, loads: DataFrame, after: Iterable[DirLoad]) -> tuple[bool | None, str]:
    """RebalanceDisks: whether every planned broker's dirs end within ``tolerance`` of its mean dir, and which do
    not when some do not (a replica larger than the band is wide may keep a dir out). A drain has no band: what it
    says is the drained dirs that keep replicas (those of unselected topics)."""
    scope = _in_scope(loads)
    ended: dict[int, dict[str, int]] = {}
    for load in after:
        if load.broker in scope:
            ended.setdefault(load.broker, {})[load.log_dir] = load.bytes
    if request.goal is Goal.REMOVE_DISKS:
        drained = {(d.broker, d.log_dir) for d in request.disks}
        kept = sorted(f"{load.log_dir} of broker {load.broker} ({load.replicas} replica(s))" for load in after
                      if (load.broker, load.log_dir) in drained and load.replicas)
        return None, ("the drained dirs keep the replicas of topics outside the selection: " + "; ".join(kept)
                      if kept else "")
    outside = []
    for broker, dirs in sorted(ended.items()):
        mean = sum(dirs.values()) / len(dirs)
        worst = max(dirs.values(), key=lambda b: abs(b - mean))
        if mean and abs(worst - mean) > request.tolerance * mean:
            outside.append(f"broker {broker} ({worst / mean:.2f} x its mean dir)")
    if not outside:
        return True, ""
    return False, f"log dirs outside {request.tolerance:.0%} of their broker's mean: {', '.join(outside)}"


def _in_scope(loads: DataFrame) -> dict[int, dict[str, int]]:
    """The planned brokers' kept dirs and their bytes before the plan (a few rows: one per dir)."""
    found: dict[int, dict[str, int]] = {}
    for row in loads.filter("in_scope AND NOT drained").select("broker", "log_dir", "bytes").collect():
        found.setdefault(int(row["broker"]), {})[row["log_dir"]] = int(row["bytes"])
    return found
