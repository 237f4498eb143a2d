"""Kafka's authentication and authorization refusals, named as such, and the backoff after a refused login.

Why this exists: a principal without an ACL used to read as "topic does not exist" (metadata hides topics a principal
may not describe) or as a refusal retried forever, and a wrong SASL password as a plain connection failure retried on
every tick by every resource — librdkafka reconnecting in the background meanwhile — so the brokers logged hundreds
of failed logins a minute and nothing told the user. These rules let every kind say ``NotAuthorized`` (with the
request, the resource and the ACL Kafka wants) or ``AuthenticationFailed`` (with the mechanism and user, never the
password), and let the operator try a refused login once per backoff step per cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kpo.domain.conditions import PROGRESSING, STALLED, ConditionUpdate
from kpo.domain.model import KafkaRefusal

NOT_AUTHORIZED = "NotAuthorized"
AUTHENTICATION_FAILED = "AuthenticationFailed"
KAFKA_REFUSED = "KafkaRefused"

AUTHORIZATION_CODES = frozenset({
    "TOPIC_AUTHORIZATION_FAILED",
    "GROUP_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
})
# Kafka's SASL_AUTHENTICATION_FAILED (58) and librdkafka's local _AUTHENTICATION; the other two mean the broker does
# not accept the mechanism kpo is configured with, which only a configuration change fixes too.
AUTHENTICATION_CODES = frozenset({
    "SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION", "UNSUPPORTED_SASL_MECHANISM", "ILLEGAL_SASL_STATE"})


def is_authorization(code: str) -> bool:
    return code in AUTHORIZATION_CODES


def is_authentication(code: str) -> bool:
    return code in AUTHENTICATION_CODES


def refusal_reason(refusals: Iterable[KafkaRefusal]) -> str:
    """The condition reason for what Kafka refused: ``NotAuthorized`` when an ACL is missing (that is what the user
    must fix first), else ``KafkaRefused``."""
    return NOT_AUTHORIZED if any(is_authorization(r.code) for r in refusals) else KAFKA_REFUSED


@dataclass(frozen=True)
class Request:
    """One Kafka request as the authorizer sees it: the API, what it acts on, and the ACL it checks."""

    api: str  # e.g. "IncrementalAlterConfigs"
    target: str  # e.g. "broker 1", "topic 'orders'", "the cluster"
    acl_operation: str  # kafka-acls.sh --operation value, e.g. "AlterConfigs"
    acl_resource: str  # kafka-acls.sh resource option, e.g. "--cluster", "--topic 'orders'"


def _topic(api: str, topic: str, operation: str) -> Request:
    return Request(api, f"topic {topic!r}", operation, f"--topic {topic!r}")


def _cluster(api: str, target: str, operation: str) -> Request:
    return Request(api, target, operation, "--cluster")


# Kafka's "Operations and Resources on Protocols" table, for the requests kpo sends.
def describe_cluster() -> Request:
    return _cluster("DescribeCluster", "the cluster", "Describe")


def describe_topic(topic: str) -> Request:
    return _topic("DescribeTopicPartitions", topic, "Describe")


def describe_topic_configs(topic: str) -> Request:
    return _topic("DescribeConfigs", topic, "DescribeConfigs")


def describe_broker_configs(broker: str) -> Request:
    return _cluster("DescribeConfigs", f"broker {broker}", "DescribeConfigs")


def alter_configs(resource: str, name: str) -> Request:
    if resource == "broker":
        return _cluster("IncrementalAlterConfigs", f"broker {name}", "AlterConfigs")
    return _topic("IncrementalAlterConfigs", name, "AlterConfigs")


def list_reassignments() -> Request:
    return _cluster("ListPartitionReassignments", "the cluster", "Describe")


def alter_reassignments() -> Request:
    return _cluster("AlterPartitionReassignments", "the cluster", "Alter")


def describe_log_dirs() -> Request:
    return _cluster("DescribeLogDirs", "the cluster", "Describe")


def alter_log_dirs() -> Request:
    return _cluster("AlterReplicaLogDirs", "the cluster", "Alter")


def elect_leaders() -> Request:
    return _cluster("ElectLeaders", "the cluster", "Alter")


def create_partitions(topic: str) -> Request:
    return _topic("CreatePartitions", topic, "Alter")


def read_topic(topic: str) -> Request:
    return _topic("Fetch", topic, "Read")


def named(refusal: KafkaRefusal, request: Request, principal: str) -> KafkaRefusal:
    """An authorization refusal that says which request on what Kafka refused, and the ACL that would allow it;
    any other refusal as it is."""
    if not is_authorization(refusal.code):
        return refusal
    said = f": {refusal.message}" if refusal.message else ""
    message = (f"Kafka refused {request.api} on {request.target} for {principal}{said}; it needs "
               f"kafka-acls.sh --add --allow-principal {principal} --operation {request.acl_operation} "
               f"{request.acl_resource}")
    return replace(refusal, message=message)


def login_refused_message(mechanism: str | None, user: str | None, bootstrap: str, detail: str) -> str:
    """What a refused login says: the mechanism and the user, never the password."""
    return (f"Kafka at {bootstrap} refused the SASL {mechanism or 'PLAIN'} login of user {user!r}: {detail}; "
            "fix the password (or user) in the Secret the operator's configuration names")


def unreachable_updates(previous: Sequence[Mapping[str, Any]], reason: str, message: str
                        ) -> tuple[list[ConditionUpdate], bool]:
    """The conditions of a tick that could not talk to Kafka, and whether that is news (worth one Event).

    Progressing says kpo retries; a refused login also sets Stalled: only the user can fix the credentials.
    """
    updates = [ConditionUpdate(PROGRESSING, True, reason, f"retrying: {message}")]
    if reason == AUTHENTICATION_FAILED:
        updates.append(ConditionUpdate(STALLED, True, reason, message))
    news = not any(c.get("type") == PROGRESSING and c.get("reason") == reason for c in previous)
    return updates, news


@dataclass
class Backoff:
    """Exponential backoff between login attempts to one cluster: ``initial``, doubled per refusal, capped at
    ``maximum``, reset by a login Kafka accepts. Times are a monotonic clock's seconds, handed in."""

    initial: float = 5.0
    maximum: float = 300.0
    factor: float = 2.0
    failures: int = 0
    retry_at: float = 0.0

    def delay(self, failures: int) -> float:
        """The wait after the ``failures``-th refusal in a row (1-based)."""
        if failures <= 0:
            return 0.0
        # Capped before the power can overflow: factor ** 64 is far beyond any maximum.
        return float(min(self.maximum, self.initial * self.factor ** min(failures - 1, 64)))

    def failed(self, now: float) -> float:
        self.failures += 1
        wait = self.delay(self.failures)
        self.retry_at = now + wait
        return wait

    def succeeded(self) -> None:
        self.failures = 0
        self.retry_at = 0.0

    def waiting(self, now: float) -> bool:
        return now < self.retry_at

    def attempts_within(self, window: float) -> int:
        """How many login attempts a refused cluster sees in ``window`` seconds from its first: one at once, then
        one each time the wait after the previous refusal ends."""
        attempts, elapsed = 1, 0.0
        while True:
            elapsed += self.delay(attempts)
            if elapsed > window:
                return attempts
            attempts += 1
