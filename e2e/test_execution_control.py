"""Execution control on the real cluster (issue 5): in-flight limits, throttles, incremental moves, revert, leaders."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka.admin import KafkaAdminClient
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.kafka_support import (
    assert_partition,
    assert_replicas,
    broker_rate,
    create_topic,
    settled_description,
    topic_list,
    wait_for,
)
from e2e.kube_support import Resources
from e2e.operator_support import OperatorProcess
from e2e.reassignment_support import fill, ongoing, spec_partitions, throttled
from kpo.k8s.throttle_record import data_key, record_name

KPR = "PartitionReassignment"
pytestmark = pytest.mark.usefixtures("kpo_operator")


class Sampler:
    """Samples ListPartitionReassignments of one topic every 100 ms on a thread."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        self.topic = topic
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
        self.samples: list[dict[int, dict[str, list[int]]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            raw = self.admin.list_partition_reassignments()
            self.samples.append({tp.partition: v for tp, v in raw.items() if tp.topic == self.topic})
            time.sleep(0.1)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.admin.close()


def _rotation(admin: AdminClient, bootstrap_servers: str, topic: str, partitions: int) -> dict[int, list[int]]:
    """A topic of filled single-replica partitions spread over brokers 1-3, and targets one broker along."""
    create_topic(admin, topic, partitions, assignment=[[1 + p % 3] for p in range(partitions)])
    fill(bootstrap_servers, topic, list(range(partitions)), messages=20)
    return {p: [1 + (p + 1) % 3] for p in range(partitions)}


def test_max_moves_per_broker_is_never_exceeded(kafka_admin: AdminClient, bootstrap_servers: str,
                                                topic_name: str, resources: Resources) -> None:
    targets = _rotation(kafka_admin, bootstrap_servers, topic_name, 30)
    with Sampler(bootstrap_servers, topic_name) as sampler:
        resources.create(KPR, "one-per-broker", {"partitions": spec_partitions(topic_name, targets),
                                                 "execution": {"maxMovesPerBroker": 1}})
        resources.wait_phase(KPR, "one-per-broker", "Succeeded", timeout=240)
    busy = [s for s in sampler.samples if s]
    assert busy, "no move was ever seen in flight"
    for sample in sampler.samples:
        per_broker = Counter(b for move in sample.values() for b in move["replicas"])
        assert max(per_broker.values(), default=0) <= 1, f"two moves share a broker: {sample}"
    assert_replicas(kafka_admin, topic_name, targets)


def test_max_moves_per_broker_direction_is_never_exceeded(kafka_admin: AdminClient, bootstrap_servers: str,
                                                          topic_name: str, resources: Resources) -> None:
    # A rotation of single-replica partitions: every broker sends to the next one and receives from the previous one,
    # so each broker is busy in both directions. With one move per direction a broker may copy one partition in
    # and one out at the same time (up to three moves cluster-wide), never two in or two out. With one replica the
    # sender is the only current replica, which Kafka lists as the one being removed.
    targets = _rotation(kafka_admin, bootstrap_servers, topic_name, 24)
    # ~200 kB per partition at 200 kB/s: each move lasts about a second, so moves that were started together overlap.
    with throttled(kafka_admin, topic_name, rate=200_000), Sampler(bootstrap_servers, topic_name) as sampler:
        resources.create(KPR, "one-per-direction", {"partitions": spec_partitions(topic_name, targets),
                                                    "execution": {"maxMovesPerBrokerDirection": 1}})
        resources.wait_phase(KPR, "one-per-direction", "Succeeded", timeout=240)
    busy = [s for s in sampler.samples if s]
    assert busy, "no move was ever seen in flight"
    for sample in busy:
        receiving = Counter(b for move in sample.values() for b in move["adding_replicas"])
        sending = Counter(b for move in sample.values() for b in move["removing_replicas"])
        assert max(receiving.values(), default=0) <= 1, f"two moves copy into one broker: {sample}"
        assert max(sending.values(), default=0) <= 1, f"two moves copy out of one broker: {sample}"
    # The limit is per direction, not per broker: moves sharing a broker in opposite directions do run together.
    assert max(len(s) for s in busy) >= 2, f"never more than one move in flight: {busy}"
    assert_replicas(kafka_admin, topic_name, targets)


def _set(admin: AdminClient, kind: ConfigResource.Type, name: str, key: str, value: str | None) -> None:
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(kind, name, incremental_configs=[ConfigEntry(key, value or "", incremental_operation=op)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def test_throttles_set_while_moving_removed_after_and_others_kept(kafka_admin: AdminClient, bootstrap_servers: str,
                                                                  topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1], [2]])
    fill(bootstrap_servers, topic_name, [0, 1])
    # Someone's own throttles, set beforehand: a rate on broker 3 and an entry on the topic.
    _set(kafka_admin, ConfigResource.Type.BROKER, "3", "leader.replication.throttled.rate", "777777")
    _set(kafka_admin, ConfigResource.Type.TOPIC, topic_name, "leader.replication.throttled.replicas", "9:9")
    try:
        resources.create(KPR, "throttled", {"partitions": spec_partitions(topic_name, {0: [2], 1: [1]}),
                                            "execution": {"throttle": 50_000}})
        wait_for(lambda: len(ongoing(bootstrap_servers, topic_name)) == 2, 60, "both moves in flight")
        wait_for(lambda: broker_rate(kafka_admin, 1) == "50000" and broker_rate(kafka_admin, 2) == "50000", 30,
                 "kpo's rate on brokers 1 and 2")
        assert broker_rate(kafka_admin, 3) == "777777", "someone else's rate is not overridden"
        # Existing replicas serve the copies (leader side), new ones fetch them (follower side); 9:9 was there.
        wait_for(lambda: topic_list(kafka_admin, topic_name, "leader.replication.throttled.replicas")
                 == {"9:9", "0:1", "1:2"}, 30, "kpo's leader entries appended to the pre-existing one")
        wait_for(lambda: topic_list(kafka_admin, topic_name, "follower.replication.throttled.replicas")
                 == {"0:2", "1:1"}, 30, "kpo's follower entries")
        status = resources.status(KPR, "throttled")
        assert status["throttle"]["rate"] == 50_000 and status["throttle"]["brokers"] == [1, 2]
        # Let the moves finish: kpo's throttle is still set while they run.
        assert ongoing(bootstrap_servers, topic_name)
        resources.patch_spec(KPR, "throttled", {"execution": {"throttle": 5_000_000}})
        status = resources.wait_phase(KPR, "throttled", "Succeeded", timeout=120)
        assert "throttle" not in status or status["throttle"] is None
        wait_for(lambda: broker_rate(kafka_admin, 1) is None and broker_rate(kafka_admin, 2) is None, 30,
                 "kpo's rates to be removed")
        assert broker_rate(kafka_admin, 3) == "777777"
        wait_for(lambda: topic_list(kafka_admin, topic_name, "leader.replication.throttled.replicas") == {"9:9"},
                 30, "only the pre-existing leader entry to remain")
        wait_for(lambda: topic_list(kafka_admin, topic_name, "follower.replication.throttled.replicas") == set(),
                 30, "kpo's follower entries to be removed")
        wait_for(lambda: "ThrottleRemoved" in [e.reason for e in resources.events("throttled")], 20,
                 "the ThrottleRemoved event")
    finally:
        _set(kafka_admin, ConfigResource.Type.BROKER, "3", "leader.replication.throttled.rate", None)


def test_deleting_the_namespace_of_a_throttled_move_cancels_it_and_takes_the_throttle_back(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, namespace: str,
        api_client: client.ApiClient) -> None:
    """A namespace being deleted removes the resource's ConfigMaps while its finalizer still holds it: the throttle
    journal is then read from status.throttle, and nothing is re-created in the terminating namespace."""
    doomed = f"{namespace}-deleted"  # watched by the session's operator (same prefix), deleted by this test
    core = client.CoreV1Api(api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=doomed)))
    resources = Resources(api_client, doomed)
    create_topic(kafka_admin, topic_name, 2, assignment=[[1], [2]])
    fill(bootstrap_servers, topic_name, [0, 1])
    resources.create(KPR, "doomed", {"partitions": spec_partitions(topic_name, {0: [2], 1: [1]}),
                                     "execution": {"throttle": 50_000}})
    wait_for(lambda: len(ongoing(bootstrap_servers, topic_name)) == 2, 60, "both moves in flight")
    wait_for(lambda: broker_rate(kafka_admin, 1) == "50000" and broker_rate(kafka_admin, 2) == "50000", 30,
             "kpo's rate on brokers 1 and 2")
    wait_for(lambda: (resources.status(KPR, "doomed").get("throttle") or {}).get("brokers") == [1, 2], 30,
             "status.throttle naming brokers 1 and 2")

    core.delete_namespace(doomed)

    def gone() -> bool:
        try:
            core.read_namespace(doomed)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, 180, f"namespace {doomed} to be deleted (the finalizer let go)")
    assert ongoing(bootstrap_servers, topic_name) == {}, "the moves were cancelled"
    assert_replicas(kafka_admin, topic_name, {0: [1], 1: [2]})
    wait_for(lambda: broker_rate(kafka_admin, 1) is None and broker_rate(kafka_admin, 2) is None, 30,
             "kpo's rates to be removed")
    assert topic_list(kafka_admin, topic_name, "leader.replication.throttled.replicas") == set()
    assert topic_list(kafka_admin, topic_name, "follower.replication.throttled.replicas") == set()


