"""Authentication and authorization refusals named as such, and the login backoff's arithmetic."""

from __future__ import annotations

from kpo.domain import access
from kpo.domain.access import Backoff
from kpo.domain.model import KafkaRefusal


def test_authorization_and_authentication_codes_are_told_apart() -> None:
    assert access.is_authorization("TOPIC_AUTHORIZATION_FAILED")
    assert access.is_authorization("CLUSTER_AUTHORIZATION_FAILED")
    assert not access.is_authorization("UNKNOWN_TOPIC_OR_PART")
    assert access.is_authentication("SASL_AUTHENTICATION_FAILED") and access.is_authentication("_AUTHENTICATION")
    assert not access.is_authentication("TOPIC_AUTHORIZATION_FAILED")
    refused = KafkaRefusal("CLUSTER_AUTHORIZATION_FAILED")
    assert access.refusal_reason([KafkaRefusal("INVALID_REPLICA_ASSIGNMENT"), refused]) == "NotAuthorized"
    assert access.refusal_reason([KafkaRefusal("INVALID_REPLICA_ASSIGNMENT")]) == "KafkaRefused"


def test_an_authorization_refusal_names_the_request_the_resource_and_the_acl() -> None:
    refusal = KafkaRefusal("CLUSTER_AUTHORIZATION_FAILED", "Cluster authorization failed.")
    named = access.named(refusal, access.alter_configs("broker", "2"), "User:kpo")
    assert named.code == refusal.code
    assert "IncrementalAlterConfigs on broker 2 for User:kpo" in named.message
    assert "--operation AlterConfigs --cluster" in named.message
    topic = access.named(KafkaRefusal("TOPIC_AUTHORIZATION_FAILED"), access.describe_topic("orders"), "User:kpo")
    assert "on topic 'orders'" in topic.message and "--operation Describe --topic 'orders'" in topic.message
    other = KafkaRefusal("INVALID_PARTITIONS", "no")
    assert access.named(other, access.create_partitions("orders"), "User:kpo") == other


def test_a_refused_login_names_mechanism_and_user_never_a_password() -> None:
    message = access.login_refused_message("SCRAM-SHA-512", "kpo", "b:9092", "invalid credentials")
    assert "SCRAM-SHA-512" in message and "'kpo'" in message and "b:9092" in message


def test_the_backoff_doubles_from_initial_up_to_the_cap_and_resets_on_success() -> None:
    backoff = Backoff(initial=5, maximum=60)
    assert [backoff.delay(n) for n in range(1, 7)] == [5, 10, 20, 40, 60, 60]
    assert backoff.delay(10_000) == 60  # no overflow however long the password stays wrong
    assert backoff.failed(now=100.0) == 5 and backoff.waiting(104.9) and not backoff.waiting(105.0)
    assert backoff.failed(now=105.0) == 10 and backoff.retry_at == 115.0
    backoff.succeeded()
    assert backoff.failures == 0 and not backoff.waiting(105.0)
    assert backoff.failed(now=200.0) == 5


def test_attempts_within_a_window_follow_the_steps() -> None:
    # Attempts at 0, 2, 6, 14, 30, 46: six in a minute with 2 s doubling up to 16 s.
    assert Backoff(initial=2, maximum=16).attempts_within(60) == 6
    assert Backoff(initial=5, maximum=300).attempts_within(30) == 3  # 0, 5, 15


def test_a_refused_login_is_stalled_and_news_only_once() -> None:
    updates, news = access.unreachable_updates([], "AuthenticationFailed", "bad password")
    assert news and {(u.type, u.status, u.reason) for u in updates} == {
        ("Progressing", True, "AuthenticationFailed"), ("Stalled", True, "AuthenticationFailed")}
    previous = [{"type": "Progressing", "status": "True", "reason": "AuthenticationFailed"}]
    assert not access.unreachable_updates(previous, "AuthenticationFailed", "bad password")[1]
    plain, _ = access.unreachable_updates([], "KafkaUnavailable", "down")
    assert [u.type for u in plain] == ["Progressing"]
