"""The kpo API at the door of a real kube-apiserver: what it accepts, what it refuses and how it explains itself.

Everything here goes through the test bed's kube-apiserver with the CRDs generated from the models (``kpo_crds``):

* every manifest in ``examples/`` is accepted, and what the server stores (defaults applied) parses through the
  models to the same spec the models read from the file;
* every case of the invalid table in ``tests/test_api_invalid.py`` is refused at admission, with an error that names
  the offending field;
* generated specs (``tests/test_api_generated.py``) are accepted by the server exactly when the models accept them;
* a fully populated status survives the status subresource unpruned; transition rules refuse immutable changes;
* ``kubectl get kpo`` lists all three kinds and ``kubectl explain`` shows the field descriptions.

Most requests are server-side dry runs: they run the whole admission chain (schema, CEL, pruning, defaulting) and
store nothing, so an operator watching the cluster during the same session never sees them.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.kube_support import Resources, wait_until
from e2e.operator_support import OperatorProcess
from kpo.api import API_VERSION, GROUP, KINDS, VERSION, ResourceKind, kind_named
from kpo.api.crdgen import crd_manifest
from kpo_testbed import Testbed
from tests.test_api_generated import SPEC_FAMILIES, VALID, Defect, family_id, model_accepts, with_defect
from tests.test_api_invalid import INVALID_CASES, Invalid, case_id, load_example
from tests.test_api_status import FULL_STATUS

EXAMPLES = sorted(p.name for p in (Path(__file__).resolve().parent.parent / "examples").glob("*.yaml"))
#: Resources this module creates for real name a cluster no operator knows, so an operator running in the same
#: session refuses them as Invalid without ever touching Kafka.
NOWHERE = "kpo-e2e-nowhere"


@pytest.fixture(scope="module")
def api_namespace(api_client: client.ApiClient, kpo_crds: None) -> Iterator[str]:
    name = f"e2e-api-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    custom = client.CustomObjectsApi(api_client)

    def served() -> bool:
        # Discovery of freshly (re)installed CRDs can lag their Established condition by a moment.
        try:
            for kind in KINDS:
                custom.list_namespaced_custom_object(GROUP, VERSION, name, kind.plural)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    wait_until(served, 30, "the kpo resources to be served")
    yield name
    core.delete_namespace(name)


class Server:
    """Admission requests for kpo resources in one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace

    def create(self, manifest: dict[str, Any], *, dry_run: bool = True) -> dict[str, Any]:
        kind = kind_named(manifest["kind"])
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, kind.plural, manifest,
            dry_run="All" if dry_run else None, field_validation="Strict")
        return created

    def refusal(self, manifest: dict[str, Any]) -> ApiException | None:
        try:
            self.create(manifest)
        except ApiException as exc:
            if exc.status in (400, 422):
                return exc
            raise
        return None

    def patch_spec(self, kind: ResourceKind, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        patched: dict[str, Any] = self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, kind.plural, name, {"spec": spec}, dry_run="All")
        return patched

    def patch_status(self, kind: ResourceKind, name: str, status: dict[str, Any]) -> dict[str, Any]:
        patched: dict[str, Any] = self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, kind.plural, name, {"status": status}, dry_run="All")
        return patched


@pytest.fixture(scope="module")
def server(api_client: client.ApiClient, api_namespace: str) -> Server:
    return Server(api_client, api_namespace)


@pytest.fixture(scope="module")
def stored(server: Server) -> dict[str, dict[str, Any]]:
    """One real object per kind (from the examples, aimed at a cluster no operator knows), by kind."""
    picks = {"PartitionReassignment": "reassignment-stop.yaml",
             "PreferredLeaderElection": "leader-election-topics.yaml",
             "TopicPartitionCount": "partition-count-balanced.yaml"}
    objects = {}
    for kind, example in picks.items():
        manifest = load_example(example)
        manifest["spec"]["clusterRef"] = NOWHERE
        objects[kind] = server.create(manifest, dry_run=False)
    return objects


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_is_accepted_and_what_is_stored_parses_to_the_same_spec(server: Server, example: str) -> None:
    manifest = load_example(example)
    kind = kind_named(manifest["kind"])
    created = server.create(manifest)
    assert created["metadata"]["name"] == manifest["metadata"]["name"]
    resource = kind.parse(created)
    # The server's defaults are the models' defaults: what it stored means what the file means.
    assert resource.model_dump()["spec"] == kind.spec.model_validate(manifest["spec"]).model_dump()
    # Nothing the user wrote was pruned.
    assert _subset(manifest["spec"], created["spec"]), (manifest["spec"], created["spec"])


