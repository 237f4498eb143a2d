"""The planning pipeline end to end: snapshot in, target assignment and metrics out.

The driver runs a small, bounded number of rounds, never a loop over partitions. A round is three Spark jobs: pick
and place the movers (checkpointed, small), sum their effect per broker (a few hundred numbers come back), and apply
them to the state (checkpointed, so the query plan does not grow with the rounds). The per-broker sums are carried
from round to round by adding each round's changes; they are recounted from the state only between phases.

1. Read the snapshot, check it, decide the broker facts (:class:`kpo.planning.spark.cluster.Cluster`).
2. Build the state: selection, replication factor (:mod:`kpo.planning.spark.prepare`).
3. Byte rounds until nothing is forced and every broker is inside the band, or a round moves nothing; on inputs too
   large for the greedy candidate, a round that moves few replicas hands the rest to the greedy on the driver
   (:mod:`kpo.planning.spark.finish`: a round costs seconds however few replicas it moves). Then, if
   brokers are still outside the band, relief rounds that bring the worst ones closer (:func:`decide_lift`,
   :func:`decide_relieve`): the band may be out of reach, the worst deviation still has to be as small as it can be.
4. Count rounds, if replica counts are still outside their band (then byte rounds again if they moved anything); on
   the finish's inputs, one count greedy on the driver instead (:func:`kpo.planning.spark.finish.count_finish`), run
   by the byte finish itself on the rows it collected when it brought every broker's bytes into the band.
5. Leader rounds (reorders only, :mod:`kpo.planning.spark.leaders`).
6. Check the hard constraints on the result and measure it (:mod:`kpo.planning.spark.quality`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from kpo.domain.greedy import Key
from kpo.domain.plan_contract import (
    BROKERS_FILE,
    DISK_GOALS,
    PARTITIONS_PATH,
    REQUEST_FILE,
    STATUS_OK,
    BrokerInfo,
    ContractError,
    Goal,
    PlanMetrics,
    PlanRequest,
    parse_brokers,
)
from kpo.planning.spark import candidate, disks, finish, leaders, moves, quality, relieve, storage
from kpo.planning.spark.cluster import Cluster, PlanError
from kpo.planning.spark.demote import demote, lead_elsewhere
from kpo.planning.spark.exprs import members
from kpo.planning.spark.finish import Row as FinishRow
from kpo.planning.spark.flow import handovers
from kpo.planning.spark.prepare import offline_partitions, rack_bound, selection, to_state
from kpo.planning.spark.rounds import (
    BrokerStats,
    RoundPlan,
    decide_bytes,
    decide_counts,
    decide_leaders,
    decide_lift,
    decide_relieve,
    with_deltas,
)

MAX_BYTE_ROUNDS = 6
MAX_RELIEF_ROUNDS = 4
MAX_COUNT_ROUNDS = 2
MAX_LEADER_ROUNDS = 4
# Above this many replicas the byte rounds end with the driver's finish (:mod:`kpo.planning.spark.finish`).
FINISH_ABOVE = candidate.MAX_REPLICAS

log = logging.getLogger("kpo.planning.spark")


@dataclass(frozen=True)
class Snapshot:
    request: PlanRequest
    brokers: tuple[BrokerInfo, ...]
    partitions: DataFrame


@dataclass(frozen=True)
class PlanResult:
    state: DataFrame
    cluster: Cluster | None
    metrics: PlanMetrics
    #: ``plan.json``'s lines when the goal writes its own (the disk goals: log dirs); else from ``state``.
    lines: DataFrame | None = None

    def plan_lines(self) -> DataFrame:
        return self.lines if self.lines is not None else plan_lines(self.state)


def read_snapshot(spark: SparkSession, input_uri: str) -> Snapshot:
    try:
        request = PlanRequest.from_json(storage.read_document(spark, storage.join(input_uri, REQUEST_FILE)))
        brokers = parse_brokers(storage.read_document(spark, storage.join(input_uri, BROKERS_FILE)))
    except ContractError as err:
        raise PlanError(str(err)) from None
    partitions = storage.read_partitions(spark, storage.join(input_uri, PARTITIONS_PATH))
    return Snapshot(request=request, brokers=brokers, partitions=partitions)


def checkpoint(df: DataFrame) -> DataFrame:
    return df.localCheckpoint(eager=True)


def referenced_brokers(partitions: DataFrame) -> list[int]:
    """Broker ids the replicas name, in the same pass that refuses a snapshot Kafka could not have produced."""
    row = (partitions.select(F.size("replicas").alias("n"), F.size(F.array_distinct("replicas")).alias("distinct"),
                             F.explode_outer("replicas").alias("broker"))
           .agg(F.sum(F.when(F.col("n") != F.col("distinct"), 1).otherwise(0)).alias("twice"),
                F.sum(F.when(F.col("n") <= 0, 1).otherwise(0)).alias("empty"),
                F.sort_array(F.collect_set("broker")).alias("brokers")).first())
    assert row is not None
    if row["twice"]:
        bad = partitions.filter(F.size(F.array_distinct("replicas")) != F.size("replicas")).limit(3).collect()
        raise PlanError("the snapshot lists a broker twice in a partition's replicas: "
                        + ", ".join(f"{r['topic']}-{r['partition']} {list(r['replicas'])}" for r in bad))
    if row["empty"]:
        bad = partitions.filter(F.size("replicas") <= 0).limit(3).collect()
        raise PlanError("partitions without replicas in the snapshot: "
                        + ", ".join(f"{r['topic']}-{r['partition']}" for r in bad))
    return [int(b) for b in row["brokers"]]


def _load_share(partitions: DataFrame) -> dict[int, float]:
    rows = (partitions.select(F.coalesce("size_bytes", F.lit(0)).alias("size"), F.explode("replicas").alias("b"))
            .groupBy("b").agg(F.sum("size").alias("load")).collect())
    heaviest = max((float(r["load"]) for r in rows), default=0.0) or 1.0
    return {int(r["b"]): float(r["load"]) / heaviest for r in rows}


def _describe_stuck(state: DataFrame, cluster: Cluster) -> str:
    rows = moves.replica_view(state, cluster).filter("forced").limit(5).collect()
    where = ", ".join(f"{r['topic']}-{r['partition']} {list(r['replicas'])} slot {r['slot']}" for r in rows)
    racks = f" in distinct racks ({cluster.rack_count} racks take part)" if cluster.rack_mode else ""
    return f"cannot place every replica that must move{racks}; for example {where}"


class _Rounds:
    """The driver's loop state: the current state DataFrame, the per-broker sums, the round counter."""

    def __init__(self, state: DataFrame, cluster: Cluster, request: PlanRequest, closed: bool) -> None:
        self.state = state
        self.cluster = cluster
        self.request = request
        self.closed = closed
        self.stats = moves.broker_stats(state, cluster)
        # Whether ``stats`` are the state's own sums: a Spark round's deltas may miss a replica whose rack share it
        # changed (forced or not), so a recount follows it; the finishes' deltas are exact (:func:`finish.deltas`).
        self.exact = True
        self.count = 0
        # Too large for the greedy candidate: the byte rounds' last few replicas are placed on the driver instead.
        self.finishing = sum(s.replicas for s in self.stats.values()) > FINISH_ABOVE
        self.last_sent: dict[int, float] = {}
        # Replicas the count greedy moved on the driver (in the byte finish or a count finish of its own).
        self.counted = 0
        # The brokers whose partitions the count greedy last saw, until a Spark round changes the state: a count
        # finish with no other sender would collect them again for nothing.
        self.count_seen: frozenset[int] = frozenset()
        # Why the balancing rounds ended, for the note when the band is not reached.
        self.stopped = "its byte rounds ended"
        # Where the racks keep the band out of reach, the level each broker's rack allows (empty where they cannot).
        self.levels: dict[int, float] = {} if closed else quality.rack_levels(state, cluster, self.stats)

    def recount(self) -> None:
        self.stats = moves.broker_stats(self.state, self.cluster)
        self.exact = True

    def settle(self) -> None:
        """Recount between phases, unless the sums are exact already."""
        if not self.exact:
            self.recount()

    def move(self, plan: RoundPlan) -> int:
        picked = moves.pick_movers(moves.replica_view(self.state, self.cluster, plan.out), plan, self.cluster,
                                   self.count)
        placed = checkpoint(moves.place_movers(picked, plan, self.cluster, self.count))
        deltas = moves.move_deltas(placed)
        self.last_sent = {b: float(-d.bytes) for b, d in deltas.items() if b is not None and d.bytes < 0}
        moved = sum(d.replicas for b, d in deltas.items() if d.replicas > 0)
        if moved:
            self.state = checkpoint(moves.apply_moves(self.state, placed))
            self.stats = with_deltas(self.stats, deltas)
            self.exact = False
            self.count_seen = frozenset()
        self.count += 1
        log.info("round %d (%s): %d replicas moved", self.count, plan.unit, moved)
        return moved

    def bytes(self, limit: int) -> None:
        broad = False
        for _ in range(limit):
            forced = moves.forced_by_domain(self.state, self.cluster) if self.closed else None
            plan = decide_bytes(self.stats, self.cluster, self.request.tolerance, closed=self.closed,
                                forced_by_domain=forced, broad=broad, levels=self.levels)
            if plan.idle:
                self.stopped = "its byte rounds found no quota left to fill"
                return
            moved = self.move(plan)
            if self.finishing and moved < finish.FEW_MOVES and not any(
                    s.forced_replicas for s in self.stats.values()):
                self.finish()
                return
            if not moved:
                if broad:
                    self.stopped = "a byte round moved nothing"
                    return
                # Nothing could go where the quotas pointed: open every broker with room in the band instead.
                broad = True
        self.stopped = f"it ran its {limit} byte rounds"

    def finish(self) -> int:
        """The last few replicas of the byte rounds, placed by the greedy on the driver (:mod:`finish`), and when
        that brings every broker's bytes into the band, the counts' too, from the same collection; how many
        partitions it changed."""
        senders = finish.sources(self.stats, self.cluster, self.request.tolerance, self.levels)
        if not senders:
            self.stopped = "its byte rounds found no quota left to fill"
            return 0
        # The count greedy's partitions come along: one collection and one join serve both.
        counting = finish.count_sources(self.stats, self.cluster, self.request.tolerance)
        rows = self._collect(senders, counting)
        finished = finish.finish(rows, self.stats, self.cluster, self.request)
        targets = finished.targets
        self.count += 1
        log.info("round %d (finish): %d partitions changed on the driver, from %d collected%s", self.count,
                 len(targets), len(rows), " (its move limit reached)" if finished.capped else "")
        self.stopped = (f"its byte rounds moved few replicas and the greedy that placed the last ones stopped at its "
                        f"limit of {finish.MAX_MOVES} moves" if finished.capped else
                        "its byte rounds moved few replicas and the greedy that placed the last ones found no single "
                        "replica move that brings a broker closer to the band")
        after = with_deltas(self.stats, finish.deltas(rows, targets, self.cluster))
        if not finish.outside_band(after, self.cluster, self.request.tolerance, self.levels):
            targets = self._count_greedy(rows, targets, after)
            self.count_seen = senders | counting
        self._take(rows, targets)
        return len(targets)

    def _count_greedy(self, rows: list[FinishRow], targets: dict[Key, tuple[int, ...]],
                      stats: Mapping[int | None, BrokerStats]) -> dict[Key, tuple[int, ...]]:
        """``targets`` with the count greedy's moves on top, on the rows as the byte greedy left them."""
        if not finish.count_sources(stats, self.cluster, self.request.tolerance):
            return targets
        placed = finish.as_placed(rows, targets)
        counted = finish.count_finish(placed, stats, self.cluster, self.request)
        moved = finish.replicas_moved(placed, counted)
        self.counted += moved
        log.info("round %d (finish): %d replicas moved for the counts", self.count, moved)
        return {**targets, **counted}

    def count_finish(self) -> int:
        """Replica counts brought into their band by the count greedy on the driver (:mod:`finish`), in place of
        count rounds; how many replicas it moved."""
        senders = finish.count_sources(self.stats, self.cluster, self.request.tolerance)
        if senders <= self.count_seen:
            return 0
        rows = self._collect((), senders)
        targets = finish.count_finish(rows, self.stats, self.cluster, self.request)
        self.count += 1
        moved = finish.replicas_moved(rows, targets)
        self.counted += moved
        log.info("round %d (count finish): %d replicas moved on the driver, from %d partitions collected",
                 self.count, moved, len(rows))
        self._take(rows, targets)
        return moved

    def _collect(self, brokers: Collection[int], smallest_on: Collection[int] = ()) -> list[FinishRow]:
        """The selected partitions holding a replica on one of ``brokers``, and those holding one of the
        :data:`finish.SMALLEST` smallest replicas of a broker in ``smallest_on``, for a finish on the driver."""
        rows = finish_rows(self.state, brokers, smallest_on).collect()
        return [FinishRow(topic=r["topic"], partition=int(r["partition"]), size=int(r["size"]),
                          replicas=tuple(int(b) for b in r["replicas"]),
                          original=tuple(int(b) for b in r["original"] or ())) for r in rows]

    def _take(self, rows: list[FinishRow], targets: Mapping[Key, tuple[int, ...]]) -> None:
        if targets:
            self.state = checkpoint(candidate.with_targets(self.state, targets, unchanged="replicas"))
            self.stats = with_deltas(self.stats, finish.deltas(rows, targets, self.cluster))

    def relief(self, limit: int) -> None:
        """When the byte rounds stop outside the band: lift the brokers below it from any broker above the mean,
        relieve those above it into their own rack too, until neither moves anything."""
        exhausted: set[int] = set()
        for _ in range(limit):
            moved = 0
            lift = decide_lift(self.stats, self.cluster, self.request.tolerance, closed=self.closed,
                               exhausted=exhausted, levels=self.levels)
            if not lift.idle:
                moved += self.move(lift)
                # A giver that sent less than half its quota has little the brokers below the band can take (its
                # replicas' partitions are there already): the next lift asks the others.
                exhausted |= {b for b, q in lift.out.items() if self.last_sent.get(b, 0.0) < q / 2}
            relieve = decide_relieve(self.stats, self.cluster, self.request.tolerance, levels=self.levels)
            if not relieve.idle:
                moved += self.move(relieve)
            if not moved and lift.idle:
                self.stopped = ("its relief rounds found no more replica to move (a replica moves at most once in a "
                                "plan, to a broker below the band or to its own rack)")
                return
        self.stopped = f"it ran its {limit} relief rounds (the limit)"

    def counts(self, limit: int) -> int:
        """Replicas moved for the counts in this phase."""
        if self.finishing:
            return self.count_finish()
        total = 0
        for _ in range(limit):
            plan = decide_counts(self.stats, self.cluster, self.request.tolerance)
            moved = 0 if plan.idle else self.move(plan)
            if not moved:
                break
            total += moved
        return total

    def leaders(self, limit: int) -> None:
        for _ in range(limit):
            quotas = decide_leaders(self.stats, self.cluster, self.request.tolerance)
            if not quotas.out or not quotas.into:
                return
            links = leaders.leader_links(self.state, self.cluster)
            flows = handovers({b: int(q) for b, q in quotas.out.items()},
                              {b: int(q) for b, q in quotas.into.items()}, links)
            if not flows:
                return
            chosen = checkpoint(leaders.leader_handovers(self.state, self.cluster, flows, self.count))
            deltas = leaders.handover_deltas(chosen)
            self.count += 1
            handed = sum(d.leaders for d in deltas.values() if d.leaders > 0)
            log.info("round %d (leaders): %d handovers for %d wanted", self.count, handed, int(quotas.total_out))
            if not handed:
                return
            self.state = checkpoint(leaders.apply_handovers(self.state, chosen))
            self.stats = with_deltas(self.stats, deltas)


