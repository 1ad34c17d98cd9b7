"""The Kubernetes objects the scheduler reads, as msgspec structs holding only the fields it
uses (a body's other fields are skipped, not built), and msgspec's validation errors in the
extender's words. Turned into PodInfo / NodeInfo by `scheduler.cluster.kubeobjects`.

Absent and `null` are the same (empty). Maps (labels, requests, allocatable…) stay dicts so
that a message can name the key. Where the API is lenient the structs are too: an owner
reference's `controller`, a condition's `status` and `lastTransitionTime` are `object`s (any JSON
value), narrowed where used.

`rfc3339` is the other way: a time as the objects the scheduler writes (Events, conditions) carry
it (metav1.Time).

Objects read as plain JSON (the API's answers that no struct here describes: lists, Leases,
PodDisruptionBudgets) are `common.jsonvalue.JsonObject`s, their values `object` until narrowed:
`subobject` and `subobjects` there narrow one level, an absent key, `null` or another
shape reading as empty.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TypeVar

import msgspec
from msgspec import Struct

from scheduler.domain.model import ShapeError

Map = dict[str, object]

# -- the structs: only what is read --------------------------------------------------------------


class OwnerReference(Struct):
    kind: object = None
    name: object = None
    controller: object = None


class ObjectMeta(Struct):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resourceVersion: object = None  # noqa: N815 (Kubernetes' key)
    labels: Map | None = None
    annotations: Map | None = None
    ownerReferences: list[OwnerReference] | None = None  # noqa: N815


class ResourceRequirements(Struct):
    requests: Map | None = None
    limits: Map | None = None


class Container(Struct):
    name: str | None = None
    resources: ResourceRequirements | None = None
    restartPolicy: str | None = None  # noqa: N815


class Requirement(Struct):
    key: str | None = None
    operator: str | None = None
    values: list[str | None] | None = None


class Term(Struct):
    matchExpressions: list[Requirement] | None = None  # noqa: N815
    matchFields: list[Requirement] | None = None  # noqa: N815


class RequiredTerms(Struct):
    nodeSelectorTerms: list[Term] | None = None  # noqa: N815


class PreferredTerm(Struct):
    weight: int = 0
    preference: Term | None = None


class NodeAffinity(Struct):
    requiredDuringSchedulingIgnoredDuringExecution: RequiredTerms | None = None  # noqa: N815
    preferredDuringSchedulingIgnoredDuringExecution: list[PreferredTerm] | None = None  # noqa: N815


class Affinity(Struct):
    nodeAffinity: NodeAffinity | None = None  # noqa: N815


class TolerationSpec(Struct):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    tolerationSeconds: int | None = None  # noqa: N815


class PodSpec(Struct):
    containers: list[Container] | None = None
    initContainers: list[Container] | None = None  # noqa: N815
    overhead: Map | None = None
    resources: ResourceRequirements | None = None  # pod-level (PodLevelResources)
    nodeSelector: Map | None = None  # noqa: N815
    affinity: Affinity | None = None
    tolerations: list[TolerationSpec] | None = None
    schedulerName: str | None = None  # noqa: N815
    nodeName: str | None = None  # noqa: N815
    priority: int | None = None


class PodStatus(Struct):
    phase: str | None = None


class Pod(Struct):
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None


class TaintSpec(Struct):
    key: str | None = None
    value: str | None = None
    effect: str | None = None


class NodeSpec(Struct):
    taints: list[TaintSpec] | None = None
    unschedulable: bool | None = None


class Condition(Struct):
    type: str | None = None
    status: object = None
    lastTransitionTime: object = None  # noqa: N815


class NodeStatus(Struct):
    allocatable: Map | None = None
    capacity: Map | None = None
    conditions: list[Condition] | None = None


class Node(Struct):
    metadata: ObjectMeta | None = None
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


# -- msgspec's errors in the extender's words -------------------------------------------------

_ERROR = re.compile(r"^Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`(?: - at `\$\.?(?P<path>[^`]*)`)?$")
_AT = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_WORDS = {
    "str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
    "object": "an object", "array": "an array", "null": "null",
}


def _words(types: str) -> str:
    kinds = [t.strip() for t in types.split("|") if t.strip() != "null"]
    return " or ".join(_WORDS.get(t, t) for t in kinds) or "null"


def type_error(exc: msgspec.ValidationError, prefix: str = "") -> tuple[str, str]:
    """(path, message) of a msgspec validation error: `spec.tolerations[0].effect`,
    `spec.tolerations[0].effect: expected a string, got int` (`prefix` before the path)."""
    text = str(exc)
    found = _ERROR.match(text)
    if found is not None:
        path = found.group("path") or ""
        message = f"expected {_words(found.group('want'))}, got {found.group('got')}"
    else:
        at = _AT.search(text)
        path = at.group("path") if at is not None else ""
        message = (text[: at.start()] if at is not None else text).rstrip(".")
        message = message[:1].lower() + message[1:]
    where = f"{prefix}{'.' if prefix and path and not path.startswith('[') else ''}{path}"
    return where, f"{where}: {message}" if where else message


T = TypeVar("T", bound=Struct)


def convert(value: object, kind: type[T], where: str) -> T:
    """Parsed JSON (a dict) as struct `kind` (one already decoded as it is); ShapeError naming
    the field otherwise."""
    if isinstance(value, kind):
        return value
    if value is None:
        return kind()
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise ShapeError(type_error(exc, where)[1]) from exc


def rfc3339(wall: float) -> str:
    """Unix seconds as metav1.Time (RFC 3339, whole seconds, UTC): `2024-05-01T10:00:00Z`."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
