"""docs/reference/record.md: the sample record from its JSON Schema (agent/monitor/record_schema.py,
the one the tests validate every record against), and the decision log's lines from what its
builders (scheduler/decisionlog/schema.py) write, with an example of each made by the code
(tools/docs/specimens.py). The decision log has no schema file: its keys' descriptions are
DECISION_KEYS below, and the page is refused while a key the builders write has none (or one
describes a key they no longer write)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from agent.monitor.record_schema import SAMPLE_SCHEMA
from agent.monitor.snapshot import SCHEMA as SAMPLE
from scheduler.decisionlog.schema import SCHEMA as DECISION
from tools.docs.markdown import code, header, table
from tools.docs.specimens import decision_lines, sample_record

JSON_TYPES = {"string": "text", "number": "number", "integer": "integer", "boolean": "true/false",
              "null": "null", "object": "object", "array": "list"}
# Keys of every line, then each kind's own: what the decision log's builders write.
DECISION_KEYS: dict[str, dict[str, str]] = {
    "": {
        "schema": f"`{DECISION}`",
        "type": "the line's kind: decision, outcome or abandoned",
        "id": "the decision's id; its outcome or abandoned line carries the same",
        "time": "wall-clock time of the line, Unix seconds",
    },
    "decision": {
        "source": "the writer: standalone, extender or simulator",
        "mode": "shadow (recorded only) or active (placed so)",
        "scorer": "the Score plugin (or profile) whose scores the candidates carry",
        "pod": "the pod placed",
        "pod.namespace": "its namespace",
        "pod.name": "its name",
        "pod.uid": "its uid",
        "pod.cpu_request_cores": "its effective CPU request, cores",
        "pod.memory_request_gib": "its effective memory request, GiB",
        "chosen": "the node it was bound to (null from the extender: kube-scheduler binds)",
        "recommended": "the node the energy scoring recommends",
        "default_choice": "the node kube-scheduler's default scoring picks (null from the extender)",
        "candidate_count": "how many nodes were candidates (before the line kept its best)",
        "candidates": "the best candidates (up to the writer's limit, best first) and the chosen, recommended "
                      "and default nodes",
        "candidates[].node": "the node",
        "candidates[].score": "its energy score, 0–100",
        "candidates[].delta_watts": "the predicted power increase ΔP of placing the pod there (null: unknown)",
        "candidates[].reason": "ok, or why it was priced without fresh telemetry: stale, missing, no_curve",
        "candidates[].default_score": "kube-scheduler's fit + balanced score, 0–200",
        "candidates[].telemetry_age_seconds": "the age of its telemetry (null: none)",
        "candidates[].features": "its features, by name (the feature schema's; null: none recorded)",
        "feature_schema": "the feature schema of the candidates' features, when they have some",
    },
    "outcome": {
        "node": "the chosen node",
        "window_seconds": "how long after the decision its power was read again",
        "watts_before": "its power at the decision (null: unknown)",
        "source_before": "where that came from: rapl, estimated, platform, none",
        "sample_time_before": "the time of that sample",
        "watts_after": "its power in the first sample at least the window later (null: unknown)",
        "source_after": "where that came from",
        "sample_time_after": "the time of that sample",
        "measured": "true only when both powers came from RAPL",
    },
    "abandoned": {
        "reason": "why the decision did not take effect (its binding failed)",
    },
}
OPAQUE = {"candidates[].features"}  # maps whose keys are data, not schema


def _type(schema: dict[str, Any]) -> str:
    if "const" in schema:
        return code(json.dumps(schema["const"]))
    if "enum" in schema:
        return " \\| ".join(code(json.dumps(value)) for value in schema["enum"])
    kinds = schema.get("type", "object")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    text = " or ".join(JSON_TYPES[kind] for kind in kinds)
    bounds = [f"≥ {schema['minimum']}" if "minimum" in schema else "",
              f"> {schema['exclusiveMinimum']}" if "exclusiveMinimum" in schema else "",
              f"≤ {schema['maximum']}" if "maximum" in schema else ""]
    return ", ".join([text, *(bound for bound in bounds if bound)])


def schema_rows(schema: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    """(key path, type, always or optional, description) of every property, depth first."""
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        if not prop.get("description"):
            raise ValueError(f"{SAMPLE} key {path} has no description in agent/monitor/record_schema.py")
        yield code(path), _type(prop), "always" if name in required else "optional", prop["description"]
        if prop.get("type") == "array" and "items" in prop:
            yield from schema_rows(prop["items"], f"{path}[].")
        elif "properties" in prop:
            yield from schema_rows(prop, f"{path}.")


def _paths(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(key path, JSON type) of every key of a written line, lists' items merged as `key[]`."""
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}{key}"
            yield path, _json_type(item)
            if path not in OPAQUE:
                yield from _paths(item, f"{path}.")
    elif isinstance(value, list):
        for item in value:
            yield from _paths(item, prefix[:-1] + "[].")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "text"
    return "list" if isinstance(value, list) else "object"


