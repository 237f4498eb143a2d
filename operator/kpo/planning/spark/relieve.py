"""RelieveCapacity: every log dir ends at or under ``threshold`` of its file system, moving as few bytes as it can.

Platform teams page on full disks, not on balance scores (Cruise Control's users ask for exactly this light run,
CC#2228). The capacity is what each broker reports for each dir (DescribeLogDirs v4+, KIP-827): total and usable bytes
of its file system. The bytes in use are the file system's, Kafka's and anything else on it: a replica that leaves
frees its size, one that arrives takes it.

Dirs of one broker that report the same total and usable bytes sit on one file system (two dirs on one disk, or a test
bed's dirs on one volume): they are one *volume* here, since moving a replica between them frees nothing. A broker is
under the threshold when all of its volumes are, so relieving the volumes relieves the brokers.

The plan is rounds of three small steps, no loop over partitions in the driver (the volumes, a few per broker, are
the only values it keeps):

1. **Movers.** Each volume above the threshold sheds its excess: its selected replicas no larger than the excess,
   largest first, until they cover it; when they do not, the smallest one larger than what is left. That is close to
   the fewest bytes that bring it under (never less than the excess: the lower bound).
2. **Offers.** Each mover asks one volume with room: another volume of its own broker first (a copy inside the broker,
   no network, nothing changes for the racks), else a volume of another broker of its rack (racks kept; any broker when
   racks are not in force) that holds no replica of the partition and is not excluded. Among those, the volume is
   drawn with a chance in proportion to its room (a seeded hash, so a plan is the same for the same snapshot), which
   spreads one round's movers over the receivers instead of sending all of them to the roomiest.
3. **Acceptance.** Each receiving volume takes its offers, largest first, while they fit in its room, and a broker
   takes at most one replica of a partition per round. An offer not taken waits for the next round, against the
   volumes as this round left them.

The rounds end when no volume is above the threshold, when a round moves nothing, or after :data:`MAX_ROUNDS`. What
is left above is the best reachable state this search found; the metrics name those dirs (``band_reached`` false) and
the operator proposes the plan as that, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from kpo.domain.plan_contract import BrokerInfo, DirLoad, PlanRequest
from kpo.planning.spark import storage
from kpo.planning.spark.cluster import PlanError
from kpo.planning.spark.disks import replica_dirs

#: Rounds at most; each is a few Spark jobs over the movers and one over the replicas.
MAX_ROUNDS = 8

#: One row per moved replica: where it was and where it goes (another dir of its broker, or another broker).
RELIEF_MOVE_COLUMNS = ("topic", "partition", "slot", "size", "broker", "from_dir", "to_broker", "to_dir")


@dataclass(frozen=True)
class Volume:
    """One file system of a broker: the dirs on it, its size and the bytes in use (before or after moves)."""

    broker: int
    key: str  # its first dir, which names it
    dirs: tuple[str, ...]
    total: int
    used: int
    rack: str
    receives: bool  # alive and not excluded: may take replicas

    def limit(self, threshold: float) -> int:
        return math.floor(self.total * threshold)


def volumes_of(request: PlanRequest, brokers: Iterable[BrokerInfo]) -> dict[tuple[int, str], Volume]:
    """The alive brokers' volumes, keyed by (broker, first dir); refuses a snapshot without capacity for some online
    dir (a broker older than Kafka 3.3 reports none), since a dir whose use is unknown can be neither relieved nor
    trusted to take replicas."""
    found: dict[tuple[int, str], Volume] = {}
    unknown = []
    rack_mode = request.rack_aware
    excluded = set(request.exclude_brokers)
    for broker in brokers:
        if not broker.alive or not broker.log_dirs:
            continue
        spaces = {s.log_dir: s for s in broker.capacity}
        unknown += [f"{d} of broker {broker.id}" for d in broker.log_dirs if d not in spaces]
        by_fs: dict[tuple[int, int], list[str]] = {}
        for log_dir in sorted(broker.log_dirs):
            if (space := spaces.get(log_dir)) is not None:
                by_fs.setdefault((space.total_bytes, space.usable_bytes), []).append(log_dir)
        for (total, usable), dirs in by_fs.items():
            found[(broker.id, dirs[0])] = Volume(
                broker=broker.id, key=dirs[0], dirs=tuple(dirs), total=total, used=total - usable,
                rack=(broker.rack or "") if rack_mode else "", receives=broker.id not in excluded)
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise PlanError("the capacity of some log dirs is unknown (DescribeLogDirs v4+, Kafka 3.3 or later, reports "
                        "it): " + ", ".join(unknown[:5]) + more)
    if not found:
        raise PlanError("no alive broker reports its log dirs and their capacity")
    return found


def dir_volumes(spark: SparkSession, volumes: Mapping[tuple[int, str], Volume]) -> DataFrame:
    """One row per online dir: broker, log_dir, volume (the key of its file system), rack."""
    rows = [(v.broker, d, v.key, v.rack) for v in volumes.values() for d in v.dirs]
    return spark.createDataFrame(rows, "broker int, log_dir string, volume string, rack string")


def movers(replicas: DataFrame, excess: DataFrame) -> DataFrame:
    """The selected replicas that leave the volumes above the threshold (see the module text): those no larger
    than the volume's ``excess``, largest first, until they cover it, then the smallest larger one if still short."""
    fits = F.col("size") <= F.col("excess")
    in_volume = Window.partitionBy("broker", "volume").orderBy(
        F.when(fits, 0).otherwise(1), F.when(fits, -F.col("size")).otherwise(F.col("size")), "topic", "partition")
    before = F.coalesce(F.sum("size").over(in_volume.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0))
    return (replicas.filter("selected AND size > 0").join(excess, ["broker", "volume"])
            .withColumn("before", before).filter(F.col("before") < F.col("excess"))
            .select("topic", "partition", "slot", "broker", "log_dir", "volume", "rack", "size"))


