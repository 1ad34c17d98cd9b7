"""JSON as the code reads and writes it, typed: no escape from the type checker.

Read side: a parsed JSON object is a `JsonObject` (`Mapping[str, object]`), its values `object`
until narrowed, one level at a time: `subobject` and `subobjects` narrow to objects, an absent
key, `null` or another shape reading as empty; `text` and `number` narrow to a string or a number
(None otherwise); `isinstance` narrows the rest where it is used.

Write side: what the code builds to serialize is a `JsonValue` (scalars, sequences and mappings
of JsonValues; covariant, so a `dict[str, int]` or a `list[str]` is one as it is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

# A parsed JSON object: keys are strings, values not yet narrowed.
JsonObject: TypeAlias = Mapping[str, object]

# What `json.loads` gives for a scalar.
JsonScalar: TypeAlias = str | int | float | bool | None

# A JSON document the code builds (to `json.dumps` it or hand it to a client).
JsonValue: TypeAlias = "JsonScalar | Sequence[JsonValue] | Mapping[str, JsonValue]"


def subobject(obj: JsonObject, key: str) -> JsonObject:
    """`obj[key]` when it is a JSON object; else (absent, null, another shape) empty."""
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def subobjects(obj: JsonObject, key: str) -> list[dict[str, object]]:
    """The JSON objects of the list `obj[key]` (elements of another shape skipped); else empty."""
    value = obj.get(key)
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []



def text(obj: JsonObject, key: str) -> str | None:
    """`obj[key]` when it is a string; else None."""
    value = obj.get(key)
    return value if isinstance(value, str) else None


def number(obj: JsonObject, key: str) -> float | None:
    """`obj[key]` when it is a number (not a bool); else None."""
    value = obj.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
