"""JSON for large request bodies, parsed without holding the interpreter for long: the syntax
check of a large body msgspec refused (`wire.py`), so that its 400 says what orjson would say,
as it always has.

orjson parses a 16 MiB `Nodes.items` body in one C call that holds the GIL for 60–150 ms: every
other request waits that long. Here the outer levels (`WALKED_DEPTH` of them: the body, `Nodes`,
`items`) are walked in Python, and each value below them — one Node object — is parsed by the
standard library's C scanner on its own, so other threads get the interpreter between two
Nodes (a container of small elements is handed to the C scanner whole, see below). What orjson refuses is refused here too (a ValueError): NaN and Infinity, numbers past a
double, lone surrogate escapes, bad UTF-8, nesting past the recursion limit, trailing data; what
comes out is what orjson gives, except that an integer past 64 bits stays an exact integer
(orjson makes it a double) — every quantity past int64 is refused afterwards either way.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import NoReturn

WALKED_DEPTH = 3
# A walked container whose elements turn out small (a NodeNames list, an object of many keys) is
# parsed again, whole, by the C scanner once more than SMALL_ELEMENTS_BEFORE_RESCAN of its
# elements were shorter than SMALL_ELEMENT_CHARS: walking millions of tiny elements in Python
# would cost ~14 times orjson's CPU; parsing them in one call costs at most twice the walk so far.
SMALL_ELEMENT_CHARS = 256
SMALL_ELEMENTS_BEFORE_RESCAN = 16
_WHITESPACE = re.compile(r"[ \t\n\r]*")
# A \uD800–\uDFFF escape: must be half of a valid pair (unless its backslash is escaped).
_SURROGATE = re.compile(r"\\u([dD][89a-fA-F][0-9a-fA-F]{2})")


def _refuse(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range for a double")
    return value


# The standard library's C scanners (not in its type stubs): one JSON value from an index.
_scan: Callable[[str, int], tuple[object, int]] = json.JSONDecoder(  # type: ignore[attr-defined]
    parse_constant=_refuse, parse_float=_finite
).scan_once
scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def loads(data: bytes | bytearray) -> object:
    """The JSON value of `data`; ValueError (with the position) for anything that is not JSON."""
    text = bytes(data).decode("utf-8")
    _check_surrogates(text)
    try:
        value, end = _value(text, _skip(text, 0), WALKED_DEPTH)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except StopIteration as exc:  # the scanner found no value where one must be
        raise ValueError(f"expected a value at char {exc.value}") from None
    end = _skip(text, end)
    if end != len(text):
        raise ValueError(f"extra data at char {end}")
    return value


def _check_surrogates(text: str) -> None:
    """A high-half escape must be followed at once by a low-half one, and a low half must
    follow a high half (what orjson refuses, and what could not be encoded back)."""
    high_ends = -1  # where the last unpaired high half ended
    for match in _SURROGATE.finditer(text):
        escape = match.start()
        backslashes = 0
        while escape - backslashes > 0 and text[escape - backslashes - 1] == "\\":
            backslashes += 1
        if backslashes % 2:  # "\\ud800": an escaped backslash, then text
            continue
        if int(match.group(1), 16) < 0xDC00:
            if high_ends >= 0:
                break
            high_ends = match.end()
        elif high_ends == escape:
            high_ends = -1
        else:
            raise ValueError(f"lone surrogate escape at char {escape}")
    else:
        if high_ends < 0:
            return
    raise ValueError(f"lone surrogate escape before char {high_ends}")


def _skip(text: str, index: int) -> int:
    match = _WHITESPACE.match(text, index)
    return match.end() if match else index


def _value(text: str, index: int, depth: int) -> tuple[object, int]:
    if depth > 0:
        if text.startswith("{", index):
            return _object(text, index + 1, depth - 1)
        if text.startswith("[", index):
            return _array(text, index + 1, depth - 1)
    return _scan(text, index)


def _object(text: str, index: int, depth: int) -> tuple[object, int]:
    result: dict[str, object] = {}

    def member(index: int) -> int:
        if not text.startswith('"', index):
            raise ValueError(f"expected a key at char {index}")
        key, index = scanstring(text, index + 1, True)
        index = _skip(text, index)
        if not text.startswith(":", index):
            raise ValueError(f"expected ':' at char {index}")
        result[key], index = _value(text, _skip(text, index + 1), depth)
        return index

    return _container(text, index, "}", result, member)


def _array(text: str, index: int, depth: int) -> tuple[object, int]:
    result: list[object] = []

    def element(index: int) -> int:
        value, index = _value(text, index, depth)
        result.append(value)
        return index

    return _container(text, index, "]", result, element)


def _container(
    text: str, index: int, close: str, result: object, element: Callable[[int], int]
) -> tuple[object, int]:
    """An object's or an array's elements from `index` (past its opening bracket) to `close`,
    each read by `element` (into `result`, from its index to the index past it); or the whole
    container again by the C scanner once its elements turn out small."""
    start = index - 1
    small = 0
    index = _skip(text, index)
    if text.startswith(close, index):
        return result, index + 1
    while True:
        begin = index
        index = element(index)
        small += int(index - begin < SMALL_ELEMENT_CHARS)  # a small element
        if small > SMALL_ELEMENTS_BEFORE_RESCAN:
            return _scan(text, start)
        index = _skip(text, index)
        if text.startswith(",", index):
            index = _skip(text, index + 1)
        elif text.startswith(close, index):
            return result, index + 1
        else:
            raise ValueError(f"expected ',' or '{close}' at char {index}")