def offers(leaving: DataFrame, holders: DataFrame, receivers: DataFrame, round_no: int) -> DataFrame:
    """Each mover's one offer: a volume of its broker with room if there is one, else a volume of another broker of
    its rack that holds no replica of the partition, drawn with a chance in proportion to the room (the exponential
    race of weighted sampling, on a seeded hash)."""
    r = receivers.select(F.col("broker").alias("to_broker"), F.col("volume").alias("to_volume"),
                         F.col("log_dir").alias("to_dir"), F.col("rack").alias("to_rack"), "room", "receives")
    pairs = (leaving.join(holders, ["topic", "partition"])
             .join(r, (F.col("rack") == F.col("to_rack")) & (F.col("size") <= F.col("room"))
                   & (((F.col("to_broker") == F.col("broker")) & (F.col("to_volume") != F.col("volume")))
                      | ((F.col("to_broker") != F.col("broker")) & F.col("receives")
                         & ~F.array_contains(F.col("held"), F.col("to_broker"))))))
    draw = (F.abs(F.xxhash64("topic", "partition", "slot", "to_broker", "to_volume", F.lit(round_no)))
            % F.lit(1_000_000_007) + 1) / F.lit(1_000_000_008.0)
    race = -F.log(draw) / F.col("room")
    first = Window.partitionBy("topic", "partition", "slot").orderBy(
        F.when(F.col("to_broker") == F.col("broker"), 0).otherwise(1), race, "to_broker", "to_volume")
    return (pairs.withColumn("n", F.row_number().over(first)).filter("n = 1")
            .select("topic", "partition", "slot", "size", "broker", F.col("log_dir").alias("from_dir"), "volume",
                    "to_broker", "to_volume", "to_dir", "room"))


def accepted(offered: DataFrame) -> DataFrame:
    """The offers each receiving volume takes: largest first while they fit in its room; a broker takes one replica
    of a partition per round."""
    per_volume = Window.partitionBy("to_broker", "to_volume").orderBy(F.desc("size"), "topic", "partition", "slot")
    per_partition = Window.partitionBy("topic", "partition", "to_broker").orderBy(F.desc("size"), "slot")
    once = offered.withColumn("k", F.row_number().over(per_partition)).filter(
        (F.col("k") == 1) | (F.col("to_broker") == F.col("broker")))
    return (once.withColumn("filled", F.sum("size").over(per_volume.rowsBetween(Window.unboundedPreceding, 0)))
            .filter(F.col("filled") <= F.col("room")).drop("filled", "k", "room"))


