"""The generated CRDs: structural, complete, up to date in ``crds/``, and documented in ``docs/api.md``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kpo.api import KINDS, ApiModel, ResourceKind
from kpo.api.crdfiles import crd_files, stale_files
from kpo.api.crdgen import UnsupportedSchemaError, crd_manifest, crd_manifests, structural
from kpo.api.schema import DISTINCT_REPLICAS

REPO = Path(__file__).resolve().parent.parent
#: The only keywords a kpo schema node may use: the structural subset Kubernetes accepts, no $ref/anyOf/oneOf/...
ALLOWED_KEYWORDS = {
    "description", "type", "format", "enum", "default", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum",
    "minLength", "maxLength", "pattern", "minItems", "maxItems", "items", "properties", "required",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-validations",
}


def nodes(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, prop in schema.get("properties", {}).items():
        yield from nodes(prop, f"{path}.{name}")
    if "items" in schema:
        yield from nodes(schema["items"], f"{path}[]")


def openapi(kind: ResourceKind) -> dict[str, Any]:
    schema = crd_manifest(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_every_node_is_typed_and_uses_structural_keywords_only(kind: ResourceKind) -> None:
    for path, node in nodes(openapi(kind), kind.kind):
        assert "type" in node, path
        assert set(node) <= ALLOWED_KEYWORDS, (path, set(node) - ALLOWED_KEYWORDS)
        if node["type"] == "array":
            assert "items" in node, path
        if node["type"] == "object" and not path.endswith(".metadata"):
            assert node.get("properties"), f"{path}: an object without properties would be pruned empty"
        if "exclusiveMinimum" in node:
            assert node["exclusiveMinimum"] is True and "minimum" in node, path


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_every_property_has_a_description(kind: ResourceKind) -> None:
    schema = openapi(kind)
    for path, node in nodes(schema, kind.kind):
        for name, prop in node.get("properties", {}).items():
            if path == kind.kind and name == "metadata":
                continue  # ObjectMeta is described by Kubernetes itself
            assert prop.get("description", "").strip(), f"{path}.{name} has no description"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_list_maps_are_keyed_by_required_fields_and_sets_hold_scalars(kind: ResourceKind) -> None:
    for path, node in nodes(openapi(kind), kind.kind):
        if node.get("x-kubernetes-list-type") == "map":
            keys = node["x-kubernetes-list-map-keys"]
            assert set(keys) <= set(node["items"].get("required", [])), path
        if node.get("x-kubernetes-list-type") == "set":
            assert node["items"]["type"] in ("string", "integer"), path


def test_partition_and_replica_lists_are_atomic_and_replicas_distinct() -> None:
    """Target lists are replaced whole by server-side apply (a re-apply gives exactly the manifest, and managedFields
    stay small at 10,000 entries); replica entries are kept distinct by CEL, partition entries by the models."""
    kpr = openapi(KINDS[0])["properties"]["spec"]["properties"]["partitions"]
    assert kpr["x-kubernetes-list-type"] == "atomic"
    assert "x-kubernetes-list-map-keys" not in kpr
    replicas = kpr["items"]["properties"]["replicas"]
    assert replicas["x-kubernetes-list-type"] == "atomic"
    assert [v["rule"] for v in replicas["x-kubernetes-validations"]] == [DISTINCT_REPLICAS.cel]
    assert replicas["items"]["minimum"] == 0
    assert replicas["minItems"] == 1


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_status_schema_has_no_defaults(kind: ResourceKind) -> None:
    status = openapi(kind)["properties"]["status"]
    assert [path for path, node in nodes(status, "status") if "default" in node] == []


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_names_scope_and_subresources(kind: ResourceKind) -> None:
    crd = crd_manifest(kind)
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{kind.plural}.kpo.dev"
    assert (spec["group"], spec["scope"]) == ("kpo.dev", "Namespaced")
    assert spec["names"]["categories"] == ["kpo"]
    assert spec["names"]["shortNames"] == [{"PartitionReassignment": "kpr", "PreferredLeaderElection": "kple",
                                            "TopicPartitionCount": "ktpc"}[kind.kind]]
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    assert openapi(kind)["required"] == ["spec"]


EXPECTED_COLUMNS = {
    "PartitionReassignment": ["Phase", "Progress", "Strategy", "Age", "Message"],
    "PreferredLeaderElection": ["Phase", "Type", "Elected", "Runs", "Age", "Message"],
    "TopicPartitionCount": ["Topic", "Partitions", "Current", "Phase", "Age", "Message"],
}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_printer_columns_point_at_declared_fields(kind: ResourceKind) -> None:
    [version] = crd_manifest(kind)["spec"]["versions"]
    columns = version["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == EXPECTED_COLUMNS[kind.kind]
    schema = openapi(kind)
    for column in columns:
        path = column["jsonPath"].split("[?")[0].strip(".").split(".")
        if path[0] == "metadata":
            continue
        node = schema
        for part in path:
            node = node["properties"][part]
            if node["type"] == "array":
                node = node["items"]
        assert column["type"] in ("string", "integer", "date") and column["description"]
        if column["type"] == "integer":
            assert node["type"] == "integer", column


def _rules(model: type[ApiModel]) -> set[str]:
    found = {rule.cel for rule in model.rules}
    for info in model.model_fields.values():
        for arg in _walk(info.annotation):
            found |= _rules(arg)
    return found


def _walk(annotation: Any) -> Iterator[type[ApiModel]]:
    if isinstance(annotation, type) and issubclass(annotation, ApiModel):
        yield annotation
    for arg in getattr(annotation, "__args__", ()):
        yield from _walk(arg)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_every_model_rule_is_in_the_crd_as_cel(kind: ResourceKind) -> None:
    in_crd = {
        validation["rule"]
        for _, node in nodes(openapi(kind), kind.kind)
        for validation in node.get("x-kubernetes-validations", [])
    }
    # The one rule on a list field rather than a model: distinct replicas (an atomic list has no native set check).
    assert _rules(kind.spec) == in_crd - {DISTINCT_REPLICAS.cel}
    assert in_crd, "every kind has cross-field rules"


def test_crds_directory_is_up_to_date() -> None:
    assert stale_files(REPO / "crds") == [], "crds/ differs from the models: run `make crds`"
    assert sorted(p.name for p in (REPO / "crds").glob("*.yaml")) == sorted(crd_files())


def test_crd_files_parse_back_to_the_manifests() -> None:
    parsed = [yaml.safe_load(text) for text in crd_files().values()]
    assert parsed == crd_manifests()


def test_unions_of_types_are_refused() -> None:
    class Ambiguous(ApiModel):
        value: int | str

    with pytest.raises(UnsupportedSchemaError, match="unions"):
        structural(Ambiguous)


def test_free_form_maps_are_refused() -> None:
    class FreeForm(ApiModel):
        labels: dict[str, str]

    with pytest.raises(UnsupportedSchemaError, match="maps"):
        structural(FreeForm)


def _field_paths(schema: dict[str, Any], prefix: str) -> Iterator[str]:
    for name, prop in schema.get("properties", {}).items():
        path = f"{prefix}.{name}"
        yield path
        yield from _field_paths(prop, path)
        if "items" in prop:
            yield from _field_paths(prop["items"], f"{path}[]")


def docs_sections() -> dict[str, str]:
    """docs/api.md split at its level-2 headings, keyed by the heading's first word."""
    docs = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    return {section.split(maxsplit=1)[0]: section for section in docs.split("\n## ")[1:]}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_docs_describe_every_field_and_phase_in_the_kinds_section(kind: ResourceKind) -> None:
    sections = docs_sections()
    own, common = sections[kind.kind], sections["Common"]
    schema = openapi(kind)["properties"]
    missing = [
        path
        for part in ("spec", "status")
        for path in _field_paths(schema[part], part)
        if f"`{path}`" not in own and f"`{path}`" not in common
    ]
    assert missing == [], f"docs/api.md does not document: {missing}"
    for phase in kind.status.model_fields["phase"].annotation.__args__[0]:  # type: ignore[union-attr]
        assert f"| `{phase.value}` |" in own, phase


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_object_defaults_spell_out_their_nested_defaults(kind: ResourceKind) -> None:
    # The server checks a default against the object's CEL rules before nested defaults apply: an object default
    # must already hold every nested default, or rules reading those fields fail when the CRD is installed.
    for path, node in nodes(openapi(kind), kind.kind):
        if node["type"] == "object" and "default" in node:
            nested = {name: prop["default"] for name, prop in node["properties"].items() if "default" in prop}
            assert node["default"] == nested, path
