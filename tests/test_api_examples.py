"""``examples/``: one commented manifest per capability, every one accepted by the models, together using it all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kpo.api import API_VERSION, KINDS, ResourceKind, kind_named
from kpo.api.crdgen import crd_manifest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))


def load(path: Path) -> dict[str, Any]:
    documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    assert len(documents) == 1, f"{path.name}: one resource per file"
    assert isinstance(documents[0], dict)
    return documents[0]


def test_there_is_an_example_per_capability() -> None:
    assert len(EXAMPLE_FILES) >= 23
    assert {load(p)["kind"] for p in EXAMPLE_FILES} == {k.kind for k in KINDS}


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_is_commented_namespace_less_and_valid(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# "), f"{path.name} must open with a comment saying what it does"
    manifest = load(path)
    assert manifest["apiVersion"] == API_VERSION
    assert "namespace" not in manifest["metadata"]
    kind = kind_named(manifest["kind"])
    resource = kind.parse(manifest)
    assert resource.model_dump(by_alias=True)["metadata"]["name"] == manifest["metadata"]["name"]


def test_example_names_are_unique() -> None:
    names = [(load(p)["kind"], load(p)["metadata"]["name"]) for p in EXAMPLE_FILES]
    assert len(names) == len(set(names))


def _paths(value: Any, prefix: str) -> Iterator[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield f"{prefix}.{key}"
            yield from _paths(inner, f"{prefix}.{key}")
    elif isinstance(value, list):
        for item in value:
            yield from _paths(item, f"{prefix}[]")


def _schema_paths(schema: dict[str, Any], prefix: str) -> Iterator[str]:
    for name, prop in schema.get("properties", {}).items():
        yield f"{prefix}.{name}"
        yield from _schema_paths(prop, f"{prefix}.{name}")
        if "items" in prop:
            yield from _schema_paths(prop["items"], f"{prefix}.{name}[]")


def _enum_values(schema: dict[str, Any], prefix: str) -> Iterator[tuple[str, str]]:
    for name, prop in schema.get("properties", {}).items():
        for value in prop.get("enum", []):
            if value != prop.get("default"):
                yield f"{prefix}.{name}", value
        yield from _enum_values(prop, f"{prefix}.{name}")


def _values_at(value: Any, path: list[str]) -> Iterator[Any]:
    if not path:
        yield value
    elif isinstance(value, dict) and path[0] in value:
        yield from _values_at(value[path[0]], path[1:])


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_examples_use_every_spec_field_and_every_non_default_choice(kind: ResourceKind) -> None:
    manifests = [m for m in map(load, EXAMPLE_FILES) if m["kind"] == kind.kind]
    spec_schema = crd_manifest(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    used = {path for m in manifests for path in _paths(m["spec"], "spec")}
    assert set(_schema_paths(spec_schema, "spec")) - used == set()
    for path, value in _enum_values(spec_schema, "spec"):
        seen = {v for m in manifests for v in _values_at(m, path.split("."))}
        assert value in seen, f"no example sets {path}: {value}"
