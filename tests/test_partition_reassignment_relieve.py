"""RelieveCapacity's plumbing around the planning job: the snapshot carries each dir's capacity, the stored proposal
keeps ThresholdUnreachable, the conditions name it, the summary shows each dir's used share."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from kafka_fake import FakeCluster
from kpo.domain.model import DirCapacity, LogDirReport, TopicPartition
from kpo.domain.plan_contract import DirLoad, DirSpace, Goal, PlanMetrics, PlanRequest
from kpo.domain.proposal import Proposal
from kpo.k8s.proposals import ProposalStore
from kpo.resources.partition_reassignment import plan_reconciler
from kpo.resources.partition_reassignment.lifecycle import Phase
from kpo.resources.partition_reassignment.plan_lifecycle import PlanningDecision
from kpo.resources.partition_reassignment.status import summary_status

T0 = TopicPartition("orders", 0)
RELIEVE = PlanRequest(goal=Goal.RELIEVE_CAPACITY, threshold=0.8)


class MeasuredCluster(FakeCluster):
    """Brokers 1 to 4 with two dirs each; broker 4's /b runs an older Kafka's answer (no capacity)."""

    def log_dirs(self, topics: Collection[str], brokers: Collection[int]) -> LogDirReport:
        super().log_dirs(topics, brokers)
        return LogDirReport(sizes={(T0, 1): 10, (T0, 2): 10}, broker_dirs={b: frozenset({"/a", "/b"}) for b in brokers},
                            replica_dirs={(T0, 1): "/a", (T0, 2): "/b"}, capacity=self.dir_capacity(brokers))

    def dir_capacity(self, brokers: Collection[int]) -> dict[tuple[int, str], DirCapacity]:
        return {(b, d): DirCapacity(1000, 150 if d == "/a" else 600) for b in brokers for d in ("/a", "/b")
                if (b, d) != (4, "/b")}


def test_the_snapshot_of_relieve_capacity_carries_every_dir_and_its_capacity() -> None:
    cluster = MeasuredCluster({T0: (1, 2)})
    snap = plan_reconciler.snapshot(cluster, RELIEVE)  # type: ignore[arg-type]
    assert cluster.calls.count("log_dirs") == 1, "one DescribeLogDirs carries sizes, dirs and capacity"
    one = next(b for b in snap.brokers if b.id == 1)
    assert one.log_dirs == ("/a", "/b")
    assert one.capacity == (DirSpace(log_dir="/a", total_bytes=1000, usable_bytes=150),
                            DirSpace(log_dir="/b", total_bytes=1000, usable_bytes=600))
    assert next(b for b in snap.brokers if b.id == 4).capacity == (
        DirSpace(log_dir="/a", total_bytes=1000, usable_bytes=150),)
    assert snap.partitions[0].log_dirs == ("/a", "/b")
    assert snap.view.dir_capacity[(1, "/a")] == DirCapacity(1000, 150) and (4, "/b") not in snap.view.dir_capacity
    # Another goal asks for no capacity and carries none.
    cluster = MeasuredCluster({T0: (1, 2)})
    other = plan_reconciler.snapshot(cluster, PlanRequest(goal=Goal.REBALANCE_DISKS))  # type: ignore[arg-type]
    assert all(b.capacity == () for b in other.brokers)
    assert other.view.dir_capacity == {}


class Core:
    """The two ConfigMap calls ProposalStore makes, in memory."""

    def __init__(self) -> None:
        self.maps: dict[str, Any] = {}

    def create_namespaced_config_map(self, namespace: str, cm: Any) -> None:
        self.maps[cm.metadata.name] = cm

    def read_namespaced_config_map(self, name: str, namespace: str) -> Any:
        return self.maps[name]


BODY = {"apiVersion": "kpo.dev/v1alpha1", "kind": "PartitionReassignment",
        "metadata": {"name": "relieve", "namespace": "kafka", "uid": "u-1"}}


def test_a_stored_proposal_short_of_the_threshold_keeps_saying_why() -> None:
    proposal = Proposal(id="abc", generation=1, targets={T0: (1, 3)}, basis={T0: (1, 2)})
    short = PlanMetrics(status="ok", goal=Goal.RELIEVE_CAPACITY, band_reached=False,
                        message="log dir /a of broker 1 stays at 0.85: the best reachable state")
    store = ProposalStore(Core())  # type: ignore[arg-type]
    store.save(BODY, proposal, RELIEVE, short, "2026-11-26T15:00:00Z")
    loaded = store.load("kafka", "relieve")
    assert loaded is not None and loaded[1] == RELIEVE
    assert loaded[0].unreached == short.message and loaded[0].targets == proposal.targets
    met = PlanMetrics(status="ok", goal=Goal.RELIEVE_CAPACITY, band_reached=True)
    store.save(BODY, proposal, RELIEVE, met, "2026-11-26T15:00:00Z")
    again = store.load("kafka", "relieve")
    assert again is not None and again[0].unreached == ""


def test_threshold_unreachable_is_the_reason_of_the_conditions_while_awaiting_approval() -> None:
    proposal = Proposal(id="abc", generation=1, targets={T0: (1, 3)}, basis={T0: (1, 2)})
    short = PlanningDecision(Phase.PROPOSED, "ThresholdUnreachable", "dirs above; proposal abc waits for approval",
                             proposal=proposal, awaiting_approval=True)
    assert {c.reason for c in plan_reconciler._conditions(short)} == {"ThresholdUnreachable"}
    plain = PlanningDecision(Phase.PROPOSED, "Proposed", "proposal abc waits", proposal=proposal,
                             awaiting_approval=True)
    assert {c.reason for c in plan_reconciler._conditions(plain)} == {"AwaitingApproval"}


def test_the_summary_gives_each_dirs_used_share_before_and_after() -> None:
    metrics = PlanMetrics(
        status="ok", goal=Goal.RELIEVE_CAPACITY, band_reached=True,
        dirs_before=(DirLoad(broker=1, log_dir="/a", bytes=850, replicas=3, total_bytes=1000, used_bytes=860),
                     DirLoad(broker=1, log_dir="/b", bytes=100, replicas=1, total_bytes=3000, used_bytes=110)),
        dirs_after=(DirLoad(broker=1, log_dir="/a", bytes=650, replicas=2, total_bytes=1000, used_bytes=660),
                    DirLoad(broker=1, log_dir="/b", bytes=300, replicas=2, total_bytes=3000, used_bytes=310)))
    dirs = summary_status(metrics).log_dirs
    assert dirs is not None
    assert [(d.log_dir, d.used_ratio_before, d.used_ratio_after) for d in dirs] == [
        ("/a", 0.86, 0.66), ("/b", 0.0367, 0.1033)]
    disks = PlanMetrics(status="ok", goal=Goal.REBALANCE_DISKS,
                        dirs_before=(DirLoad(broker=1, log_dir="/a", bytes=5, replicas=1),),
                        dirs_after=(DirLoad(broker=1, log_dir="/a", bytes=0, replicas=0),))
    [only] = summary_status(disks).log_dirs or []
    assert (only.bytes_before, only.bytes_after, only.used_ratio_before, only.used_ratio_after) == (5, 0, None, None)