def make_plan(snapshot: Snapshot, *, clock: Callable[[], float] = time.monotonic) -> PlanResult:
    started = clock()
    request = snapshot.request
    partitions = checkpoint(snapshot.partitions)
    if request.goal in DISK_GOALS:
        return _dir_plan(snapshot, partitions, started, clock)
    if request.goal is Goal.RELIEVE_CAPACITY:
        return _relief_plan(snapshot, partitions, started, clock)
    cluster = Cluster.of(request, snapshot.brokers, referenced_brokers(partitions))
    log.info("snapshot read: %d brokers take part, racks %s (%.1fs)", len(cluster.eligible),
             "in force" if cluster.rack_mode else "not in force", clock() - started)
    lost, lost_examples = offline_partitions(partitions, request, cluster)
    if lost:
        log.warning("%d selected partitions have no replica on an alive broker and are left out: %s", lost,
                    ", ".join(lost_examples))
    share = _load_share(partitions) if request.goal is Goal.REPLICATION_FACTOR else None
    state = checkpoint(to_state(partitions, request, cluster, share))
    if request.goal is Goal.DEMOTE_BROKERS:
        return _demotion(state, cluster, request, started, clock)
    min_rf, max_rf = selected_factors(state)
    holders = cluster.alive - cluster.removed  # excluded brokers keep their replicas: they count
    if max_rf > len(holders):
        raise PlanError(f"a selected partition needs {max_rf} replicas but only {len(holders)} "
                        f"brokers can hold them: {sorted(holders)}")
    closed = rack_bound(state, cluster, min_rf)
    run = _Rounds(state, cluster, request, closed)
    initial = run.stats
    lb_bytes, lb_replicas = quality.lower_bounds(initial, cluster, request.tolerance, closed=closed)
    log.info("state built, lower bound %d bytes / %d replicas (%.1fs)", lb_bytes, lb_replicas, clock() - started)
    run.bytes(MAX_BYTE_ROUNDS)
    run.settle()
    if any(s.forced_replicas for s in run.stats.values()):
        raise PlanError(_describe_stuck(run.state, cluster))
    if cluster.balancing:
        run.relief(MAX_RELIEF_ROUNDS)
    if run.counts(MAX_COUNT_ROUNDS):
        run.bytes(2)  # small replicas moved for the counts may have tipped a broker's bytes
        run.settle()
    chosen = "rounds"
    # Without balancing too: where only new or forced replicas are placed, the greedy's one at a time, largest first,
    # onto the least loaded broker may leave the brokers' ends closer than the rounds' bulk quotas.
    if sum(s.replicas for s in initial.values()) <= candidate.MAX_REPLICAS:
        if _greedy_instead(run, state):
            chosen = "greedy"
            if cluster.balancing:
                run.stopped = ("the plan is the greedy candidate's (closer to the band than the rounds' plan, or as "
                               "close for fewer bytes), which stops when no single replica move brings the highest "
                               "broker closer or the lowest")
        log.info("greedy candidate considered, %s plan kept (%.1fs)", chosen, clock() - started)
    if cluster.no_leaders:
        run.state = checkpoint(lead_elsewhere(run.state, cluster.no_leaders))
        run.recount()
    if cluster.balancing:  # without it, the preferred leaders stay too: nothing but the new replicas changes
        run.leaders(MAX_LEADER_ROUNDS)
    log.info("rounds done (%.1fs)", clock() - started)
    result = measure(run.state, cluster, request, initial=initial, closed=closed, rounds=run.count,
                     planning_seconds=clock() - started, stopped=run.stopped)
    result = result.model_copy(update={"offline_partitions": lost, "offline_examples": lost_examples,
                                       "chosen_plan": chosen})
    return PlanResult(state=run.state, cluster=cluster, metrics=result)