def test_incremental_moves_one_replica_at_a_time(kafka_admin: AdminClient, bootstrap_servers: str,
                                                 topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1], [2]])
    fill(bootstrap_servers, topic_name, [0, 1], messages=60)
    targets = {0: [3, 2, 1], 1: [3, 1]}  # RF 1 -> 3 and RF 1 -> 2, leadership moving to broker 3
    with throttled(kafka_admin, topic_name, rate=300_000), Sampler(bootstrap_servers, topic_name) as sampler:
        resources.create(KPR, "stepwise", {"partitions": spec_partitions(topic_name, targets),
                                           "execution": {"strategy": "Incremental"}})
        resources.wait_phase(KPR, "stepwise", "Succeeded", timeout=240)
    seen = [s for s in sampler.samples if s]
    assert seen, "no step was ever seen in flight"
    for sample in seen:
        for partition, move in sample.items():
            assert len(move["adding_replicas"]) <= 1, f"more than one new replica at once: {move}"
            assert len(move["replicas"]) <= len(targets[partition]) + 1, f"replica set above RF+1: {move}"
    assert_replicas(kafka_admin, topic_name, targets)


def test_revert_restores_every_original_including_completed(kafka_admin: AdminClient, bootstrap_servers: str,
                                                            topic_name: str, resources: Resources) -> None:
    original = {0: [1], 1: [2], 2: [3]}
    create_topic(kafka_admin, topic_name, 3, assignment=[original[p] for p in range(3)])
    fill(bootstrap_servers, topic_name, [1, 2])
    with throttled(kafka_admin, topic_name):
        resources.create(KPR, "undo", {"partitions": spec_partitions(topic_name, {0: [2], 1: [3], 2: [1]}),
                                       "onStop": "Revert"})
        wait_for(lambda: resources.status(KPR, "undo").get("progress", {}).get("completed") == 1, 60,
                 "p0 to complete while p1 and p2 are in flight")
        assert_partition(kafka_admin, topic_name, 0, [2])
        resources.patch_spec(KPR, "undo", {"stop": True})
        status = resources.wait_phase(KPR, "undo", "Reverted", timeout=120)
    assert_replicas(kafka_admin, topic_name, original)
    assert ongoing(bootstrap_servers, topic_name) == {}
    assert status["skipped"] == []
    resources.wait_event("undo", "Reverted")
    assert resources.wait_event("undo", "Reverting")


