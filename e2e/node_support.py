"""What the node's tests share: the ServiceAccount a Spark driver runs as, and the volume that lets the operator and
the driver and executors see one work directory (a hostPath on the single node, where a cluster would use a claim)."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException

PLANNER_ACCOUNT = "kpo-planner"


def planner_service_account(api: client.ApiClient, namespace: str, name: str = PLANNER_ACCOUNT) -> None:
    """The Spark driver's ServiceAccount with the rules the chart gives it (helm/kpo/templates/rbac.yaml)."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    role = client.V1Role(metadata=client.V1ObjectMeta(name=name), rules=[client.V1PolicyRule(
        api_groups=[""], resources=["pods", "services", "configmaps", "persistentvolumeclaims"],
        verbs=["create", "get", "list", "watch", "delete", "deletecollection"])])
    binding = client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name=name),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name=name),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name=name, namespace=namespace)])
    for create, body in ((core.create_namespaced_service_account,
                          client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))),
                         (rbac.create_namespaced_role, role), (rbac.create_namespaced_role_binding, binding)):
        try:
            create(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise


def work_volume_conf(work_dir: Path) -> dict[str, str]:
    """sparkConf that mounts ``work_dir`` of the node at the same path in the driver and the executors."""
    conf: dict[str, str] = {}
    for role in ("driver", "executor"):
        prefix = f"spark.kubernetes.{role}.volumes.hostPath.plans"
        conf[f"{prefix}.mount.path"] = str(work_dir)
        conf[f"{prefix}.options.path"] = str(work_dir)
        conf[f"{prefix}.options.type"] = "DirectoryOrCreate"
    return conf