def _dir_plan(snapshot: Snapshot, partitions: DataFrame, started: float, clock: Callable[[], float]) -> PlanResult:
    """RemoveDisks and RebalanceDisks (:mod:`kpo.planning.spark.disks`): copies between the log dirs of one broker,
    no rounds; the replica lists stay as they are."""
    request = snapshot.request
    selected = selection(request, partitions)
    dir_moves, loads = disks.plan_dir_moves(partitions, selected, request, snapshot.brokers)
    dir_moves = checkpoint(dir_moves)
    loads = checkpoint(loads)
    after = disks.loads_after(loads, dir_moves)
    counts = partitions.agg(F.count("*").alias("all"), F.sum(F.when(selected, 1).otherwise(0)).alias("chosen")).first()
    moved = dir_moves.agg(F.count("*").alias("replicas"), F.coalesce(F.sum("size"), F.lit(0)).alias("bytes"),
                          F.countDistinct("topic", "partition").alias("partitions")).first()
    assert counts is not None and moved is not None
    before_dirs, after_dirs = disks.collect_loads(loads), disks.collect_loads(after)
    band, message = disks.band_of(request, loads, after_dirs)
    metrics = PlanMetrics(
        status=STATUS_OK, message=message, goal=request.goal, tolerance=request.tolerance,
        partitions=int(counts["all"]), partitions_selected=int(counts["chosen"] or 0),
        partitions_changed=int(moved["partitions"]), replicas_to_move=int(moved["replicas"]),
        bytes_to_move=int(moved["bytes"]), lower_bound_bytes=disks.least_bytes(request, loads, partitions, selected),
        band_reached=band, dirs_before=before_dirs, dirs_after=after_dirs,
        planning_seconds=round(clock() - started, 3))
    log.info("disk plan: %d replica(s), %d bytes between log dirs (%.1fs)", metrics.replicas_to_move,
             metrics.bytes_to_move, clock() - started)
    return PlanResult(state=partitions, cluster=None, metrics=metrics,
                      lines=disks.dir_plan_lines(partitions, dir_moves))