def test_elect_leaders_after_puts_leadership_on_the_first_target_replica(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1, 2], [1, 2]])
    targets = {0: [2, 1], 1: [3, 2]}
    resources.create(KPR, "leaders", {"partitions": spec_partitions(topic_name, targets),
                                      "execution": {"electLeadersAfter": True}})
    status = resources.wait_phase(KPR, "leaders", "Succeeded", timeout=90)
    described = settled_description(kafka_admin, topic_name,
                                    lambda d: {p: leader for p, (_, leader, _) in d.items()} == {0: 2, 1: 3})
    assert {p: leader for p, (_, leader, _) in described.items()} == {0: 2, 1: 3}, described
    assert status["leaderElection"]["failed"] == 0
    assert status["leaderElection"]["elected"] + status["leaderElection"]["alreadyPreferred"] == 2


def _record(api: client.ApiClient, namespace: str) -> dict[str, dict[str, object]]:
    """The cluster's throttle record as the API server holds it: resource key -> journal."""
    try:
        found = client.CoreV1Api(api).read_namespaced_config_map(record_name("default"), namespace)
    except ApiException as exc:
        if exc.status == 404:
            return {}
        raise
    return {k: json.loads(v) for k, v in (found.data or {}).items()}


def test_the_clusters_throttles_are_recorded_in_one_place_and_an_upgraded_operator_leaves_nothing(
        kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str, resources: Resources,
        api_client: client.ApiClient, operator_namespace: str, kpo_operator: OperatorProcess) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1], [2]])
    # 12 MB each under a 20 kB/s throttle: a follower fetches up to 1 MiB and then waits out the quota window (~11 s),
    # so each move lasts a couple of minutes. Equal sizes, so that neither holds most of the bytes copied into broker
    # 3 (which would give it the broker to itself) and both move at once.
    fill(bootstrap_servers, topic_name, [0, 1], messages=1200)
    keys = {name: data_key(f"{resources.namespace}/{name}") for name in ("shares-a", "shares-b")}
    # Two resources whose moves both copy into broker 3: its rates are shared, a reference each.
    for name, partition in (("shares-a", 0), ("shares-b", 1)):
        resources.create(KPR, name, {"partitions": spec_partitions(topic_name, {partition: [3]}),
                                     "execution": {"throttle": 20_000}})
    wait_for(lambda: len(ongoing(bootstrap_servers, topic_name)) == 2, 60, "both moves in flight")
    wait_for(lambda: broker_rate(kafka_admin, 3) == "20000", 30, "kpo's rate on broker 3")
    record = _record(api_client, operator_namespace)
    for name in keys:
        assert 3 in record[keys[name]]["brokers"], record  # type: ignore[operator]
    # An operator of a version that kept the journals per resource only: stopped, no record, started again.
    kpo_operator.kill()
    client.CoreV1Api(api_client).delete_namespaced_config_map(record_name("default"), operator_namespace)
    kpo_operator.start()
    # shares-a ends (stopped: its move cancelled) while shares-b still copies into broker 3.
    resources.patch_spec(KPR, "shares-a", {"stop": True})
    resources.wait_phase(KPR, "shares-a", "Stopped", timeout=120)
    wait_for(lambda: set(ongoing(bootstrap_servers, topic_name)) == {1}, 30, "shares-a's move cancelled")
    assert_partition(kafka_admin, topic_name, 0, [1])
    assert broker_rate(kafka_admin, 3) == "20000", "shares-b still needs broker 3's rate"
    assert "1:2" in topic_list(kafka_admin, topic_name, "leader.replication.throttled.replicas")
    assert topic_list(kafka_admin, topic_name, "follower.replication.throttled.replicas") == {"1:3"}
    wait_for(lambda: keys["shares-b"] in _record(api_client, operator_namespace), 30,
             "shares-b's journal, kept by its own ConfigMap, taken into the record")
    assert keys["shares-a"] not in _record(api_client, operator_namespace)
    resources.patch_spec(KPR, "shares-b", {"execution": {"throttle": 50_000_000}})
    resources.wait_phase(KPR, "shares-b", "Succeeded", timeout=180)
    wait_for(lambda: all(broker_rate(kafka_admin, b, k) is None for b in (1, 2, 3)
                         for k in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")),
             30, "no rate left on any broker")
    for key in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
        assert topic_list(kafka_admin, topic_name, key) == set(), key
    assert not set(keys.values()) & set(_record(api_client, operator_namespace)), "both keys gone from the record"
