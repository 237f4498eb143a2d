"""CustomResourceDefinitions generated from the pydantic models, so the server and the operator share one API.

Pydantic emits JSON Schema (draft 2020-12); the kube-apiserver wants a *structural* OpenAPI v3 schema: every node
typed, no ``$ref``, no ``anyOf``/``oneOf`` for nullability, ``exclusiveMinimum`` as a boolean beside ``minimum``.
:func:`structural` does that translation and refuses anything it does not know how to translate, so a model change
that the server could not express fails here, at generation time, rather than at ``kubectl apply``.

Status schemas carry no defaults: the server applies defaults on every read, and a defaulted status would show
values the operator never wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kpo.api.resources import API_VERSION, CATEGORY, GROUP, KINDS, VERSION, ResourceKind
from kpo.api.schema import ApiModel

#: Keys carried over from pydantic's schema, in the order they are written (descriptions first reads best in YAML).
_KEY_ORDER = (
    "description",
    "type",
    "format",
    "enum",
    "default",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "items",
    "properties",
    "required",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-validations",
)
#: Keys pydantic emits that have no place (or no meaning) in a structural schema.
_DROPPED = {"title", "additionalProperties", "$defs"}

_API_VERSION_DESCRIPTION = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized "
    "schemas to the latest internal value, and may reject unrecognized values."
)
_KIND_DESCRIPTION = (
    "Kind is a string value representing the REST resource this object represents. Servers may infer this from the "
    "endpoint the client submits requests to. In CamelCase."
)


class UnsupportedSchemaError(ValueError):
    """The model uses a JSON Schema construct that has no structural OpenAPI equivalent."""


def structural(model: type[ApiModel], *, with_defaults: bool = True) -> dict[str, Any]:
    """The model's schema as a structural OpenAPI v3 schema, every ``$ref`` inlined."""
    schema = model.model_json_schema(by_alias=True, mode="validation")
    return _convert(schema, schema.get("$defs", {}), with_defaults=with_defaults, path=model.__name__)


def _convert(node: Mapping[str, Any], defs: Mapping[str, Any], *, with_defaults: bool, path: str) -> dict[str, Any]:
    node = _flatten(node, defs, path)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            if key == "additionalProperties" and value is not False:
                raise UnsupportedSchemaError(f"{path}: maps (additionalProperties: {value}) are not in the kpo API")
            continue
        if key not in _KEY_ORDER:
            raise UnsupportedSchemaError(f"{path}: JSON Schema keyword {key!r} has no structural equivalent")
        if key == "default" and (value is None or not with_defaults):
            continue
        if key == "exclusiveMinimum":
            # JSON Schema draft 2020-12 states the bound; OpenAPI v3.0 (Kubernetes) flags `minimum` as exclusive.
            out["minimum"], out["exclusiveMinimum"] = value, True
        elif key == "exclusiveMaximum":
            out["maximum"], out["exclusiveMaximum"] = value, True
        elif key == "properties":
            out["properties"] = {
                name: _convert(prop, defs, with_defaults=with_defaults, path=f"{path}.{name}")
                for name, prop in value.items()
            }
        elif key == "items":
            out["items"] = _convert(value, defs, with_defaults=with_defaults, path=f"{path}[]")
        elif key == "x-kubernetes-validations":
            # pydantic sorts the keys of extension values; the rule first is how people read (and write) them.
            order = ("rule", "message", "fieldPath", "reason")
            out[key] = [{k: rule[k] for k in order if k in rule} for rule in value]
        else:
            out[key] = value
    if "type" not in out:
        raise UnsupportedSchemaError(f"{path}: no type (structural schemas type every node)")
    return {key: out[key] for key in _KEY_ORDER if key in out}


def _flatten(node: Mapping[str, Any], defs: Mapping[str, Any], path: str) -> dict[str, Any]:
    """Inline ``$ref``s and unwrap ``X | None``; the referring node's own keys (description, default) win."""
    flat = dict(node)
    while True:
        if "$ref" in flat:
            target = defs[flat.pop("$ref").rsplit("/", 1)[-1]]
            flat = {**target, **flat}
        elif "anyOf" in flat or "allOf" in flat:
            variants = [v for v in flat.pop("anyOf", None) or flat.pop("allOf") if v != {"type": "null"}]
            if len(variants) != 1:
                raise UnsupportedSchemaError(f"{path}: unions of several types cannot be expressed structurally")
            flat = {**variants[0], **flat}
        elif "oneOf" in flat or "const" in flat:
            raise UnsupportedSchemaError(f"{path}: oneOf/const cannot be expressed structurally")
        else:
            return flat


def openapi_schema(kind: ResourceKind) -> dict[str, Any]:
    """The openAPIV3Schema of one kind: apiVersion, kind, metadata, spec (required) and status."""
    return {
        "description": kind.description,
        "type": "object",
        "properties": {
            "apiVersion": {"description": _API_VERSION_DESCRIPTION, "type": "string"},
            "kind": {"description": _KIND_DESCRIPTION, "type": "string"},
            "metadata": {"type": "object"},
            "spec": structural(kind.spec),
            "status": structural(kind.status, with_defaults=False),
        },
        "required": ["spec"],
    }


def crd_manifest(kind: ResourceKind) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind, ready for ``kubectl apply`` or server-side apply."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": kind.crd_name,
            "labels": {"app.kubernetes.io/name": "kpo", "app.kubernetes.io/part-of": "kpo"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.singular,
                "shortNames": [kind.short_name],
                "categories": [CATEGORY],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [column.as_crd() for column in kind.columns],
                    "schema": {"openAPIV3Schema": openapi_schema(kind)},
                }
            ],
        },
    }


def crd_manifests() -> list[dict[str, Any]]:
    """Every kpo CRD, for installers (Helm chart, tests, the operator's own start-up check)."""
    return [crd_manifest(kind) for kind in KINDS]


__all__ = ["API_VERSION", "UnsupportedSchemaError", "crd_manifest", "crd_manifests", "openapi_schema", "structural"]