def _relief_plan(snapshot: Snapshot, partitions: DataFrame, started: float, clock: Callable[[], float]
                 ) -> PlanResult:
    """RelieveCapacity (:mod:`kpo.planning.spark.relieve`): copies to another dir of the broker or to a broker of the
    same rack until every dir is under the threshold; the metrics say how far it got when it could not."""
    request = snapshot.request
    assert request.threshold is not None
    selected = selection(request, partitions)
    relief = relieve.plan_relief(partitions, selected, request, snapshot.brokers)
    plan_moves = checkpoint(relief.moves)
    counts = partitions.agg(F.count("*").alias("all"), F.sum(F.when(selected, 1).otherwise(0)).alias("chosen")).first()
    moved = plan_moves.agg(F.count("*").alias("replicas"), F.coalesce(F.sum("size"), F.lit(0)).alias("bytes"),
                           F.countDistinct("topic", "partition").alias("partitions")).first()
    assert counts is not None and moved is not None
    reached, message = relieve.report(relief.before, relief.after, request.threshold)
    metrics = PlanMetrics(
        status=STATUS_OK, message=message, goal=request.goal, tolerance=request.tolerance,
        partitions=int(counts["all"]), partitions_selected=int(counts["chosen"] or 0),
        partitions_changed=int(moved["partitions"]), replicas_to_move=int(moved["replicas"]),
        bytes_to_move=int(moved["bytes"]), lower_bound_bytes=relieve.least_bytes(relief.before, request.threshold),
        band_reached=reached, rack_aware=request.rack_aware, rounds=relief.rounds,
        dirs_before=relieve.dir_loads(relief.before, disks.replica_dirs(partitions, selected)),
        dirs_after=relieve.dir_loads(relief.after, relieve.replicas_after(partitions, selected, plan_moves)),
        planning_seconds=round(clock() - started, 3))
    log.info("relief plan: %d replica(s), %d bytes in %d round(s), threshold %s (%.1fs)", metrics.replicas_to_move,
             metrics.bytes_to_move, relief.rounds, "met" if reached else "not met", clock() - started)
    return PlanResult(state=partitions, cluster=None, metrics=metrics,
                      lines=relieve.relief_plan_lines(partitions, plan_moves))


