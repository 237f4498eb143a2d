"""Base classes and field types shared by every kpo API model.

The pydantic models in :mod:`kpo.api` are the single source of truth for the API: the CRDs in ``crds/`` are generated
from their JSON schema, and the operator parses every spec through them. Two enforcement points therefore have to
agree — the kube-apiserver (OpenAPI schema plus CEL) and pydantic (field constraints plus validators). This module
keeps them in step:

* Field types are *strict* (``StrictInt``, ``StrictStr``, ...) because the server never coerces ``"3"`` into ``3``;
  a lax model would accept manifests the server refuses.
* A cross-field rule is declared once, as a :class:`Rule` that carries both the CEL expression the server evaluates
  and the Python predicate the model evaluates, with one message for both. :class:`ApiModel` emits the CEL into the
  schema (``x-kubernetes-validations``) and checks the predicates after field validation.

Spec models forbid unknown fields (the server rejects them under ``fieldValidation=Strict``, kubectl's default).
Status models ignore them, so an operator built against an older API can still read a newer status.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Self, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator
from pydantic.alias_generators import to_camel

from kpo.api.topic_pattern import compile_topic_pattern

H = TypeVar("H", bound=Hashable)

#: Kafka's legal topic names (``org.apache.kafka.common.internals.Topic``): 1-249 of these characters.
TOPIC_NAME_PATTERN = r"^[a-zA-Z0-9._-]{1,249}$"
#: A Kubernetes object name (DNS-1123 subdomain), for references to other kpo resources.
OBJECT_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#: Kafka broker ids and partition indices are int32 on the wire.
INT32_MAX = 2**31 - 1
#: Upper bound of a replica list; the server needs one to bound the cost of CEL rules that read such lists.
MAX_REPLICAS = 16


class RuleReason(StrEnum):
    """The ``reason`` of a CEL rule; it picks the wording of the server's error ("Required value", ...)."""

    INVALID = "FieldValueInvalid"
    REQUIRED = "FieldValueRequired"
    FORBIDDEN = "FieldValueForbidden"


@dataclass(frozen=True)
class Rule:
    """A cross-field rule, enforced by the kube-apiserver (``cel``) and by the model (``holds``) alike.

    ``field_path`` (relative to the object the rule sits on, e.g. ``.brokers``) makes the server report the error on
    that field instead of on the enclosing object, so users see which field to fix. Transition rules (those that read
    ``oldSelf``) have no Python twin: a model only ever sees one version of an object.
    """

    cel: str
    message: str
    holds: Callable[[Any], bool] | None
    field_path: str | None = None
    reason: RuleReason = RuleReason.INVALID

    @property
    def is_transition(self) -> bool:
        return "oldSelf" in self.cel

    def as_validation(self) -> dict[str, str]:
        validation = {"rule": self.cel, "message": self.message}
        if self.field_path is not None:
            validation["fieldPath"] = self.field_path
        if self.reason is not RuleReason.INVALID:
            validation["reason"] = self.reason.value
        return validation

    def error(self) -> str:
        where = self.field_path.lstrip(".") if self.field_path else ""
        return f"{where}: {self.message}" if where else self.message


def cel_in(expression: str, values: tuple[StrEnum, ...]) -> str:
    """``self.goal in ['A', 'B']`` built from enum members, so CEL and Python cannot drift apart."""
    return f"{expression} in [{', '.join(repr(v.value) for v in values)}]"


def _schema_extensions(schema: dict[str, Any], model: type[Any]) -> None:
    rules: tuple[Rule, ...] = getattr(model, "rules", ())
    if rules:
        schema["x-kubernetes-validations"] = [rule.as_validation() for rule in rules]


class ApiModel(BaseModel):
    """Base of every spec model: camelCase on the wire, strict about unknown fields, :class:`Rule`-checked."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        json_schema_extra=_schema_extensions,
    )

    rules: ClassVar[tuple[Rule, ...]] = ()

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        broken = [rule.error() for rule in type(self).rules if rule.holds is not None and not rule.holds(self)]
        if broken:
            raise ValueError("; ".join(broken))
        return self

    def to_k8s(self) -> dict[str, Any]:
        """The camelCase dict Kubernetes expects (for a status patch, say): unset optional fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class StatusModel(ApiModel):
    """Base of every status model: written by the operator, read back leniently (unknown fields are ignored)."""

    model_config = ConfigDict(extra="ignore")


