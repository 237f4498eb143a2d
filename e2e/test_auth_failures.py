"""Authentication and authorization failures on the real test bed (issue 12): named, bounded, and never stuck.

Why these tests: a wrong SASL password used to leave a resource silent while librdkafka logged in again several times
a second, and its deletion hung on the finalizer; a principal without ACLs was told "topic does not exist"; a
describe-only principal asked for a throttle kept a journal of throttles never applied and held its partitions.

The module runs its own operator, with its own cluster connections (each one a SCRAM user of its own, made up for
the session, over the test bed's SASL_PLAINTEXT listener with the StandardAuthorizer), watching only this module's
namespaces, so other sessions' operators and their ACLs do not interfere.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from functools import partial

import pytest
import yaml
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)
from kubernetes import client

from e2e.conftest import SESSION
from e2e.kafka_support import assert_replicas, create_topic, describe_topic
from e2e.kube_support import Resources, wait_until
from e2e.operator_support import OperatorProcess, operator_env, watched_namespace
from e2e.reassignment_support import ongoing, spec_partitions
from kpo.domain.throttle import ThrottleJournal
from kpo.k8s.rollback import THROTTLE_KEY, rollback_name
from kpo_testbed import Testbed
from kpo_testbed.kafka import LIMITED_USER, SCRAM_MECHANISM

KPR, KTPC, KPLE = "PartitionReassignment", "TopicPartitionCount", "PreferredLeaderElection"
SECRET = "kafka-kpo-auth-e2e"
#: This module's namespaces (its operator watches only these; the session operator watches ``e2e-<session>-*``).
PREFIX = f"e2e-auth-{SESSION}"
NO_ACL_USER = f"kpo-noacl-{SESSION}"
DESCRIBER_USER = f"kpo-describer-{SESSION}"
WRONG_PASSWORD = "wrong-" + secrets.token_hex(8)
CLUSTER = ResourceType.BROKER, "kafka-cluster"


def _scram(admin: AdminClient, upsert: dict[str, str]) -> None:
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    alterations: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(user, info, password.encode()) for user, password in upsert.items()]
    for future in admin.alter_user_scram_credentials(alterations).values():
        future.result(timeout=30)


def _grant(admin: AdminClient, principal: str, grants: list[tuple[ResourceType, str, AclOperation]]
           ) -> list[AclBinding]:
    bindings = [AclBinding(kind, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW)
                for kind, name, op in grants]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)
    return bindings


def _revoke(admin: AdminClient, bindings: list[AclBinding]) -> None:
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in bindings]
    for future in admin.delete_acls(filters).values():
        future.result(timeout=30)


@pytest.fixture(scope="module")
def users(kafka_admin: AdminClient) -> dict[str, str]:
    """Two SCRAM users of this session, without any ACL: their passwords by name.

    They are not deleted afterwards: on Kafka 4.1.2 a node restarted after a RemoveUserScramCredentialRecord came
    back refusing every SCRAM login, the test bed's own users too (seen here: the controllers replayed the records,
    the restarted broker answered "invalid credentials" and DescribeUserScramCredentials listed no user), which failed
    every later test over SASL once a broker-loss test had restarted a node. The test bed is private to the session.
    """
    passwords = {NO_ACL_USER: secrets.token_hex(12), DESCRIBER_USER: secrets.token_hex(12)}
    _scram(kafka_admin, upsert=passwords)
    return passwords


@pytest.fixture(scope="module")
def auth_operator(testbed: Testbed, kpo_crds: None, api_client: client.ApiClient, operator_namespace: str,
                  users: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """An operator with three SASL clusters: "wrongpass" (the test bed's limited user, a wrong password from the
    Secret), "noacl" and "describer" (this session's users), besides the default over PLAINTEXT."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_secret(operator_namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name=SECRET),
        string_data={"wrong": WRONG_PASSWORD, "noacl": users[NO_ACL_USER], "describer": users[DESCRIBER_USER]}))

    def sasl(user: str, key: str) -> dict[str, object]:
        return {"bootstrapServers": testbed.state.kafka.sasl_bootstrap_servers, "securityProtocol": "SASL_PLAINTEXT",
                "sasl": {"mechanism": SCRAM_MECHANISM, "username": user,
                         "passwordSecret": {"name": SECRET, "key": key}}}

    folder = tmp_path_factory.mktemp("auth-operator")
    config_path = folder / "kpo.yaml"
    config_path.write_text(yaml.safe_dump({"pollIntervalSeconds": 1, "clusters": {
        "default": {"bootstrapServers": testbed.state.kafka.bootstrap_servers},
        "wrongpass": sasl(LIMITED_USER, "wrong"),
        "noacl": sasl(NO_ACL_USER, "noacl"),
        "describer": sasl(DESCRIBER_USER, "describer"),
    }}))
    env = operator_env(testbed.state.kube.kubeconfig, testbed.state.kafka.bootstrap_servers,
                       {"KPO_CONFIG": str(config_path), "KPO_NAMESPACE": operator_namespace})
    operator = OperatorProcess(env, folder / "operator.log", namespaces=[f"{PREFIX}-*"])
    operator.start()
    try:
        yield operator
    finally:
        operator.stop()
        core.delete_namespaced_secret(SECRET, operator_namespace)