@dataclass(frozen=True)
class Relief:
    """The plan's moves (:data:`RELIEF_MOVE_COLUMNS`), the volumes before and after, and the rounds run."""

    moves: DataFrame
    before: dict[tuple[int, str], Volume]
    after: dict[tuple[int, str], Volume]
    rounds: int


def plan_relief(partitions: DataFrame, selected: Column, request: PlanRequest, brokers: Iterable[BrokerInfo]
                ) -> Relief:
    """Rounds of movers, offers and acceptance (see the module text) until every volume is under the threshold."""
    assert request.threshold is not None
    threshold = request.threshold
    volumes = volumes_of(request, brokers)
    spark = partitions.sparkSession
    dirs = dir_volumes(spark, volumes)
    # Every replica's broker, those on a dead broker or an unknown dir too: a broker that holds one takes no other.
    slots = partitions.select("topic", "partition", F.posexplode("replicas").alias("slot", "broker")).select(
        "topic", "partition", (F.col("slot") + 1).alias("slot"), "broker")
    original = (replica_dirs(partitions, selected).join(dirs, ["broker", "log_dir"])
                .localCheckpoint(eager=True))
    current, used, rounds = original, {k: v.used for k, v in volumes.items()}, 0
    for round_no in range(1, MAX_ROUNDS + 1):
        over = [(b, key, used[(b, key)] - v.limit(threshold)) for (b, key), v in volumes.items()
                if used[(b, key)] > v.limit(threshold)]
        if not over:
            break
        room = [(v.broker, v.key, v.dirs[0], v.rack, v.limit(threshold) - used[k], v.receives)
                for k, v in volumes.items() if used[k] < v.limit(threshold)]
        if not room:
            break
        excess = spark.createDataFrame(over, "broker int, volume string, excess long")
        receivers = spark.createDataFrame(
            room, "broker int, volume string, log_dir string, rack string, room long, receives boolean")
        leaving = movers(current, excess).localCheckpoint(eager=True)
        now = current.select("topic", "partition", "slot", F.col("broker").alias("now"))
        holders = (slots.join(leaving.select("topic", "partition").distinct(), ["topic", "partition"])
                   .join(now, ["topic", "partition", "slot"], "left")
                   .groupBy("topic", "partition").agg(F.collect_set(F.coalesce("now", "broker")).alias("held")))
        taken = accepted(offers(leaving, holders, receivers, round_no)).localCheckpoint(eager=True)
        shifts = taken.groupBy("broker", "volume", "to_broker", "to_volume").agg(F.sum("size").alias("bytes")).collect()
        if not shifts:
            break
        rounds = round_no
        for row in shifts:
            used[(row["broker"], row["volume"])] -= int(row["bytes"])
            used[(row["to_broker"], row["to_volume"])] += int(row["bytes"])
        moved = taken.select("topic", "partition", "slot", F.col("to_broker").alias("new_broker"),
                             F.col("to_dir").alias("new_dir"), F.col("to_volume").alias("new_volume"))
        current = (current.join(moved, ["topic", "partition", "slot"], "left")
                   .select("topic", "partition", "slot", F.coalesce("new_broker", "broker").alias("broker"),
                           F.coalesce("new_dir", "log_dir").alias("log_dir"), "size", "selected",
                           F.coalesce("new_volume", "volume").alias("volume"), "rack")
                   .localCheckpoint(eager=True))
    ended = (original.select("topic", "partition", "slot", "size", "broker", F.col("log_dir").alias("from_dir"))
             .join(current.select("topic", "partition", "slot", F.col("broker").alias("to_broker"),
                                  F.col("log_dir").alias("to_dir")), ["topic", "partition", "slot"])
             .filter((F.col("to_broker") != F.col("broker")) | (F.col("to_dir") != F.col("from_dir"))))
    after = {k: Volume(**{**v.__dict__, "used": used[k]}) for k, v in volumes.items()}
    return Relief(moves=ended.select(*RELIEF_MOVE_COLUMNS), before=volumes, after=after, rounds=rounds)