def decision_rows() -> dict[str, list[tuple[str, str, str]]]:
    """Per line kind ("" for the keys every line has): (key, the types seen, description)."""
    seen: dict[str, dict[str, set[str]]] = {}
    common = set(DECISION_KEYS[""])
    for line in decision_lines():
        for path, kind in _paths(line):
            seen.setdefault("" if path in common else line["type"], {}).setdefault(path, set()).add(kind)
    problems = []
    for kind, described in DECISION_KEYS.items():
        written = seen.get(kind, {})
        problems += [f"{kind or 'every line'}: {path} has no description" for path in written.keys() - described.keys()]
        problems += [f"{kind or 'every line'}: {path} is described but not written" for path in described.keys() - written.keys()]
    if problems:
        raise ValueError("tools/docs/record.py DECISION_KEYS: " + "; ".join(problems))
    order = ("null", "true/false", "number", "text", "list", "object")
    return {kind: [(code(path), " or ".join(sorted(seen[kind][path], key=lambda t: -order.index(t))), text)
                   for path, text in described.items()] for kind, described in DECISION_KEYS.items()}


def render() -> tuple[str, dict[str, int]]:
    sample_rows = list(schema_rows(SAMPLE_SCHEMA))
    lines = header("The JSON records", "the sample record's JSON Schema and the decision log's builders")
    lines += [
        f"## The sample record (`{SAMPLE}`)",
        "",
        "What `kubejoule-agent once --json` and `replay --json` print: one interval of one node. "
        "Unknown is `null`, never 0, and every `null` has a gap saying why; known shares add up to node "
        "power (pods' `watts` and `gpu_watts` + `host_watts` + `idle_watts` + `gpu_unattributed_watts` "
        "= `node_watts`). The record is strict JSON (no NaN, no Infinity). Its JSON Schema is "
        "`agent/monitor/record_schema.py` (`SAMPLE_SCHEMA`); the concepts are in "
        "[How power is measured and attributed](../concepts/measurement.md).",
        "",
        *table(("key", "type", "present", "what it is"), sample_rows),
        "An example with every section, written by `Snapshot.to_record()`:",
        "",
        "```json",
        json.dumps(sample_record(), indent=2, ensure_ascii=False),
        "```",
        "",
        f"## The decision log (`{DECISION}`)",
        "",
        "The JSON lines `--decision-log FILE` appends (the standalone scheduler, the extender and "
        "`kubejoule-rl benchmark` write the same keys, through the builders of "
        "`scheduler/decisionlog/schema.py`): a `decision` line per placement or recommendation, an "
        "`outcome` line once its window has passed, an `abandoned` line when its binding failed. Types "
        "are those the builders write.",
        "",
    ]
    rows = decision_rows()
    titles = {"": "Every line", "decision": "`decision` lines", "outcome": "`outcome` lines",
              "abandoned": "`abandoned` lines"}
    for kind, title in titles.items():
        lines += [f"### {title}", "", *table(("key", "type", "what it is"), rows[kind])]
    lines += ["Examples written by the builders, with made-up values (a decision, its outcome, an outcome "
              "with unknown power, an abandoned decision, the extender's recommendation), one JSON object "
              "per line:", "", "```"]
    lines += [json.dumps(line, ensure_ascii=False) for line in decision_lines()]
    lines += ["```", ""]
    decision_keys = sum(len(keys) for keys in DECISION_KEYS.values())
    return "\n".join(lines).rstrip() + "\n", {"sample record keys": len(sample_rows), "decision log keys": decision_keys}