def _greedy_instead(run: _Rounds, initial: DataFrame) -> bool:
    """Plan with the greedy candidate from the ``initial`` state and take its plan instead of the rounds' when it is
    better and keeps every rule (:mod:`kpo.planning.spark.candidate`); whether it did."""
    cluster, request = run.cluster, run.request
    greedy = candidate.greedy_plan(initial, cluster, request)
    ours = candidate.standing({b: float(run.stats[b].bytes) if b in run.stats else 0.0 for b in cluster.eligible},
                              candidate.bytes_moved(run.state))
    theirs = candidate.standing(greedy.loads, greedy.bytes_moved)
    log.info("greedy candidate: %d bytes moved, %.3f to %.3f x mean; rounds: %d bytes, %.3f to %.3f x mean",
             theirs.bytes_moved, theirs.low, theirs.high, ours.bytes_moved, ours.low, ours.high)
    if not candidate.better(theirs, ours, request.tolerance):
        return False
    proposed = checkpoint(candidate.with_targets(initial, greedy.targets))
    counted = quality.counters(proposed, cluster, request.replication_factor)
    if counted["broken"]:
        log.warning("greedy candidate breaks a hard rule on %d partitions: not taken", counted["broken"])
        return False
    if counted["rack_violations_after"] > quality.counters(run.state, cluster)["rack_violations_after"]:
        log.warning("greedy candidate has more rack violations than the rounds' plan: not taken")
        return False
    run.state = proposed
    run.recount()
    return True


