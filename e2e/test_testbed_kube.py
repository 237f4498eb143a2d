"""The Kubernetes half of the test bed is real: CRDs, status subresources, garbage collection, RBAC, pinned tools."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.kafka_support import wait_for
from kpo_testbed import Testbed
from kpo_testbed.paths import read_versions

GROUP = "smoke.kpo.dev"


@pytest.fixture(scope="module")
def widget_crd(api_client: client.ApiClient) -> Iterator[str]:
    ext = client.ApiextensionsV1Api(api_client)
    plural = f"widgets{uuid.uuid4().hex[:6]}"
    name = f"{plural}.{GROUP}"
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural[:-1], "kind": f"W{plural[1:-1]}"},
            "versions": [{
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}}},
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                }}},
            }],
        },
    }
    ext.create_custom_resource_definition(body)

    def established() -> bool:
        crd = ext.read_custom_resource_definition(name)
        return any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or []))

    wait_for(established, 30, f"CRD {name} to be established")
    yield plural
    ext.delete_custom_resource_definition(name)


def test_crd_object_status_subresource_and_delete(api_client: client.ApiClient, widget_crd: str,
                                                  namespace: str) -> None:
    custom = client.CustomObjectsApi(api_client)
    kind = f"W{widget_crd[1:-1]}"
    obj = custom.create_namespaced_custom_object(GROUP, "v1", namespace, widget_crd, {
        "apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": "one"}, "spec": {"size": 3}})
    assert obj["metadata"]["generation"] == 1

    # The schema is enforced at admission.
    with pytest.raises(ApiException) as refused:
        custom.create_namespaced_custom_object(GROUP, "v1", namespace, widget_crd, {
            "apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": "bad"}, "spec": {"size": 0}})
    assert refused.value.status == 422
    assert "spec.size" in refused.value.body

    # With a status subresource, status written through the main resource is ignored, and through /status it sticks.
    custom.patch_namespaced_custom_object(GROUP, "v1", namespace, widget_crd, "one", {"status": {"phase": "Main"}})
    assert "status" not in custom.get_namespaced_custom_object(GROUP, "v1", namespace, widget_crd, "one")
    custom.patch_namespaced_custom_object_status(GROUP, "v1", namespace, widget_crd, "one",
                                                 {"status": {"phase": "Ready"}})
    got = custom.get_namespaced_custom_object(GROUP, "v1", namespace, widget_crd, "one")
    assert got["status"] == {"phase": "Ready"}
    assert got["metadata"]["generation"] == 1

    custom.delete_namespaced_custom_object(GROUP, "v1", namespace, widget_crd, "one")
    with pytest.raises(ApiException) as gone:
        custom.get_namespaced_custom_object(GROUP, "v1", namespace, widget_crd, "one")
    assert gone.value.status == 404


def test_deleting_the_owner_garbage_collects_its_configmap(api_client: client.ApiClient, widget_crd: str,
                                                           namespace: str) -> None:
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    kind = f"W{widget_crd[1:-1]}"
    owner = custom.create_namespaced_custom_object(GROUP, "v1", namespace, widget_crd, {
        "apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": "owner"}, "spec": {"size": 1}})
    ref = client.V1OwnerReference(api_version=f"{GROUP}/v1", kind=kind, name="owner",
                                  uid=owner["metadata"]["uid"], controller=True, block_owner_deletion=True)
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="owned", owner_references=[ref]), data={"k": "v"}))
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="unowned"), data={"k": "v"}))

    custom.delete_namespaced_custom_object(GROUP, "v1", namespace, widget_crd, "owner")

    def owned_gone() -> bool:
        try:
            core.read_namespaced_config_map("owned", namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(owned_gone, 60, "the garbage collector to delete the owned ConfigMap")
    assert core.read_namespaced_config_map("unowned", namespace).data == {"k": "v"}


def test_namespace_deletion_completes(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    name = f"e2e-ns-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    core.create_namespaced_config_map(name, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="c")))
    core.delete_namespace(name)

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, 90, f"namespace {name} to be deleted by the namespace controller")


def test_service_account_token_is_bound_by_its_role(api_client: client.ApiClient, namespace: str,
                                                    testbed: Testbed) -> None:
    core = client.CoreV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="narrow")))
    rbac.create_namespaced_role(namespace, client.V1Role(
        metadata=client.V1ObjectMeta(name="read-configmaps"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=["get", "list"])]))
    rbac.create_namespaced_role_binding(namespace, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="narrow-reads-configmaps"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="read-configmaps"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="narrow", namespace=namespace)]))
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="visible"), data={"a": "b"}))

    token = core.create_namespaced_service_account_token(
        "narrow", namespace, client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))).status.token
    conf = client.Configuration()
    conf.host = testbed.state.kube.server
    conf.ssl_ca_cert = str(testbed.state.kube.pki / "ca.crt")
    conf.api_key = {"authorization": f"Bearer {token}"}
    narrow = client.CoreV1Api(client.ApiClient(conf))

    def allowed() -> list[str]:
        return [cm.metadata.name for cm in narrow.list_namespaced_config_map(namespace).items]

    # RBAC caches refresh quickly but not instantly after the binding is created.
    assert "visible" in wait_for(lambda: _forbidden_as_empty(allowed), 30, "the role binding to take effect")
    assert narrow.read_namespaced_config_map("visible", namespace).data == {"a": "b"}
    for forbidden in (
        lambda: narrow.list_namespaced_secret(namespace),
        lambda: narrow.create_namespaced_config_map(namespace, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="nope"))),
        lambda: narrow.list_namespaced_config_map("default"),
    ):
        with pytest.raises(ApiException) as denied:
            forbidden()
        assert denied.value.status == 403


def _forbidden_as_empty(call: object) -> list[str]:
    assert callable(call)
    try:
        result = call()
    except ApiException as exc:
        if exc.status == 403:
            return []
        raise
    assert isinstance(result, list)
    return result


def test_kubectl_and_helm_report_the_pinned_versions(testbed: Testbed) -> None:
    versions = read_versions()
    env = testbed.env()
    out = subprocess.run(["kubectl", "version", "-o", "json"], env=env, capture_output=True, text=True, check=True)
    reported = json.loads(out.stdout)
    assert reported["clientVersion"]["gitVersion"] == f"v{versions['KUBERNETES_VERSION']}"
    assert reported["serverVersion"]["gitVersion"] == f"v{versions['KUBERNETES_VERSION']}"
    raw = subprocess.run(["kubectl", "get", "--raw", "/version"], env=env, capture_output=True, text=True, check=True)
    assert json.loads(raw.stdout)["gitVersion"] == f"v{versions['KUBERNETES_VERSION']}"
    helm = subprocess.run(["helm", "version", "--short"], env=env, capture_output=True, text=True, check=True)
    assert helm.stdout.strip().startswith(f"v{versions['HELM_VERSION']}")
    etcd = subprocess.run(["etcd", "--version"], env=env, capture_output=True, text=True, check=True)
    assert f"etcd Version: {versions['ETCD_VERSION']}" in etcd.stdout
