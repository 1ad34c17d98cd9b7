"""Kubernetes resource quantities ("250m", "1.5Gi", "1e3", 3) as floats in base units.

One parser for the whole project: the agent reads Metrics Server usage with it, the scheduler
pod requests and node capacities (imports go scheduler → agent).
"""

from __future__ import annotations

import math
import re

_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}
_DECIMAL = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
# A number with either a decimal exponent or a suffix, never both (as Kubernetes parses them).
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


def parse_quantity(value: str | int | float) -> float:
    """CPU quantities come out in cores, memory and storage in bytes, counts as counts.

    Raises ValueError on garbage, on booleans and on values that are not finite.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    else:
        match = _QUANTITY.match(str(value).strip())
        if match is None:
            raise ValueError(f"not a Kubernetes quantity: {value!r}")
        digits, exponent, suffix = match.groups()
        if exponent:
            number = float(digits + exponent)
        else:
            suffix = suffix or ""
            number = float(digits) * (_BINARY.get(suffix) or _DECIMAL[suffix])
    if not math.isfinite(number):
        raise ValueError(f"not a finite Kubernetes quantity: {value!r}")
    return number
