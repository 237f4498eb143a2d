"""Ports for a PartitionReassignment tick on a fake cluster, through a real :class:`ClusterExecutor`.

The ticks under test read the cluster through the executor's shared look and send through the executor, as in the
operator; each call makes a fresh executor unless one is given, so ticks share nothing by default (as separate
operator runs would) and a test that wants them to share the cluster's limits and ledger passes the same executor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kpo.domain.model import Replicas, TopicPartition
from kpo.domain.reassignment import Candidate
from kpo.domain.scheduling import Execution, Owner, SchedulerConfig
from kpo.domain.throttle import ThrottleJournal
from kpo.execution.executor import ClusterExecutor
from kpo.execution.observation import SharedLooks
from kpo.kafka.admin import KafkaAdmin
from kpo.resources.partition_reassignment import reconciler

OWNER = Owner(datetime(2026, 1, 1, tzinfo=UTC), "ns", "move")


def executor_for(kafka: Any, config: SchedulerConfig | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> ClusterExecutor:
    def admin() -> KafkaAdmin:
        return kafka  # type: ignore[no-any-return]
    looks = SharedLooks(admin, clock=clock, wait_seconds=5.0)
    return ClusterExecutor("test", admin, config or SchedulerConfig(), looks=looks, clock=clock)


def admit_all(candidates: Sequence[Candidate], _view: object) -> list[TopicPartition]:
    return [c.partition for c in candidates]


def ports(kafka: Any, *, executor: ClusterExecutor | None = None, owner: Owner = OWNER,
          save_originals: Callable[[Mapping[TopicPartition, Replicas]], str] = lambda _found: "rollback",
          load_throttle: Callable[[], ThrottleJournal] = ThrottleJournal,
          save_throttle: Callable[[ThrottleJournal], object] = lambda _journal: None,
          others_throttles: Callable[[], list[ThrottleJournal]] = list,
          claimed_by_others: Callable[[], dict[TopicPartition, str]] = dict,
          schedule: Callable[[Sequence[Candidate], Any], Sequence[TopicPartition]] | None = None,
          execution: Execution | None = None, began: float | None = None, **rest: Any) -> reconciler.Ports:
    """Ports as the operator's handlers build them; ``schedule`` defaults to admitting every candidate (the tests of a
    single resource), ``schedule="executor"`` is spelled by passing ``execution`` instead: admission by the executor."""
    found = executor if executor is not None else executor_for(kafka)
    start = time.monotonic() if began is None else began
    key = str(owner)

    def index() -> dict[str, ThrottleJournal]:
        return {f"other-{i}": j for i, j in enumerate(others_throttles())}

    if schedule is None:
        schedule = admit_all if execution is None else (
            lambda candidates, _view: found.admit(owner, execution, candidates, {}))
    return reconciler.Ports(
        kafka=kafka,
        look=lambda topics: found.looks.after(start, topics),
        send=lambda targets, allow: found.send(owner, targets, allow_replication_factor_change=allow),
        elect=found.elect,
        move_dirs=found.move_dirs,
        ensure_throttle=lambda wanted, previous, live: found.throttles.ensure(
            key, found.kafka(), wanted, previous=previous, index=index(), save=save_throttle, live_brokers=live),
        remove_throttle=lambda journal, live: found.throttles.remove(
            key, found.kafka(), journal, index=index(), save=save_throttle, live_brokers=live),
        save_originals=save_originals,
        load_throttle=load_throttle,
        claimed_by_others=claimed_by_others,
        schedule=schedule,
        write_rates=found.write_rates.of,
        settle=lambda: found.settle(owner),
        waiting=lambda: found.waiting(owner),
        arm=lambda partitions: found.arm(owner, partitions),
        refused=lambda: found.take_refused(owner),
        **rest,
    )


def observe(kafka: Any, partitions: set[TopicPartition], *, with_configs: bool) -> Any:
    """:func:`reconciler.observe` through a fresh executor's look, as one tick makes it."""
    found = executor_for(kafka)
    start = time.monotonic()
    return reconciler.observe(kafka, lambda topics: found.looks.after(start, topics), partitions,
                              with_configs=with_configs)