def _subset(wanted: Any, got: Any) -> bool:
    if isinstance(wanted, dict):
        return isinstance(got, dict) and all(k in got and _subset(v, got[k]) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(got, list) and len(wanted) == len(got) and all(map(_subset, wanted, got))
    return bool(wanted == got)


@pytest.mark.parametrize("case", [c for c in INVALID_CASES if c.at_admission], ids=case_id)
def test_invalid_manifest_is_refused_at_admission_naming_the_field(server: Server, case: Invalid) -> None:
    refused = server.refusal(case.manifest())
    assert refused is not None, f"the server accepted {case.name}"
    body = str(refused.body)
    assert re.search(re.escape(case.field) + r"(?![\w.])", body), f"{case.field} not named in: {body}"
    if case.rule is not None:
        assert case.rule in body


@pytest.mark.parametrize("case", [c for c in INVALID_CASES if not c.at_admission], ids=case_id)
def test_what_admission_cannot_see_the_operator_makes_invalid_naming_the_field(
        resources: Resources, kpo_operator: OperatorProcess, case: Invalid) -> None:
    """A partition listed twice: the list is atomic (one document for server-side apply), so the server stores it;
    the operator refuses it as Invalid, with the field and an Event, and sends nothing to Kafka."""
    manifest = case.manifest()
    manifest["metadata"] = {"name": f"twice-{uuid.uuid4().hex[:6]}"}
    kind = kind_named(manifest["kind"])
    resources.custom.create_namespaced_custom_object(GROUP, VERSION, resources.namespace, kind.plural, manifest)
    name = manifest["metadata"]["name"]
    resources.wait_phase(kind.kind, name, "Invalid", timeout=60)
    stalled = resources.condition(kind.kind, name, "Stalled")
    assert stalled is not None and "duplicate entry for orders-0" in stalled["message"], stalled
    assert case.field.removeprefix("spec.") in stalled["message"], stalled
    wait_until(lambda: [e for e in resources.events(name) if e.type == "Warning"], 30, "the Warning Event")


def test_the_admission_table_is_large() -> None:
    assert len(INVALID_CASES) >= 30


OUTCOMES: Counter[tuple[str, str]] = Counter()


@pytest.mark.parametrize("family", SPEC_FAMILIES, ids=family_id)
def test_the_server_accepts_exactly_what_the_models_accept(server: Server, family: tuple[str, Defect | None]) -> None:
    kind_name, broken = family
    kind = kind_named(kind_name)

    @settings(max_examples=60 if broken is None else 15, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(spec=with_defect(VALID[kind_name], broken))
    def agree(spec: dict[str, Any]) -> None:
        manifest = {"apiVersion": API_VERSION, "kind": kind.kind, "metadata": {"name": "generated"},
                    "spec": copy.deepcopy(spec)}
        models_say = model_accepts(kind, spec)
        try:
            created = server.create(manifest)
            if broken is not None and not broken.at_admission:
                # Only the models see this defect (the operator makes the resource Invalid): the server stores it.
                assert not models_say, f"the defect {broken.name} left the spec valid: {spec}"
                OUTCOMES[kind.kind, "accepted"] += 1
                return
        except ApiException as exc:
            if exc.status not in (400, 422):
                raise
            assert not models_say, f"the models accept a spec the server refuses: {spec}\n{exc.body}"
            OUTCOMES[kind.kind, "refused"] += 1
            return
        assert models_say, f"the server accepts a spec the models refuse: {spec}"
        # What the server stored (with its defaults) parses, and means what the models read from the spec.
        assert kind.parse(created).model_dump()["spec"] == kind.spec.model_validate(spec).model_dump()
        OUTCOMES[kind.kind, "accepted"] += 1

    agree()


def test_the_comparison_saw_both_outcomes_for_every_kind() -> None:
    # Runs after the comparisons above (file order): a comparison in which one side never said yes (or never no)
    # would prove little.
    summary = {kind.kind: (OUTCOMES[kind.kind, "accepted"], OUTCOMES[kind.kind, "refused"]) for kind in KINDS}
    print(f"generated specs (accepted by both, refused by both): {summary}")
    for accepted, refused in summary.values():
        assert accepted >= 50 and refused >= 50


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_a_full_status_survives_the_status_subresource(server: Server, stored: dict[str, dict[str, Any]],
                                                       kind: ResourceKind) -> None:
    name = stored[kind.kind]["metadata"]["name"]
    written = FULL_STATUS[kind.kind].to_k8s()
    patched = server.patch_status(kind, name, written)
    assert patched["status"] == written  # nothing pruned, nothing defaulted
    assert type(FULL_STATUS[kind.kind]).model_validate(patched["status"]) == FULL_STATUS[kind.kind]


def test_status_written_outside_the_schema_is_refused(server: Server, stored: dict[str, dict[str, Any]]) -> None:
    kind = kind_named("PartitionReassignment")
    name = stored[kind.kind]["metadata"]["name"]
    with pytest.raises(ApiException) as refused:
        server.patch_status(kind, name, {"phase": "Sleeping", "progress": {"percent": 101}})
    assert "status.phase" in str(refused.value.body)
    assert "status.progress.percent" in str(refused.value.body)


IMMUTABLE = (
    ("PartitionReassignment", {"clusterRef": "elsewhere"}, "spec.clusterRef"),
    ("PartitionReassignment", {"clusterRef": None}, "spec.clusterRef"),
    ("PreferredLeaderElection", {"clusterRef": "elsewhere"}, "spec.clusterRef"),
    ("TopicPartitionCount", {"topic": "another-topic"}, "spec.topic"),
    ("TopicPartitionCount", {"clusterRef": "elsewhere"}, "spec.clusterRef"),
)


@pytest.mark.parametrize(("kind_name", "change", "field"), IMMUTABLE, ids=[f"{k}:{f}" for k, _, f in IMMUTABLE])
def test_immutable_fields_cannot_change(server: Server, stored: dict[str, dict[str, Any]], kind_name: str,
                                        change: dict[str, Any], field: str) -> None:
    kind = kind_named(kind_name)
    with pytest.raises(ApiException) as refused:
        server.patch_spec(kind, stored[kind_name]["metadata"]["name"], change)
    assert refused.value.status == 422
    assert field in str(refused.value.body) and "immutable" in str(refused.value.body)


def test_targets_may_change_while_the_rest_stays(server: Server, stored: dict[str, dict[str, Any]]) -> None:
    kind = kind_named("PartitionReassignment")
    retarget = {"partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 1]}], "stop": False}
    patched = server.patch_spec(kind, stored[kind.kind]["metadata"]["name"], retarget)
    assert patched["spec"]["partitions"] == retarget["partitions"]
    assert patched["spec"]["clusterRef"] == NOWHERE


def _kubectl(testbed: Testbed, *args: str) -> str:
    done = subprocess.run(["kubectl", *args], env=testbed.env(), capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_kubectl_get_kpo_lists_all_three_kinds(testbed: Testbed, api_namespace: str,
                                               stored: dict[str, dict[str, Any]]) -> None:
    listed = _kubectl(testbed, "get", "kpo", "-n", api_namespace, "-o", "name").split()
    expected = {f"{kind_named(k).singular}.{GROUP}/{obj['metadata']['name']}" for k, obj in stored.items()}
    assert expected <= set(listed)
    # Short names work, and each kind prints its columns.
    table = _kubectl(testbed, "get", "kpr,kple,ktpc", "-n", api_namespace)
    for kind in KINDS:
        [version] = crd_manifest(kind)["spec"]["versions"]
        columns = [c["name"].upper() for c in version["additionalPrinterColumns"] if not c.get("priority")]
        assert re.search(r"NAME\s+" + r"\s+".join(columns), table), (kind.kind, table)
    ktpc = _kubectl(testbed, "get", "ktpc", "-n", api_namespace, "--no-headers")
    assert re.match(r"orders-12\s+orders\s+12\s", ktpc), ktpc
    wide = _kubectl(testbed, "get", "kpr", "-n", api_namespace, "-o", "wide")
    assert "MESSAGE" in wide


def _words(text: str) -> str:
    return " ".join(text.split())


def test_kubectl_explain_shows_the_descriptions(testbed: Testbed, api_namespace: str) -> None:
    spec_schema = crd_manifest(kind_named("PartitionReassignment"))["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"]["properties"]["spec"]

    def explained() -> str:
        # The server publishes the OpenAPI of a (re)installed CRD a moment after it is established.
        out = _words(_kubectl(testbed, "explain", "partitionreassignment.spec"))
        return out if _words(spec_schema["properties"]["execution"]["description"]) in out else ""

    out = wait_until(explained, 60, "kubectl explain to show kpo's descriptions", interval=2)
    assert "GROUP: kpo.dev" in out and "VERSION: v1alpha1" in out
    for name, prop in spec_schema["properties"].items():
        assert f"{name} <" in out, name
        assert _words(prop["description"]) in out, name
    deeper = _words(_kubectl(testbed, "explain", "kpr.spec.plan.tolerance"))
    assert "0.10 = within 10%" in deeper


@pytest.mark.parametrize("kind_name", ["PartitionReassignment", "TopicPartitionCount"])
def test_a_forced_server_side_reapply_gives_exactly_the_manifests_replica_lists(
        testbed: Testbed, api_namespace: str, tmp_path: Path, kind_name: str) -> None:
    """Replica order is meaning (the first is the preferred leader, the length the replication factor): a GitOps
    re-apply after someone else's patch must give the manifest's lists, never a merge of the two (issue 26 B)."""
    kind = kind_named(kind_name)
    name = f"ssa-{uuid.uuid4().hex[:6]}"
    if kind_name == "PartitionReassignment":
        spec: dict[str, Any] = {"clusterRef": NOWHERE, "partitions": [{"topic": "orders", "partition": 0,
                                                                       "replicas": [3, 1]}]}
        pointer, path = "/spec/partitions/0/replicas", ("partitions", 0, "replicas")
    else:
        spec = {"clusterRef": NOWHERE, "topic": "orders", "partitions": 4,
                "placement": {"strategy": "Explicit", "assignments": [[3, 1]]}}
        pointer, path = "/spec/placement/assignments/0", ("placement", "assignments", 0)
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": API_VERSION, "kind": kind.kind,
                                        "metadata": {"name": name, "namespace": api_namespace}, "spec": spec}))

    def replicas() -> Any:
        stored = json.loads(_kubectl(testbed, "get", f"{kind.plural}.{GROUP}", name, "-n", api_namespace,
                                     "-o", "json"))["spec"]
        for key in path:
            stored = stored[key]
        return stored

    _kubectl(testbed, "apply", "--server-side", "--field-manager=gitops", "-f", str(manifest))
    assert replicas() == [3, 1]
    _kubectl(testbed, "patch", f"{kind.plural}.{GROUP}", name, "-n", api_namespace, "--type=json",
             "-p", json.dumps([{"op": "replace", "path": pointer, "value": [2, 3]}]))
    assert replicas() == [2, 3]
    _kubectl(testbed, "apply", "--server-side", "--force-conflicts", "--field-manager=gitops", "-f", str(manifest))
    assert replicas() == [3, 1], "the re-apply must give the manifest's list, in its order"
    # Distinctness, which a set list type gave, still holds at admission.
    duplicate = subprocess.run(
        ["kubectl", "patch", f"{kind.plural}.{GROUP}", name, "-n", api_namespace, "--type=json",
         "-p", json.dumps([{"op": "replace", "path": pointer, "value": [2, 2]}])],
        env=testbed.env(), capture_output=True, text=True, timeout=60, check=False)
    assert duplicate.returncode != 0 and "replicas must be distinct broker ids" in duplicate.stderr, duplicate.stderr
    assert replicas() == [3, 1]