def _demotion(state: DataFrame, cluster: Cluster, request: PlanRequest, started: float,
              clock: Callable[[], float]) -> PlanResult:
    """DemoteBrokers: one reordering, no rounds; no replica changes broker, so the per-broker sums are the same."""
    initial = moves.broker_stats(state, cluster)
    demoted = checkpoint(demote(state, request.brokers))
    result = measure(demoted, cluster, request, initial=initial, closed=False, rounds=0,
                     planning_seconds=clock() - started)
    return PlanResult(state=demoted, cluster=cluster, metrics=result)


def selected_factors(state: DataFrame) -> tuple[int, int]:
    """The smallest and the largest replication factor among the selected partitions (0 when none is)."""
    shape = state.agg(F.min(F.when(F.col("selected"), F.size("replicas"))).alias("min_rf"),
                      F.max(F.when(F.col("selected"), F.size("replicas"))).alias("max_rf")).first()
    assert shape is not None
    return int(shape["min_rf"] or 0), int(shape["max_rf"] or 0)


def measure(state: DataFrame, cluster: Cluster, request: PlanRequest, *, initial: Mapping[int | None, BrokerStats],
            closed: bool, rounds: int, planning_seconds: float, check: bool = True, stopped: str = "") -> PlanMetrics:
    """Metrics of the assignment in ``state``; with ``check``, a target that breaks a hard constraint is an error.

    ``initial`` are the per-broker sums before any move, for the lower bound. When the band is not reached the bound
    reported is the one for the band the assignment did reach: the least any plan at least as even must move, not
    the bound of a target nobody met. Then the note says whether the plan meets the bound on how even any plan can be
    (:func:`kpo.planning.spark.quality.reach_of`), and if not, why the planner stopped (``stopped``)."""
    counted = quality.counters(state, cluster, request.replication_factor)
    if check and counted["broken"]:
        bad = state.filter(quality.broken(cluster, request.replication_factor)).limit(3).collect()
        raise PlanError("internal error, the plan breaks a hard constraint: "
                        + ", ".join(f"{r['topic']}-{r['partition']} {list(r['replicas'])}" for r in bad))
    before, after = quality.broker_loads(state, cluster)
    reached, note = quality.band_report(after, cluster, request.tolerance)
    bound = None
    if reached is False:  # the bound costs a pass over the partitions: only where the note needs it
        bound = quality.reach_of(state, cluster, initial, after)
        reached, note = quality.band_report(after, cluster, request.tolerance, bound, stopped)
    spread = quality.spread(after, cluster) if reached is False else None
    lower_bound_bytes, lower_bound_replicas = quality.lower_bounds(initial, cluster, request.tolerance, closed=closed,
                                                                   reached=spread)
    if spread is not None:
        note += (f"; the lower bound is for the band reached ({spread.bytes[0]:.2f} to {spread.bytes[1]:.2f} x mean "
                 f"bytes)")
    return PlanMetrics(
        status=STATUS_OK, message=note, band_reached=reached, goal=request.goal, tolerance=request.tolerance,
        partitions=counted["partitions"],
        partitions_selected=counted["partitions_selected"], partitions_changed=counted["partitions_changed"],
        replicas_to_move=counted["replicas_to_move"], bytes_to_move=counted["bytes_to_move"],
        leader_changes=counted["leader_changes"], lower_bound_bytes=lower_bound_bytes,
        lower_bound_replicas=lower_bound_replicas, rack_aware=cluster.rack_mode,
        reach_min=None if bound is None else round(bound.lowest.value, 4),
        reach_max=None if bound is None else round(bound.highest.value, 4),
        reach_met=None if bound is None or spread is None
        else bound.met_by(spread.bytes[0], spread.bytes[1], request.tolerance),
        rack_violations_before=counted["rack_violations_before"],
        rack_violations_after=counted["rack_violations_after"],
        replicas_left_on_removed_brokers=counted["replicas_left_on_removed_brokers"],
        balance_before=quality.balance(before, cluster), balance_after=quality.balance(after, cluster),
        brokers_before=before, brokers_after=after, rounds=rounds, planning_seconds=round(planning_seconds, 3))


