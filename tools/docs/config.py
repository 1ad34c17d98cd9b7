"""docs/reference/config.md from the scheduler configuration's dataclasses (scheduler/config/):
every key, its type and default from the dataclass fields, what it does from the comment on the
field (the one at its end, or the comment lines right above it), and which values the parser
accepts, found by asking `config_from_dict` itself (an unknown key names the allowed ones; a
probe value is accepted or refused). Then the Helm chart's values, from values.yaml's comments."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import json
import re
import textwrap
import tokenize
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.config.parse import Config, config_from_dict
from tools.docs.markdown import code, header, table
from tools.docs.values import values_section

PROBE_KEY = "__probe__"
# Values a required field gets while a sibling is probed (PrometheusConfig.url has no default).
REQUIRED_FILLER = {str: "http://probe.invalid:9090"}


@dataclass(frozen=True)
class Key:
    path: tuple[str, ...]
    annotation: Any
    default: Any  # dataclasses.MISSING: required
    doc: str
    section: bool  # a nested dataclass: its keys follow


def field_docs(cls: type) -> dict[str, str]:
    """Each field's comment: the comment lines right above it, then the one at its end."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    class_node = ast.parse(source).body[0]
    assert isinstance(class_node, ast.ClassDef)
    docs = {}
    for node in class_node.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        line = node.lineno - 1
        while line >= 1 and lines[line - 1].strip().startswith("#"):
            above.insert(0, comments[line])
            line -= 1
        trailing = [comments[n] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1) if n in comments
                    and not lines[n - 1].strip().startswith("#")]
        docs[node.target.id] = " ".join([*above, *trailing]).strip()
    return docs


def _dataclass_of(annotation: Any) -> type | None:
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        inner = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(inner) == 1:
            return _dataclass_of(inner[0])
    return None


def config_keys(cls: type = Config, prefix: tuple[str, ...] = ()) -> Iterator[Key]:
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    for item in dataclasses.fields(cls):
        annotation = hints[item.name]
        if item.default is not dataclasses.MISSING:
            default: Any = item.default
        elif item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        else:
            default = dataclasses.MISSING
        nested = _dataclass_of(annotation)
        yield Key((*prefix, item.name), annotation, default, docs.get(item.name, ""), nested is not None)
        if nested is not None:
            yield from config_keys(nested, (*prefix, item.name))