def least_bytes(volumes: Mapping[tuple[int, str], Volume], threshold: float) -> int:
    """The fewest bytes any plan moves: every volume above the threshold sheds at least its excess."""
    return sum(max(v.used - v.limit(threshold), 0) for v in volumes.values())


def above(volumes: Mapping[tuple[int, str], Volume], threshold: float) -> list[Volume]:
    return sorted((v for v in volumes.values() if v.used > v.limit(threshold)), key=lambda v: (v.broker, v.key))


def report(before: Mapping[tuple[int, str], Volume], after: Mapping[tuple[int, str], Volume],
           threshold: float) -> tuple[bool, str]:
    """Whether every dir ends at or under the threshold, and when not, the best reachable state in words: the dirs
    still above and why none of their replicas could go."""
    left = above(after, threshold)
    if not left:
        return True, ""
    named = ", ".join(f"{'+'.join(v.dirs)} of broker {v.broker} at {v.used / v.total:.1%}" for v in left[:5])
    more = f" and {len(left) - 5} more" if len(left) > 5 else ""
    racks = {v.rack for v in left}
    free = sum(max(v.limit(threshold) - v.used, 0) for v in after.values() if v.receives and v.rack in racks)
    need = sum(v.used - v.limit(threshold) for v in left)
    why = (f"the volumes that could take their replicas (same broker, or same rack) have {free} bytes of room under "
           f"the threshold for {need} bytes above it" if free < need else
           "no replica of theirs fits the room left elsewhere (a replica is larger than any volume's room, or every "
           "broker with room already holds one of its partition)")
    return False, (f"best reachable state: log dirs still above {threshold:.0%} of capacity: {named}{more}; {why}")


def dir_loads(volumes: Mapping[tuple[int, str], Volume], replicas: DataFrame) -> tuple[DirLoad, ...]:
    """Every dir with its Kafka bytes and replicas (from ``replicas``: broker, log_dir, size) and its volume's size
    and use."""
    counted = {(int(r["broker"]), r["log_dir"]): (int(r["bytes"]), int(r["count"])) for r in
               replicas.groupBy("broker", "log_dir").agg(F.sum("size").alias("bytes"), F.count("*").alias("count"))
               .collect()}
    return tuple(DirLoad(broker=v.broker, log_dir=d, bytes=counted.get((v.broker, d), (0, 0))[0],
                         replicas=counted.get((v.broker, d), (0, 0))[1], total_bytes=v.total, used_bytes=v.used)
                 for v in sorted(volumes.values(), key=lambda v: (v.broker, v.key)) for d in v.dirs)


def replicas_after(partitions: DataFrame, selected: Column, relief: DataFrame) -> DataFrame:
    """Every replica with a known dir where the plan leaves it: broker, log_dir, size."""
    moved = relief.select("topic", "partition", "slot", "to_broker", "to_dir")
    return (replica_dirs(partitions, selected).join(moved, ["topic", "partition", "slot"], "left")
            .select(F.coalesce("to_broker", "broker").alias("broker"), F.coalesce("to_dir", "log_dir").alias("log_dir"),
                    "size"))


def relief_plan_lines(partitions: DataFrame, relief: DataFrame) -> DataFrame:
    """``plan.json``'s lines for the partitions the plan touches: each moved replica's slot takes its new broker, and
    ``log_dirs`` names its new dir (``any`` for the replicas that stay)."""
    moved = relief.groupBy("topic", "partition").agg(
        F.map_from_entries(F.collect_list(F.struct("slot", F.struct("to_broker", "to_dir")))).alias("to"))
    at = partitions.join(moved, ["topic", "partition"]).select(
        "topic", "partition", "to",
        F.transform("replicas", lambda b, i: F.coalesce(F.element_at("to", (i + 1).cast("int")).getField("to_broker"),
                                                        b)).alias("replicas"))
    return storage.plan_json_lines(
        at, F.transform("replicas", lambda _b, i: F.coalesce(
            F.element_at("to", (i + 1).cast("int")).getField("to_dir"), F.lit("any"))))