@pytest.fixture
def namespace(api_client: client.ApiClient, auth_operator: OperatorProcess) -> Iterator[str]:
    """A namespace only this module's operator watches."""
    with watched_namespace(api_client, PREFIX) as name:
        yield name


def _events(resources: Resources, name: str, reason: str) -> list[str]:
    return [e.message for e in resources.events(name) if e.reason == reason]


def _failed_logins(testbed: Testbed) -> int:
    """Failed SASL logins all brokers have logged so far (the SocketServer logs each one at INFO)."""
    return sum(testbed.state.kafka.node_dir(n.node_id).joinpath("server.log").read_text(errors="replace")
               .count("Failed authentication with") for n in testbed.state.kafka.nodes)


def _condition_with(resources: Resources, kind: str, name: str, reason: str) -> dict[str, object] | None:
    for c in resources.status(kind, name).get("conditions") or []:
        if c["reason"] == reason:
            return dict(c)
    return None


def test_wrong_password_is_named_once_backs_off_and_lets_go(testbed: Testbed, kafka_admin: AdminClient,
                                                            topic_name: str, resources: Resources,
                                                            auth_operator: OperatorProcess) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1, 2], [2, 3]])
    resources.create(KTPC, "grow", {"clusterRef": "wrongpass", "topic": topic_name, "partitions": 4})
    resources.create(KPR, "move", {"clusterRef": "wrongpass",
                                   "partitions": spec_partitions(topic_name, {0: [2, 3]})})
    for kind, name in ((KTPC, "grow"), (KPR, "move")):
        found = wait_until(partial(_condition_with, resources, kind, name, "AuthenticationFailed"), 60,
                           f"{name} to say AuthenticationFailed")
        message = str(found["message"])
        print(f"{kind} {name}: {message}")
        assert SCRAM_MECHANISM in message and repr(LIMITED_USER) in message, message
        assert WRONG_PASSWORD not in message and testbed.state.kafka.passwords[LIMITED_USER] not in message
        stalled = resources.condition(kind, name, "Stalled")
        assert stalled is not None and stalled["status"] == "True" and stalled["reason"] == "AuthenticationFailed"

    # Both resources share the cluster's backoff: a few refused logins per step, not several a second.
    before = _failed_logins(testbed)
    time.sleep(10)
    during = _failed_logins(testbed) - before
    print(f"failed SASL logins logged by the brokers over 10 s, two resources ticking every second: {during}")
    assert during <= 12, during

    for name in ("grow", "move"):
        events = _events(resources, name, "AuthenticationFailed")
        assert len(events) == 1, events
        assert WRONG_PASSWORD not in events[0]
    assert len(describe_topic(kafka_admin, topic_name)) == 2
    assert_replicas(kafka_admin, topic_name, {0: [1, 2], 1: [2, 3]})
    assert auth_operator.log_text().count(WRONG_PASSWORD) == 0

    # Nothing was ever sent, so nothing holds the finalizers: both go at once.
    began = time.monotonic()
    resources.delete(KPR, "move")
    resources.delete(KTPC, "grow")
    wait_until(lambda: not resources.exists(KPR, "move") and not resources.exists(KTPC, "grow"), 10,
               "both resources to be deleted")
    print(f"deleted in {time.monotonic() - began:.1f}s")