def _nest(path: tuple[str, ...], value: Any, fill: Mapping[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {path[-1]: value, **(fill or {})}
    for part in reversed(path[:-1]):
        data = {part: data}
    return data


def _fill(path: tuple[str, ...]) -> dict[str, Any]:
    """Values for the required siblings of the key at `path`."""
    cls: type = Config
    for part in path[:-1]:
        nested = _dataclass_of(typing.get_type_hints(cls)[part])
        assert nested is not None
        cls = nested
    hints = typing.get_type_hints(cls)
    return {f.name: REQUIRED_FILLER[hints[f.name]] for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name != path[-1]}


def refusal(path: tuple[str, ...], value: Any, parse: Callable[[Any], Any] = config_from_dict) -> str | None:
    """The parser's message refusing `value` at `path`, or None when it accepts it."""
    try:
        parse(_nest(path, value, _fill(path)))
    except ValueError as exc:
        return str(exc)
    return None


def allowed_keys(section: tuple[str, ...]) -> set[str]:
    """The keys the parser accepts in a section (() for the top level), from its refusal of an unknown one."""
    message = refusal((*section, PROBE_KEY), 1) if section else _top_refusal()
    found = re.search(r"allowed: (\[.*\])", message or "")
    if found is None:
        raise ValueError(f"{'.'.join(section) or 'the top level'}: an unknown key was not refused: {message!r}")
    return set(ast.literal_eval(found.group(1)))


def _top_refusal() -> str | None:
    try:
        config_from_dict({PROBE_KEY: 1})
    except ValueError as exc:
        return str(exc)
    return None


def _base(annotation: Any) -> tuple[Any, bool]:
    """(the type without None, whether None is allowed)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = typing.get_args(annotation)
        inner = [arg for arg in args if arg is not type(None)]
        return (inner[0] if len(inner) == 1 else annotation), type(None) in args
    return annotation, False


def type_name(annotation: Any) -> str:
    base, optional = _base(annotation)
    origin = typing.get_origin(base)
    if base is Any or base is object:  # a value the parser narrows
        text = "any value"
    elif base is bool:
        text = "true/false"
    elif base in (int, float):
        text = "integer" if base is int else "number"
    elif base is str:
        text = "text"
    elif origin in (dict, Mapping) or base is dict:
        value = typing.get_args(base)[1] if typing.get_args(base) else Any
        text = "map" if value is Any or value is object else f"map of name → {type_name(value)}"
    elif origin in (tuple, list):
        text = f"list of {type_name(typing.get_args(base)[0])}"
    else:
        text = getattr(base, "__name__", str(base)).replace("PowerCurve", "power curve")
    return f"{text} or null" if optional else text


def accepts(key: Key) -> str:
    """What the parser accepts for a scalar key, found by probing it."""
    base, _ = _base(key.annotation)
    if base in (int, float):
        rules = []
        if refusal(key.path, -1) is None:
            rules.append("any number")
        elif refusal(key.path, 0) is None:
            rules.append("≥ 0")
        else:
            rules.append("> 0" if base is float else "≥ 1")
        if base is float and refusal(key.path, 1) is None and refusal(key.path, 1.5) is not None:
            rules.append("≤ 1")
        elif refusal(key.path, 100) is None and refusal(key.path, 101) is not None:
            rules.append("≤ 100")
        return ", ".join(rules)
    if base is str:
        message = refusal(key.path, PROBE_KEY)
        if message is None:
            return "any text" if refusal(key.path, "") is None else "non-empty text"
        choices = re.search(r"one of (\[.*?\])", message)
        if choices:
            return " or ".join(code(choice) for choice in ast.literal_eval(choices.group(1)))
        return message.split(": ", 1)[-1].split(", got")[0].removeprefix("expected ")
    return ""


def default_text(key: Key) -> str:
    if key.default is dataclasses.MISSING:
        return "required"
    value = key.default
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, dict) and not value:
        return code("{}")
    return code(json.dumps(value, ensure_ascii=False))


def render() -> tuple[str, dict[str, int]]:
    found = list(config_keys())
    missing = [".".join(k.path) for k in found if not k.doc]
    if missing:
        raise ValueError(f"configuration keys without a comment on their dataclass field: {missing}")
    sections: dict[tuple[str, ...], list[Key]] = {(): []}
    for key in found:
        sections.setdefault(key.path[:-1], []).append(key)
        if key.section:
            sections.setdefault(key.path, [])
    for section, members in sections.items():
        expected = {k.path[-1] for k in members}
        if allowed_keys(section) != expected:
            raise ValueError(f"{'.'.join(section) or 'top level'}: the parser allows {sorted(allowed_keys(section))}, "
                             f"the dataclass has {sorted(expected)}")
    lines = header("Configuration keys", "the configuration's dataclasses (scheduler/config/) and the chart's "
                   "values.yaml")
    lines += [
        "## The scheduler configuration",
        "",
        "The YAML file every `kubejoule-scheduler` command reads with `--config FILE` (the extender, the "
        "standalone scheduler, the expander and the rebalancer: [Commands and flags](commands.md)). Every "
        "key is optional; an unknown key, or a value the parser refuses, stops the command with a "
        "configuration error naming the key. `accepts` is what the parser takes, found by asking it. The "
        "cloud provider's own file (`--provider-config`) is described in [Bare metal](../bare-metal.md).",
        "",
    ]
    for section, members in sections.items():
        title = ".".join(section) if section else "Top level"
        lines += [f"### {title}", ""]
        rows = []
        for key in members:
            what = key.doc + (" (a section: its keys below)" if key.section else "")
            rows.append((code(".".join(key.path)), "section" if key.section else type_name(key.annotation),
                         "" if key.section else default_text(key), "" if key.section else accepts(key), what))
        lines += table(("key", "type", "default", "accepts", "what it does"), rows)
    values_lines, value_count = values_section()
    lines += values_lines
    scalar = sum(1 for k in found if not k.section)
    return "\n".join(lines).rstrip() + "\n", {"keys": scalar, "sections": len(sections), "chart values": value_count}
