"""Flux delivers kpo's resources from git (issue 28): real source-controller and kustomize-controller, a real git
server, the real operator and Kafka.

Each behaviour is judged twice: by Flux's own view (the Kustomization's Ready condition, its reason and message, the
revision it applied) and by Kafka's (the replicas Kafka reports, and ListPartitionReassignments for what is moving),
never by kpo's status alone. The Kustomization health-checks kpo's kinds with the CEL expressions kpo ships
(deploy/flux/health-checks.yaml): with kstatus alone, kustomize-controller 1.9.6 went Ready about 0.2 s after applying a
new PartitionReassignment, before kpo had written a status (kstatus reads a custom resource without one as Current).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest
from confluent_kafka.admin import AdminClient
from kubernetes import client

from e2e.flux_support import FLUX_POLL, FluxControllers, GitOps, held, kpo_manifest, kpr_manifest
from e2e.kafka_support import assert_replicas, create_topic, describe_topic, replicas_of, wait_for
from e2e.kube_support import Resources
from e2e.reassignment_support import fill, ongoing, spec_partitions, throttled
from kpo_testbed import Testbed

pytestmark = pytest.mark.usefixtures("kpo_operator")
KPR = "PartitionReassignment"
KTPC, KPLE = "TopicPartitionCount", "PreferredLeaderElection"
# ~4 MB a partition: at the throttle's 50 kB/s a move stays in flight for about a minute (the first MiB goes at once),
# long enough for Flux's 5 s health-check polls and a commit to land mid-move.
MESSAGES = 400


@pytest.fixture(scope="module")
def flux(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FluxControllers]:
    controllers = FluxControllers(testbed, tmp_path_factory.mktemp("flux"))
    controllers.install_crds()
    try:
        controllers.start()
        yield controllers
    finally:
        controllers.stop()


@pytest.fixture
def gitops(flux: FluxControllers, api_client: client.ApiClient, resources: Resources) -> Iterator[GitOps]:
    delivered = GitOps(flux, api_client, resources.namespace)
    yield delivered
    delivered.remove()


def test_kustomization_is_ready_only_after_the_reassignment_succeeded(
        gitops: GitOps, kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str,
        resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 1, assignment=[[1, 2]])
    fill(bootstrap_servers, topic_name, [0], messages=MESSAGES)
    with throttled(kafka_admin, topic_name):
        revision = gitops.commit({"moving.yaml": kpr_manifest("moving", {
            "partitions": spec_partitions(topic_name, {0: [2, 3]})})}, "move p0 to 2,3")
        gitops.deliver()
        gitops.wait_attempted(revision)
        wait_for(lambda: ongoing(bootstrap_servers, topic_name).get(0), 60, "Kafka to report the move")
        assert ongoing(bootstrap_servers, topic_name)[0].target == (2, 3)
        resources.wait_phase(KPR, "moving", "Executing", timeout=30)
        # Flux is health-checking the revision: for more than two of its polls, with the move in flight in Kafka,
        # the Kustomization is not Ready.
        held(lambda: gitops.condition("Ready").get("status") != "True", 2 * FLUX_POLL + 1,
             "not Ready while Kafka moves")
        assert 0 in ongoing(bootstrap_servers, topic_name), "the move ended during the check: too little data"
        progressing = gitops.condition("Ready")
        assert progressing["status"] == "Unknown" and progressing["reason"] == "Progressing", progressing
        healthy = gitops.condition("Healthy")
        assert healthy["status"] == "Unknown" and "Running health checks" in healthy["message"], healthy
    ready = gitops.wait_ready("True", revision)
    assert ready["reason"] == "ReconciliationSucceeded" and revision in ready["message"], ready
    assert gitops.kustomization()["status"]["lastAppliedRevision"] == revision
    # Kafka's view: the move is done, nothing is left moving.
    assert_replicas(kafka_admin, topic_name, {0: [2, 3]})
    assert ongoing(bootstrap_servers, topic_name) == {}
    # And the order: Flux turned Ready no earlier than kpo's Ready (written at Succeeded).
    kpo_ready = resources.condition(KPR, "moving", "Ready")
    assert kpo_ready is not None and kpo_ready["status"] == "True"
    assert resources.status(KPR, "moving")["phase"] == "Succeeded"
    # (Flux writes whole seconds: kpo's time is cut to the second to compare.)
    flux_at = datetime.fromisoformat(ready["lastTransitionTime"])
    kpo_at = datetime.fromisoformat(kpo_ready["lastTransitionTime"]).replace(microsecond=0)
    assert flux_at >= kpo_at, (ready, kpo_ready)


def test_a_failing_reassignment_fails_the_kustomization(gitops: GitOps, kafka_admin: AdminClient,
                                                       bootstrap_servers: str, topic_name: str,
                                                       resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 1, assignment=[[1, 2]])
    # Broker 9 does not exist: kpo refuses (Invalid, Stalled) and sends nothing to Kafka.
    revision = gitops.commit({"impossible.yaml": kpr_manifest("impossible", {
        "partitions": spec_partitions(topic_name, {0: [3, 9]})})}, "move p0 to a broker that does not exist")
    gitops.deliver()
    failed = gitops.wait_ready("False", revision, timeout=120)
    stalled = resources.condition(KPR, "impossible", "Stalled")
    assert stalled is not None and stalled["status"] == "True", stalled
    assert "9" in stalled["message"], stalled
    assert failed["reason"] == "HealthCheckFailed", failed
    # kstatus turns kpo's Stalled into Failed; Flux names the resource and that status (pkg/ssa's WaitForSet does
    # not carry a resource's own message into the Kustomization's).
    assert f"PartitionReassignment/{resources.namespace}/impossible status: 'Failed'" in failed["message"], failed
    healthy = gitops.condition("Healthy")
    assert healthy["status"] == "False" and healthy["reason"] == "HealthCheckFailed", healthy
    # Kafka's view: nothing moved, nothing is moving.
    assert_replicas(kafka_admin, topic_name, {0: [1, 2]})
    assert ongoing(bootstrap_servers, topic_name) == {}

    # The fix is a commit too: Flux goes Ready once kpo has carried it out.
    fixed = gitops.commit({"impossible.yaml": kpr_manifest("impossible", {
        "partitions": spec_partitions(topic_name, {0: [3, 2]})})}, "move p0 to brokers that exist")
    gitops.wait_ready("True", fixed, timeout=180)
    assert_replicas(kafka_admin, topic_name, {0: [3, 2]})
    assert resources.status(KPR, "impossible")["phase"] == "Succeeded"


def test_a_partition_count_and_an_election_from_git_fail_and_succeed_as_kpo_and_kafka_say(
        gitops: GitOps, kafka_admin: AdminClient, topic_name: str, resources: Resources) -> None:
    """The other two kinds through the same health expressions: a TopicPartitionCount that would shrink the topic fails
    the Kustomization (Kafka keeps its 6 partitions); the commit that grows it instead and adds a
    PreferredLeaderElection makes it Ready once kpo says both are done, and Kafka shows 12 partitions, each led by its
    preferred replica."""
    create_topic(kafka_admin, topic_name, 6, replication_factor=2)
    shrink = gitops.commit({"grow.yaml": kpo_manifest(KTPC, "grow", {"topic": topic_name, "partitions": 4})},
                           "shrink the topic")
    gitops.deliver()
    failed = gitops.wait_ready("False", shrink, timeout=120)
    assert failed["reason"] == "HealthCheckFailed", failed
    assert f"TopicPartitionCount/{resources.namespace}/grow status: 'Failed'" in failed["message"], failed
    refused = resources.condition(KTPC, "grow", "Ready")
    assert refused is not None and refused["reason"] == "PartitionDecrease", refused
    assert len(describe_topic(kafka_admin, topic_name)) == 6

    grow = gitops.commit({"grow.yaml": kpo_manifest(KTPC, "grow", {"topic": topic_name, "partitions": 12}),
                          "elect.yaml": kpo_manifest(KPLE, "elect", {"topics": [topic_name]})},
                         "grow the topic, then elect its preferred leaders")
    ready = gitops.wait_ready("True", grow, timeout=180)
    described = wait_for(lambda: (found := describe_topic(kafka_admin, topic_name)) and len(found) == 12
                         and found, 30, "12 partitions in DescribeTopics")
    assert all(leader == replicas[0] for replicas, leader, _ in described.values()), described
    flux_at = datetime.fromisoformat(ready["lastTransitionTime"])
    for kind, name in ((KTPC, "grow"), (KPLE, "elect")):
        assert resources.status(kind, name)["phase"] == "Succeeded", resources.status(kind, name)
        kpo_ready = resources.condition(kind, name, "Ready")
        assert kpo_ready is not None and kpo_ready["status"] == "True", kpo_ready
        assert flux_at >= datetime.fromisoformat(kpo_ready["lastTransitionTime"]).replace(microsecond=0)


def test_a_commit_retargets_the_move_in_flight(gitops: GitOps, kafka_admin: AdminClient, bootstrap_servers: str,
                                               topic_name: str, resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 1, assignment=[[1]])
    fill(bootstrap_servers, topic_name, [0], messages=MESSAGES)
    with throttled(kafka_admin, topic_name):
        first = gitops.commit({"retarget.yaml": kpr_manifest("retarget", {
            "partitions": spec_partitions(topic_name, {0: [2]})})}, "move p0 to 2")
        gitops.deliver()
        gitops.wait_attempted(first)
        wait_for(lambda: ongoing(bootstrap_servers, topic_name).get(0), 60, "Kafka to report the first move")
        assert ongoing(bootstrap_servers, topic_name)[0].target == (2,)
        second = gitops.commit({"retarget.yaml": kpr_manifest("retarget", {
            "partitions": spec_partitions(topic_name, {0: [3]})})}, "move p0 to 3 instead")
        # Flux applies the new revision while the first is still being health-checked, and the first move is still
        # going in Kafka when it lands: kpo re-targets it in flight.
        gitops.wait_attempted(second)
        wait_for(lambda: (m := ongoing(bootstrap_servers, topic_name).get(0)) is not None and m.target == (3,), 60,
                 "Kafka to move p0 to 3 instead")
        assert gitops.condition("Ready").get("status") != "True"
        assert resources.get(KPR, "retarget")["metadata"]["generation"] == 2
    ready = gitops.wait_ready("True", second)
    assert gitops.kustomization()["status"]["lastAppliedRevision"] == second, ready
    # Kafka's view: the second target, and no replica left on broker 2 (KIP-236's intermediate replica).
    assert_replicas(kafka_admin, topic_name, {0: [3]})
    assert ongoing(bootstrap_servers, topic_name) == {}
    assert resources.status(KPR, "retarget")["phase"] == "Succeeded"


def test_a_commit_removing_the_reassignment_prunes_it_and_kpo_honours_its_deletion_policy(
        gitops: GitOps, kafka_admin: AdminClient, bootstrap_servers: str, topic_name: str,
        resources: Resources) -> None:
    create_topic(kafka_admin, topic_name, 2, assignment=[[1], [1]])
    fill(bootstrap_servers, topic_name, [0, 1], messages=MESSAGES)
    with throttled(kafka_admin, topic_name):
        applied = gitops.commit({
            "cancel.yaml": kpr_manifest("cancelled", {"partitions": spec_partitions(topic_name, {0: [2]}),
                                                      "deletionPolicy": "Cancel"}),
            "orphan.yaml": kpr_manifest("orphaned", {"partitions": spec_partitions(topic_name, {1: [3]}),
                                                     "deletionPolicy": "Orphan"}),
        }, "move p0 to 2 (Cancel) and p1 to 3 (Orphan)")
        gitops.deliver()
        gitops.wait_attempted(applied)
        wait_for(lambda: {0, 1} <= set(ongoing(bootstrap_servers, topic_name)), 60, "Kafka to report both moves")
        removed = gitops.commit({"cancel.yaml": None, "orphan.yaml": None}, "remove both reassignments")
        # Flux prunes both (they are in its inventory); kpo's finalizer acts on each before it lets it go.
        wait_for(lambda: not resources.exists(KPR, "cancelled") and not resources.exists(KPR, "orphaned"), 90,
                 "Flux to prune both reassignments")
        moving = ongoing(bootstrap_servers, topic_name)
        # Cancel: Kafka cancelled the move (KIP-455), p0 is back on its replicas. Orphan: p1 still moves to 3.
        assert 0 not in moving and replicas_of(kafka_admin, topic_name)[0] == [1], moving
        assert moving[1].target == (3,), moving
        inventory = {e["id"] for e in gitops.kustomization()["status"]["inventory"]["entries"]}
        assert not any("PartitionReassignment" in e for e in inventory), inventory
    wait_for(lambda: replicas_of(kafka_admin, topic_name) == {0: [1], 1: [3]}, 120, "the orphaned move to finish")
    assert ongoing(bootstrap_servers, topic_name) == {}
    gitops.wait_ready("True", removed, timeout=120)