def test_principal_without_acls_is_told_not_authorized(kafka_admin: AdminClient, topic_name: str,
                                                       resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1, 2], [2, 3]])
    resources.create(KTPC, "grow", {"clusterRef": "noacl", "topic": topic_name, "partitions": 4})
    resources.create(KPR, "move", {"clusterRef": "noacl", "partitions": spec_partitions(topic_name, {0: [2, 3]})})
    # Metadata hides the topic from this principal: the election asks for it by name, as the others do.
    resources.create(KPLE, "elect", {"clusterRef": "noacl", "topics": [topic_name]})
    principal = f"User:{NO_ACL_USER}"
    for kind, name in ((KTPC, "grow"), (KPR, "move"), (KPLE, "elect")):
        status = resources.wait_phase(kind, name, {"Failed", "Invalid", "Succeeded"}, timeout=60)
        assert status["phase"] == "Failed", status
        ready = resources.condition(kind, name, "Ready")
        assert ready is not None and ready["status"] == "False" and ready["reason"] == "NotAuthorized", ready
        message = ready["message"]
        print(f"{kind} {name}: {message}")
        assert principal in message and "--operation Describe" in message, message
        assert repr(topic_name) in message or "--cluster" in message, message
        assert "does not exist" not in message and "UnknownTopic" not in message, message
        resources.wait_event(name, "NotAuthorized")
    time.sleep(5)  # ticks go on: the refusal is said once, not once a tick
    for name in ("grow", "move", "elect"):
        assert len(_events(resources, name, "NotAuthorized")) == 1
    assert len(describe_topic(kafka_admin, topic_name)) == 2
    assert_replicas(kafka_admin, topic_name, {0: [1, 2], 1: [2, 3]})


def test_describe_only_throttle_fails_records_nothing_and_lets_go(kafka_admin: AdminClient, bootstrap_servers: str,
                                                                 topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1, 2], [2, 3]])
    principal = f"User:{DESCRIBER_USER}"
    describe = _grant(kafka_admin, principal, [
        (*CLUSTER, AclOperation.DESCRIBE), (*CLUSTER, AclOperation.DESCRIBE_CONFIGS),
        (ResourceType.TOPIC, topic_name, AclOperation.DESCRIBE),
        (ResourceType.TOPIC, topic_name, AclOperation.DESCRIBE_CONFIGS)])
    granted = list(describe)
    try:
        targets = spec_partitions(topic_name, {0: [2, 3], 1: [3, 1]})
        resources.create(KPR, "throttled", {"clusterRef": "describer", "partitions": targets,
                                            "execution": {"throttle": 1_000_000}})
        status = resources.wait_phase(KPR, "throttled", {"Failed", "Stalled", "Succeeded", "Invalid"}, timeout=60)
        assert status["phase"] == "Failed", status
        ready = resources.condition(KPR, "throttled", "Ready")
        assert ready is not None and ready["reason"] == "NotAuthorized", ready
        print(f"throttled: {ready['message']}")
        assert "IncrementalAlterConfigs" in ready["message"] and "AlterConfigs" in ready["message"], ready
        assert not status.get("throttle"), status
        recorded = (resources.config_map(rollback_name("throttled")) or {}).get(THROTTLE_KEY)
        assert ThrottleJournal.from_json(json.loads(recorded) if recorded else None).empty, recorded
        assert len(resources.wait_event("throttled", "NotAuthorized")) == 1
        assert ongoing(bootstrap_servers, topic_name) == {}
        assert_replicas(kafka_admin, topic_name, {0: [1, 2], 1: [2, 3]})

        # The failed resource holds nothing: with the move itself now allowed, another one on the same partitions
        # (no throttle) goes ahead instead of waiting in Conflict.
        granted += _grant(kafka_admin, principal, [(*CLUSTER, AclOperation.ALTER)])
        resources.create(KPR, "after", {"clusterRef": "describer", "partitions": targets})
        after = resources.wait_phase(KPR, "after", {"Failed", "Succeeded", "Invalid"}, timeout=120)
        assert after["phase"] == "Succeeded", after
        assert not [e for e in resources.events("after") if e.reason == "Conflict"]
        assert_replicas(kafka_admin, topic_name, {0: [2, 3], 1: [3, 1]})

        began = time.monotonic()
        resources.delete(KPR, "throttled")
        wait_until(lambda: not resources.exists(KPR, "throttled"), 10, "the failed resource to be deleted")
        print(f"deleted in {time.monotonic() - began:.1f}s")
    finally:
        _revoke(kafka_admin, granted)