def list_map(*keys: str) -> dict[str, Any]:
    """Schema extension for a list the server treats as a map: duplicate keys are rejected natively."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


LIST_SET: dict[str, Any] = {"x-kubernetes-list-type": "set"}
#: A list of targets that is one document, replaced whole by server-side apply: a forced re-apply gives exactly the
#: manifest's entries (a ``map`` would keep entries another manager added), and the server's record of who owns what
#: (managedFields) stays one line instead of about 110 bytes per entry, which kept 10,000 entries from fitting etcd.
#: The server then cannot refuse a partition listed twice; the models do (the resource is Invalid).
LIST_ATOMIC: dict[str, Any] = {"x-kubernetes-list-type": "atomic"}


def object_default(model: type[ApiModel]) -> dict[str, Any]:
    """Schema extension for an object field the server fills in when it is omitted: the model's own defaults.

    The whole object is spelled out (not ``{}``) because the server checks a default against the object's CEL rules
    *before* nested defaults apply, so ``{}`` would fail any rule that reads a defaulted field.
    """
    return {"default": model().to_k8s()}


def require_distinct(values: list[H]) -> list[H]:
    """Python twin of ``x-kubernetes-list-type: set``."""
    duplicates = [v for v, count in Counter(values).items() if count > 1]
    if duplicates:
        raise ValueError(f"duplicate values {sorted(set(map(str, duplicates)))}: every entry must be distinct")
    return values


TopicName = Annotated[StrictStr, Field(pattern=TOPIC_NAME_PATTERN, min_length=1, max_length=249)]
BrokerId = Annotated[StrictInt, Field(ge=0, le=INT32_MAX, json_schema_extra={"format": "int32"})]
PartitionIndex = Annotated[StrictInt, Field(ge=0, le=INT32_MAX, json_schema_extra={"format": "int32"})]
ObjectName = Annotated[StrictStr, Field(pattern=OBJECT_NAME_PATTERN, min_length=1, max_length=253)]
#: Lists the server treats as sets (``x-kubernetes-list-type: set``): duplicates are refused by both enforcers.
TopicSet = Annotated[list[TopicName], Field(json_schema_extra=LIST_SET), AfterValidator(require_distinct)]
BrokerSet = Annotated[list[BrokerId], Field(json_schema_extra=LIST_SET), AfterValidator(require_distinct)]
#: A replica list is an ordered whole: ``atomic``, so server-side apply replaces it instead of merging it by element
#: (a ``set`` would merge two managers' lists into one no manifest asked for, and change the replication factor).
#: Distinctness, which ``set`` gave natively, is then a CEL rule.
#: ``indexOf`` rather than ``exists_one`` and at most 16 replicas: the server estimates the rule's cost over 10,000
#: partitions, and anything costlier is refused when the CRD is installed.
DISTINCT_REPLICAS = Rule(cel="self.all(b, self.indexOf(b) == self.lastIndexOf(b))",
                         message="replicas must be distinct broker ids", holds=None)
REPLICA_LIST: dict[str, Any] = {
    "x-kubernetes-list-type": "atomic",
    "x-kubernetes-validations": [DISTINCT_REPLICAS.as_validation()],
}
#: One partition's replica list: distinct broker ids, preferred leader first.
ReplicaSet = Annotated[
    list[BrokerId],
    Field(min_length=1, max_length=MAX_REPLICAS, json_schema_extra=REPLICA_LIST),
    AfterValidator(require_distinct),
]


def compiles_as_regex(pattern: str) -> str:
    """Topic patterns are RE2 expressions matched against the whole topic name, so RE2 must compile them.

    The server cannot check this (CEL has no "is a regex" test): a pattern only the model refuses makes the resource
    Invalid instead of being refused at admission. RE2 refuses what would need backtracking (backreferences,
    lookarounds), so no pattern can stall the operator (see :mod:`kpo.api.topic_pattern`).
    """
    compile_topic_pattern(pattern)
    return pattern


TopicPattern = Annotated[StrictStr, Field(min_length=1, max_length=1024), AfterValidator(compiles_as_regex)]
