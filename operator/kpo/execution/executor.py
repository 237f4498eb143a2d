"""The executor of one Kafka cluster: the only sender of its moves, cancellations, elections and throttle changes.

Resources are intents. A PartitionReassignment's tick validates its spec, decides its life cycle from the cluster's
shared look (:mod:`.observation`) and hands its candidate moves to :meth:`ClusterExecutor.admit`; what the executor
admits, the tick sends through :meth:`ClusterExecutor.send`, and nothing else of kpo writes reassignments to that
cluster. The limits are the cluster's, so admission judges every resource's waiting moves against everything in
flight in the whole cluster: what Kafka lists (anyone's moves), plus *reservations* — moves admitted or sent that no
look has shown yet. Before reservations, ticks running side by side each admitted against a picture that lacked the
others' fresh submissions, and 100 resources put 23 copies into one broker whose limit was 2.

A reservation lives from admission until a look that began after its submission ended: that look lists the move if it
still runs (and then Kafka's listing counts it), or it is over. A reservation whose tick never sent it (the tick
failed in between) is dropped when the tick ends (:meth:`settle`), or after ``reservation_seconds`` at the latest.

Who moves what: a move the executor sent is its resource's for as long as Kafka lists it with that target, whatever
the resources' statuses say yet; other listed moves belong to the resource whose status claims them, else to nobody
of kpo's (a foreign move, which still counts against every broker limit).

The cluster's throttles are judged here too (:class:`~kpo.execution.ledger.ThrottleLedger`), one resource at a time,
against every resource's journal as the cluster's one record keeps them, so two resources never both take a rate for
someone else's.

An executor acts only while ``may_act`` says so: with leader election, a replica whose Lease renewal failed stops
sending at once, even before its process ends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from kpo.domain.model import KafkaRefusal, OngoingReassignment, Replicas, TopicPartition
from kpo.domain.reassignment import Candidate
from kpo.domain.scheduling import Execution, Move, Owner, SchedulerConfig, moves_to_start
from kpo.execution.ledger import ThrottleLedger, ThrottleRecord
from kpo.execution.observation import Look, SharedLooks
from kpo.execution.rates import WriteRates
from kpo.kafka.admin import KafkaAdmin, KafkaRequestRefused, KafkaUnavailable

log = logging.getLogger(__name__)

FOREIGN = Owner(created=datetime.min.replace(tzinfo=UTC), namespace="", name="external")


class NotLeading(KafkaUnavailable):
    """This operator replica may not act on Kafka (it lost, or never held, the leader Lease)."""

    reason = "NotLeader"


@dataclass
class _Waiting:
    moves: list[Move]
    execution: Execution
    seen: float
    #: Waiting moves whose resource has done what must precede them (originals on record, throttle in place): the
    #: executor may send these itself the moment a slot frees (:meth:`ClusterExecutor.refill`).
    armed: frozenset[TopicPartition] = frozenset()


@dataclass
class _Reservation:
    move: Move
    made: float
    #: When the request that sent it returned; None while only admitted.
    sent: float | None = None


@dataclass(frozen=True)
class _Sent:
    owner: Owner
    target: Replicas
    at: float


class ClusterExecutor:
    def __init__(self, name: str, kafka: Callable[[], KafkaAdmin], config: SchedulerConfig, *,
                 looks: SharedLooks, stale_after_seconds: float = 30.0, reservation_seconds: float = 60.0,
                 may_act: Callable[[], bool] = lambda: True, clock: Callable[[], float] = time.monotonic,
                 throttle_record: ThrottleRecord | None = None) -> None:
        self.name = name
        self.config = config
        self.looks = looks
        self.throttles = ThrottleLedger(record=throttle_record)
        self.write_rates = WriteRates()
        self._kafka = kafka
        self._stale_after = stale_after_seconds
        self._reservation_seconds = reservation_seconds
        self._may_act = may_act
        self._clock = clock
        self._lock = threading.Lock()
        self._waiting: dict[Owner, _Waiting] = {}
        self._reserved: dict[TopicPartition, _Reservation] = {}
        self._sent: dict[TopicPartition, _Sent] = {}
        #: Size and write rate of partitions some resource offered, for the moves in flight a look does not cover.
        self._sizes: dict[TopicPartition, tuple[int, float]] = {}
        #: The newest listing of every move in the cluster between looks (the refill loop's): (when, moves).
        self._listing: tuple[float, dict[TopicPartition, OngoingReassignment]] | None = None
        #: Moves the executor sent for a resource that Kafka refused for good, until the resource's tick takes them.
        self._refused: dict[Owner, dict[TopicPartition, KafkaRefusal]] = {}
        #: The resources' statuses' claims on moves in flight, as the last admissions were told them.
        self._holders: dict[TopicPartition, Owner] = {}
        #: Held while the executor sends for resources, so letting go of a resource waits for a send under way.
        self._sending = threading.Lock()
        #: Set when moves are armed: wakes the refill loop (:mod:`kpo.execution.refill`).
        self.armed_changed = threading.Event()

    # ------------------------------------------------------------------------------------------------ admission

    def admit(self, owner: Owner, execution: Execution, candidates: Sequence[Candidate],
              holders: Mapping[TopicPartition, Owner]) -> list[TopicPartition]:
        """The partitions among ``candidates`` that ``owner`` may send now; each is reserved until it is sent (or
        the tick ends without sending it), so the next admission, of any resource, counts it as in flight."""
        moves = [Move(owner=owner, partition=c.partition, current=c.current, target=c.target,
                      size_bytes=c.size_bytes, position=c.position, leader=c.leader, write_rate=c.write_rate,
                      dir_brokers=c.dir_brokers, new_dirs=c.new_dirs)
                 for c in candidates]
        now = self._clock()
        look = self.looks.latest
        with self._lock:
            self._sizes.update({m.partition: (m.size_bytes, m.write_rate) for m in moves})
            # Who holds the moves in flight that this executor did not send (another replica sent them before it
            # took over, or an earlier run): the refill loop counts them against their resources' limits too.
            self._holders.update(holders)
            self._waiting[owner] = _Waiting(moves, execution, now)
            for stale in [o for o, w in self._waiting.items() if now - w.seen > self._stale_after]:
                del self._waiting[stale]
            in_flight = self._in_flight(look, holders, now)
            pending = [m for w in self._waiting.values() for m in w.moves]
            executions = {o: w.execution for o, w in self._waiting.items()}
            started = moves_to_start(pending, in_flight, executions, self.config)
            chosen = [m for m in started if m.owner == owner]
            for move in chosen:
                self._reserved[move.partition] = _Reservation(move, made=now)
            taken = {m.partition for m in chosen}
            self._waiting[owner].moves = [m for m in moves if m.partition not in taken]
            wanted = {m.partition for m in pending} | set(self._reserved) | set(look.ongoing if look else ())
            self._sizes = {tp: f for tp, f in self._sizes.items() if tp in wanted}
            self._holders = {tp: o for tp, o in self._holders.items() if tp in wanted}
        return [m.partition for m in chosen]

    def _in_flight(self, look: Look | None, holders: Mapping[TopicPartition, Owner], now: float) -> list[Move]:
        listed = look.ongoing if look is not None else {}
        seen_at = look.started if look is not None else float("-inf")
        if self._listing is not None and self._listing[0] > seen_at:
            seen_at, listed = self._listing
        moves = []
        for tp, ongoing in listed.items():
            sent = self._sent.get(tp)
            owner = sent.owner if sent is not None and sent.target == ongoing.target else holders.get(tp, FOREIGN)
            size, rate = self._facts(look, tp)
            moves.append(Move(owner=owner, partition=tp, current=ongoing.original, target=ongoing.target,
                              size_bytes=size, write_rate=rate))
        # Replicas being copied between log dirs of their broker (the look's DescribeLogDirs: future dirs) are moves
        # in flight too, their brokers busy; ListPartitionReassignments does not list them.
        copying = {tp: frozenset(brokers) for tp, brokers in _dir_copies(look).items() if tp not in listed}
        for tp, brokers in copying.items():
            replicas = tuple(sorted(brokers))
            moves.append(Move(owner=holders.get(tp, FOREIGN), partition=tp, current=replicas, target=replicas,
                              size_bytes=self._facts(look, tp)[0], dir_brokers=brokers))
        for tp, reservation in list(self._reserved.items()):
            over = (reservation.sent is not None and reservation.sent < seen_at) or (
                reservation.sent is None and now - reservation.made > self._reservation_seconds)
            if over:
                del self._reserved[tp]
            elif tp not in listed and tp not in copying:
                moves.append(reservation.move)
        for tp in [tp for tp, s in self._sent.items() if s.at < seen_at and tp not in listed]:
            del self._sent[tp]
        return moves

    def _facts(self, look: Look | None, tp: TopicPartition) -> tuple[int, float]:
        rate = self.write_rates.rate(tp)
        if look is not None and tp.topic in look.covered:
            return look.partition_size(tp), rate
        size, offered_rate = self._sizes.get(tp, (0, 0.0))
        return size, rate or offered_rate

    def settle(self, owner: Owner) -> None:
        """The tick of ``owner`` ended: what it was admitted but did not send is free again."""
        with self._lock:
            for tp in [tp for tp, r in self._reserved.items() if r.move.owner == owner and r.sent is None]:
                del self._reserved[tp]

    def forget(self, owner: Owner) -> None:
        """``owner`` is gone (deleted): nothing of it waits any more, and a send for it under way has ended."""
        with self._sending, self._lock:
            self._waiting.pop(owner, None)
            self._refused.pop(owner, None)

    # ------------------------------------------------------------------------------------- refill for resources

    def waiting(self, owner: Owner) -> dict[TopicPartition, Replicas]:
        """The moves of ``owner`` waiting for a slot that the executor could send itself, with their partitions'
        current replicas (those must be on record first). Not those that change the replication factor: Kafka
        takes them only with the flag the resource's own tick decides on."""
        with self._lock:
            found = self._waiting.get(owner)
            return {m.partition: m.current for m in found.moves if _refillable(m)} if found else {}

    def arm(self, owner: Owner, partitions: Collection[TopicPartition]) -> None:
        """``owner`` has done what must precede these waiting moves: the executor may send them when they fit."""
        with self._lock:
            found = self._waiting.get(owner)
            if found is None:
                return
            found.armed = frozenset(partitions) & {m.partition for m in found.moves if _refillable(m)}
            armed = bool(found.armed)
        if armed:
            self.armed_changed.set()

    def has_armed(self) -> bool:
        with self._lock:
            return any(w.armed for w in self._waiting.values())

    def listed(self, ongoing: Mapping[TopicPartition, OngoingReassignment], at: float) -> None:
        """Every move Kafka listed at ``at`` (a listing taken between looks)."""
        with self._lock:
            self._listing = (at, dict(ongoing))

    def take_refused(self, owner: Owner) -> dict[TopicPartition, KafkaRefusal]:
        """What Kafka refused of the moves the executor sent for ``owner`` since its last tick."""
        with self._lock:
            return self._refused.pop(owner, {})

    def refill(self) -> dict[Owner, list[TopicPartition]]:
        """Send the armed moves that fit now, for their resources (limits, order and fair turns as in
        :meth:`admit`); what was sent, by resource. A slot freed by a move that ended is taken at once, not at the
        next tick of a resource that waits for one."""
        with self._sending:
            now = self._clock()
            with self._lock:
                for stale in [o for o, w in self._waiting.items() if now - w.seen > self._stale_after]:
                    del self._waiting[stale]
                armed = [m for w in self._waiting.values() for m in w.moves if m.partition in w.armed]
                if not armed:
                    return {}
                in_flight = self._in_flight(self.looks.latest, self._holders, now)
                executions = {o: w.execution for o, w in self._waiting.items()}
                started = moves_to_start(armed, in_flight, executions, self.config)
                for move in started:
                    self._reserved[move.partition] = _Reservation(move, made=now)
                    waiting = self._waiting[move.owner]
                    waiting.moves = [m for m in waiting.moves if m.partition != move.partition]
                    waiting.armed = waiting.armed - {move.partition}
            by_owner: dict[Owner, dict[TopicPartition, Replicas]] = {}
            for move in started:
                by_owner.setdefault(move.owner, {})[move.partition] = move.target
            sent: dict[Owner, list[TopicPartition]] = {}
            for owner, targets in by_owner.items():
                try:
                    answers = self.send(owner, targets)
                except KafkaUnavailable as exc:
                    log.info("%s: could not send %d move(s) for %s: %s", self.name, len(targets), owner, exc)
                    continue
                refused = {tp: a for tp, a in answers.items() if a is not None and not a.retriable}
                if refused:
                    with self._lock:
                        self._refused.setdefault(owner, {}).update(refused)
                sent[owner] = [tp for tp, a in answers.items() if a is None]
                if sent[owner]:
                    log.info("%s: started %d move(s) for %s as a slot freed: %s", self.name, len(sent[owner]), owner,
                             ", ".join(f"{tp}->{list(targets[tp])}" for tp in sorted(sent[owner])))
            return sent

    # -------------------------------------------------------------------------------------------------- acting

    def kafka(self) -> KafkaAdmin:
        """The cluster's client, for a write: refused at once when this replica may not act."""
        if not self._may_act():
            raise NotLeading("this operator replica does not hold the leader Lease: it sends nothing to Kafka")
        return self._kafka()

    def read(self) -> KafkaAdmin:
        """The cluster's client, for a read."""
        return self._kafka()

    def send(self, owner: Owner, targets: Mapping[TopicPartition, Replicas | None], *,
             allow_replication_factor_change: bool = False) -> dict[TopicPartition, KafkaRefusal | None]:
        """AlterPartitionReassignments for ``owner``: moves (replicas) and cancellations (None); Kafka's answers."""
        if not targets:
            return {}
        kafka = self.kafka()
        self._name_new_dirs(kafka, targets)
        try:
            answers = kafka.alter_reassignments(
                targets, allow_replication_factor_change=allow_replication_factor_change)
        except Exception:
            with self._lock:
                # Sent or not, nobody knows: keep the reservations as sent now, a look after this shows the truth.
                done = self._clock()
                for tp in targets:
                    if (reservation := self._reserved.get(tp)) is not None:
                        reservation.sent = done
            raise
        done = self._clock()
        with self._lock:
            for tp, target in targets.items():
                answer = answers.get(tp)
                reservation = self._reserved.get(tp)
                if target is None:
                    self._reserved.pop(tp, None)
                    self._sent.pop(tp, None)
                elif answer is None:
                    self._sent[tp] = _Sent(owner, tuple(target), done)
                    # A re-target is sent without an admission: Kafka lists it already, under its new target soon.
                    if reservation is not None:
                        reservation.sent = done
                else:
                    self._reserved.pop(tp, None)
        return answers

    def _name_new_dirs(self, kafka: KafkaAdmin, targets: Mapping[TopicPartition, Replicas | None]) -> None:
        """Tell the brokers the dir of each new replica the moves about to be sent create, where the spec names one
        (:func:`kpo.domain.reassignment.new_replica_dirs`). A hint: Kafka answers that the replica does not exist
        yet, and a refusal or an outage only means one more copy between dirs after the move."""
        with self._lock:
            hints = {(tp, broker): log_dir for tp, target in targets.items() if target is not None
                     if (reservation := self._reserved.get(tp)) is not None
                     for broker, log_dir in reservation.move.new_dirs if broker in target}
        if not hints:
            return
        try:
            kafka.alter_replica_log_dirs(hints)
        except (KafkaUnavailable, KafkaRequestRefused) as exc:  # a hint: the move goes on without it
            log.info("%s: could not name the log dirs of %d new replica(s): %s", self.name, len(hints), exc)

    def move_dirs(self, moves: Mapping[tuple[TopicPartition, int], str]
                  ) -> dict[tuple[TopicPartition, int], KafkaRefusal | None]:
        """AlterReplicaLogDirs: each replica (partition, broker) to the log dir named; Kafka's answers. An admitted
        intra-broker move counts as in flight from now until a later look shows it (or shows it done)."""
        if not moves:
            return {}
        kafka = self.kafka()
        try:
            return kafka.alter_replica_log_dirs(dict(moves))
        finally:
            done = self._clock()
            with self._lock:
                for tp, _broker in moves:
                    if (reservation := self._reserved.get(tp)) is not None and reservation.move.dir_brokers:
                        reservation.sent = done

    def elect(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, KafkaRefusal | None]:
        """Preferred leader election of ``partitions`` after their moves (ElectLeaders)."""
        if not partitions:
            return {}
        kafka = self.kafka()
        return kafka.elect_leaders(list(partitions))

    def moving(self, partitions: Collection[TopicPartition]) -> set[TopicPartition]:
        """Which of ``partitions`` Kafka lists as moving now: the refill loop's probe between polls, one
        ListPartitionReassignments of a resource's own moves (a whole look would read far more than it needs)."""
        return set(self._kafka().list_reassignments(list(partitions))) if partitions else set()


def _refillable(move: Move) -> bool:
    """Whether the refill loop may send ``move`` itself: a reassignment that keeps the replication factor. Not one
    that changes it (Kafka takes that only with the flag the resource's tick decides on), nor an intra-broker move
    (AlterReplicaLogDirs, which its resource's tick sends)."""
    return len(move.target) == len(move.current) and not move.dir_brokers


def _dir_copies(look: Look | None) -> dict[TopicPartition, set[int]]:
    """The brokers copying a replica of each partition between their own log dirs, as the look's DescribeLogDirs
    showed them (a future replica)."""
    found: dict[TopicPartition, set[int]] = {}
    if look is None:
        return found
    for future in look.future_dirs.values():
        for tp, broker in future:
            found.setdefault(tp, set()).add(broker)
    return found
