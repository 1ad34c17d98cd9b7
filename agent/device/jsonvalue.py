"""JSON as an API sends it (Kubernetes, Metrics Server, a BMC's Redfish): a `JsonObject` whose
values are `object` until narrowed, one level at a time — `subobject`, `subobjects`, `text`. An
absent key, `null` or another shape reads as empty (or None), never as an error.

The agent's own until the shared vocabulary gains it (common/); imports nothing of the agent."""

from __future__ import annotations

from collections.abc import Mapping

JsonObject = Mapping[str, object]


def subobject(obj: JsonObject, key: str) -> JsonObject:
    """`obj[key]` when it is a JSON object; else (absent, null, another shape) empty."""
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def subobjects(obj: JsonObject, key: str) -> list[JsonObject]:
    """The JSON objects of the list `obj[key]` (elements of another shape skipped); else empty."""
    value = obj.get(key)
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def text(obj: JsonObject, key: str) -> str | None:
    """`obj[key]` when it is a string; else None."""
    value = obj.get(key)
    return value if isinstance(value, str) else None


def number(obj: JsonObject, key: str) -> float | None:
    """`obj[key]` when it is a number (not a bool); else None."""
    value = obj.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
