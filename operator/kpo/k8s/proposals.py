"""The proposal ConfigMap: a generated plan as the user approves it, and the snapshot facts it rests on.

``<name>-proposal`` holds ``plan.json`` (kafka-reassign-partitions JSON: readable, and usable with that tool),
``metrics.json`` (the job's figures: bytes to move, the lower bound, per-broker load before and after),
``basis.json`` (each planned partition's replicas in the snapshot, to tell whether the cluster changed before the
approval) and ``proposal.json`` (id, generation, the request it answers). Owned by the PartitionReassignment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo.domain.plan_contract import Goal, PlanMetrics, PlanRequest, ReassignmentPlan, plan_of
from kpo.domain.proposal import Proposal, threshold_unreached
from kpo.domain.reassignment import parse_reassignment_document, rollback_document
from kpo.k8s.rollback import owner_reference


def proposal_name(cr_name: str) -> str:
    return f"{cr_name}-proposal"[:253]


class ProposalStore:
    def __init__(self, core: client.CoreV1Api) -> None:
        self.core = core

    def save(self, body: Mapping[str, Any], proposal: Proposal, request: PlanRequest, metrics: PlanMetrics,
             created_at: str) -> str:
        meta = body["metadata"]
        name = proposal_name(meta["name"])
        data = {
            "plan.json": plan_of(proposal.targets, proposal.log_dirs).to_json(),
            "metrics.json": metrics.to_json(),
            "basis.json": json.dumps(rollback_document(proposal.basis)),
            "proposal.json": json.dumps({"id": proposal.id, "generation": proposal.generation,
                                         "createdAt": created_at, "request": json.loads(request.to_json())}),
        }
        cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(
            name=name, namespace=meta["namespace"], owner_references=[owner_reference(body)],
            labels={"app.kubernetes.io/managed-by": "kpo", "kpo.dev/partitionreassignment": meta["name"]}),
            data=data)
        try:
            self.core.create_namespaced_config_map(meta["namespace"], cm)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.core.replace_namespaced_config_map(name, meta["namespace"], cm)
        return name

    def load(self, namespace: str, cr_name: str) -> tuple[Proposal, PlanRequest] | None:
        try:
            cm = self.core.read_namespaced_config_map(proposal_name(cr_name), namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        data = cm.data or {}
        if not {"plan.json", "basis.json", "proposal.json"} <= set(data):
            return None
        meta = json.loads(data["proposal.json"])
        plan = ReassignmentPlan.from_json(data["plan.json"])
        basis = parse_reassignment_document(json.loads(data["basis.json"]))
        request = PlanRequest.model_validate(meta["request"])
        # RelieveCapacity's best reachable state stays ThresholdUnreachable on every tick: the metrics say so.
        metrics = PlanMetrics.from_json(data["metrics.json"]) if request.goal is Goal.RELIEVE_CAPACITY \
            and "metrics.json" in data else None
        proposal = Proposal(id=str(meta["id"]), generation=int(meta["generation"]), targets=plan.targets(),
                            basis=basis, log_dirs=plan.log_dir_targets(),
                            unreached=threshold_unreached(request.goal, metrics))
        return proposal, request
