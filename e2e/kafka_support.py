"""Small helpers the end-to-end tests share for talking to the real Kafka (no stand-ins)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.errors import RetriableError

if TYPE_CHECKING:
    from kpo_testbed import Testbed

T = TypeVar("T")
# partition -> (replicas, leader, ISR), as DescribeTopics shows it
Description = dict[int, tuple[list[int], int, list[int]]]


def wait_for(check: Callable[[], T], timeout: float, what: str, interval: float = 0.5) -> T:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = check()
        # A broker just stopped: the request did not get an answer yet. kafka-python raises a retriable error when
        # the node it picks (from metadata that still lists a killed broker) refuses the connection.
        except (KafkaException, RetriableError, TimeoutError) as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last seen: {last!r}")


def wait_for_new_controller(testbed: Testbed, old: int, timeout: float = 90) -> None:
    """Wait until the KRaft quorum has elected an active controller other than ``old``."""

    def new_controller() -> bool:
        try:
            return testbed.active_controller() != old
        except RuntimeError:  # the quorum is still electing: the tool times out
            return False

    wait_for(new_controller, timeout, "a new active controller")


def create_topic(admin: AdminClient, name: str, partitions: int, *, replication_factor: int = -1,
                 assignment: list[list[int]] | None = None, config: dict[str, str] | None = None) -> None:
    if assignment is not None:
        topic = NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment, config=config or {})
    else:
        topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=config or {})
    admin.create_topics([topic])[name].result(timeout=30)
    wait_for(lambda: replicas_of(admin, name) and len(replicas_of(admin, name)) == (len(assignment) if assignment
                                                                                  else partitions),
             30, f"topic {name} metadata")


def describe_topic(admin: AdminClient, name: str) -> Description:
    """partition -> (replicas, leader, isr) from DescribeTopics.

    Asked up to five times with a 10 s limit, a second apart: a request sent to a node that was just killed gets no
    answer, and the next one goes to a live node once the client's metadata has dropped the dead one. And every broker
    learns a new topic from the metadata log on its own: a CI run on a loaded machine had one broker answer
    DescribeTopics for a topic just created and the next request, sent to another, get UNKNOWN_TOPIC_OR_PART."""
    for attempt in range(5):
        try:
            desc = admin.describe_topics(TopicCollection([name]), request_timeout=10)[name].result(timeout=15)
            break
        except (KafkaException, TimeoutError):
            if attempt == 4:
                raise
            time.sleep(1)
    return {p.id: ([r.id for r in p.replicas], p.leader.id if p.leader else -1, [r.id for r in p.isr])
            for p in desc.partitions}


def replicas_of(admin: AdminClient, name: str) -> dict[int, list[int]]:
    return _replicas(describe_topic(admin, name))


def settled_description(admin: AdminClient, name: str, holds: Callable[[Description], bool],
                        within: float = 10.0) -> Description:
    """DescribeTopics until ``holds`` is true of the answer or ``within`` seconds pass; the last answer either way.

    The controller commits a change (a finished move, a reordered list, an election) and every broker learns it from
    the metadata log a moment later; DescribeTopics is answered by whichever broker the client picks. So one request
    may show the change and the next, sent to a broker that has not applied the record yet, the state before it: a CI
    run saw ``[3, 1, 2]`` (the move's replicas) right after the operator had seen ``[3, 1]`` and reported Succeeded,
    and another ``[2, 3]`` right after a wait had seen the reordered ``[3, 2]``. Callers assert on what is returned,
    so a state Kafka never reaches still fails, with what it showed last.
    """
    deadline, seen = time.monotonic() + within, describe_topic(admin, name)
    while not holds(seen) and time.monotonic() < deadline:
        time.sleep(0.25)
        seen = describe_topic(admin, name)
    return seen


def assert_replicas(admin: AdminClient, name: str, expected: dict[int, list[int]], within: float = 10.0) -> None:
    """Assert the brokers show ``expected`` as the topic's replicas, allowing ``within`` seconds for them to learn it
    (see ``settled_description``)."""
    seen = settled_description(admin, name, lambda d: _replicas(d) == expected, within)
    assert _replicas(seen) == expected, f"Kafka shows {_replicas(seen)} for {name}, not {expected}"


def assert_partition(admin: AdminClient, name: str, partition: int, expected: list[int], within: float = 10.0) -> None:
    """``assert_replicas`` for one partition, the others as they are."""
    seen = settled_description(admin, name, lambda d: d[partition][0] == expected, within)
    assert seen[partition][0] == expected, f"Kafka shows {seen[partition][0]} for {name}-{partition}, not {expected}"


def _replicas(description: Description) -> dict[int, list[int]]:
    return {p: r for p, (r, _, _) in description.items()}


def set_throttle(admin: AdminClient, brokers: list[int], topic: str, rate: int | None) -> None:
    """Set (rate) or remove (None) a replication throttle on the brokers and all replicas of the topic."""
    op = ConfigEntry
    kind = AlterConfigOpType.SET if rate is not None else AlterConfigOpType.DELETE
    value = str(rate) if rate is not None else ""
    resources = [
        ConfigResource(ConfigResource.Type.BROKER, str(b), incremental_configs=[
            op("leader.replication.throttled.rate", value, incremental_operation=kind),
            op("follower.replication.throttled.rate", value, incremental_operation=kind)])
        for b in brokers
    ]
    resources.append(ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        op("leader.replication.throttled.replicas", "*" if rate is not None else "", incremental_operation=kind),
        op("follower.replication.throttled.replicas", "*" if rate is not None else "", incremental_operation=kind)]))
    # librdkafka sends BROKER resources to that broker, so it takes one per call. A broker just restarted (a test
    # killed it) may not answer the client's first request while it reconnects: the change is idempotent, so retry.
    for resource in resources:
        for attempt in range(3):
            try:
                for future in admin.incremental_alter_configs([resource]).values():
                    future.result(timeout=30)
                break
            except (TimeoutError, KafkaException):
                if attempt == 2:
                    raise


def broker_rate(admin: AdminClient, broker: int, key: str = "leader.replication.throttled.rate") -> str | None:
    """A replication throttle rate set on ``broker`` (None: not set)."""
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
    entries = next(iter(admin.describe_configs([resource]).values())).result(timeout=30)
    entry = entries.get(key)
    return None if entry is None or entry.is_default else str(entry.value)


def topic_list(admin: AdminClient, topic: str, key: str) -> set[str]:
    """The entries of a list-valued topic config, e.g. ``leader.replication.throttled.replicas``."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = next(iter(admin.describe_configs([resource]).values())).result(timeout=30)
    value = entries[key].value or ""
    return {e for e in value.split(",") if e}


@contextlib.contextmanager
def describe_only(admin: AdminClient, principal: str, topic: str) -> Iterator[None]:
    """ACLs that let ``principal`` describe the cluster and ``topic`` (and its configs) but alter nothing: kpo's
    validation passes, its AlterPartitionReassignments is refused. Removed on exit."""
    grants = [
        AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, principal, "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                   AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW),
    ]
    for future in admin.create_acls(grants).values():
        future.result(timeout=30)
    try:
        yield
    finally:
        filters = [AclBindingFilter(g.restype, g.name, g.resource_pattern_type, g.principal, g.host, g.operation,
                                    g.permission_type) for g in grants]
        for future in admin.delete_acls(filters).values():
            future.result(timeout=30)