def finish_rows(state: DataFrame, brokers: Collection[int], smallest_on: Collection[int]) -> DataFrame:
    """The rows a finish collects: every selected partition with a replica on one of ``brokers`` (the byte greedy
    weighs them all) and those with one of the :data:`finish.SMALLEST` smallest replicas of a broker in
    ``smallest_on`` (the count greedy tries a broker's smallest only)."""
    columns = ["topic", "partition", "size", "replicas", "original"]
    holding = F.exists("replicas", members(brokers).has) if brokers else F.lit(False)
    few = [b for b in smallest_on if b not in set(brokers)]
    if not few:
        return state.filter(F.col("selected") & holding).select(*columns)
    on_few = members(few)
    replicas = (state.filter(F.col("selected") & F.exists("replicas", on_few.has))
                .select("topic", "partition", "size", F.explode("replicas").alias("broker"))
                .filter(on_few.has(F.col("broker"))))
    by_size = Window.partitionBy("broker").orderBy("size", "topic", "partition")
    small = (replicas.withColumn("rank", F.row_number().over(by_size)).filter(F.col("rank") <= finish.SMALLEST)
             .select("topic", "partition").distinct().withColumn("small", F.lit(True)))
    return (state.filter(F.col("selected")).join(small, ["topic", "partition"], "left")
            .filter(holding | F.col("small").isNotNull()).select(*columns))


def plan_lines(state: DataFrame) -> DataFrame:
    """``plan.json``'s lines (:func:`storage.plan_json_lines`): the partitions whose replica list changes, every dir
    ``any``."""
    return storage.plan_json_lines(state.filter(F.col("replicas") != F.col("original")),
                                   F.transform("replicas", lambda _: F.lit("any")))
