"""Kubernetes resource quantities ("250m", "1.5Gi", "1e3", 3), read the way Kubernetes reads them.

One parser for the whole project: the agent reads Metrics Server usage with it, the scheduler
pod requests and node capacities (it lives in common/, below both).

The rules are apimachinery's `resource.ParseQuantity` and `Quantity.ScaledValue`
(staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go):

- a number (`1`, `1.5`, `.5`, `1.`, signed) and one suffix: a binary one (`Ki` … `Ei`), a decimal
  one (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`) or a decimal exponent (`e3`, `E-2`); nothing
  around it, not even white space;
- the value is exact (decimal), and a non-zero value is rounded up — away from zero — to a whole
  number of nano units: "if you want some resources, you should get some";
- a binary-suffixed value is capped at 2^63 − 1;
- reading it in a unit (`MilliValue()` for CPU, `Value()` for bytes) rounds up again, away from
  zero, to a whole number of that unit: 0.0005 CPU is 1m, 2.5m is 3m, 0.5 bytes is 1 byte.
"""

from __future__ import annotations

import decimal
import math
import re
from decimal import ROUND_UP, Decimal

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}  # powers of two
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}  # of ten
# A number with either a decimal exponent or a suffix, never both; ASCII digits only.
_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(?:[eE]([+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)
_INT32_MAX = 2**31 - 1
_BINARY_MAX = Decimal(2**63 - 1)
_NANO = Decimal("1e-9")
# Room for any int64 at nano precision and more: the exact arithmetic never rounds on its own.
_EXACT = decimal.Context(prec=120, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[decimal.InvalidOperation])


def parse_decimal(value: str | int | float) -> Decimal:
    """The exact value of a quantity in base units (cores, bytes, counts), as Kubernetes keeps it.

    Raises ValueError on anything Kubernetes would refuse, on booleans and on non-finite numbers.
    A JSON number (int or float) reads as its decimal text, as Quantity's UnmarshalJSON reads it.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"not a finite Kubernetes quantity: {value!r}")
        text = repr(value)
    else:
        text = str(value)
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    digits, exponent, suffix = match.groups()
    try:
        number = _exact(Decimal(digits.rstrip(".")), exponent, suffix)
    except decimal.DecimalException:
        raise ValueError(f"Kubernetes quantity {value!r} is out of range") from None
    return number


def _exact(number: Decimal, exponent: str | None, suffix: str | None) -> Decimal:
    binary = False
    if exponent is not None:
        power = int(exponent)
        if abs(power) > _INT32_MAX:  # Kubernetes keeps the exponent in an int32 scale
            raise decimal.InvalidOperation("exponent out of range")
        number = number.scaleb(power, _EXACT)
    elif suffix in _BINARY:
        binary = True
        number = _EXACT.multiply(number, Decimal(2 ** _BINARY[suffix]))
    else:
        number = number.scaleb(_DECIMAL[suffix or ""], _EXACT)
    places = number.as_tuple().exponent
    if number and isinstance(places, int) and places < -9:
        number = number.quantize(_NANO, rounding=ROUND_UP, context=_EXACT)  # away from zero
    if binary and abs(number) > _BINARY_MAX:
        number = _BINARY_MAX.copy_sign(number)
    return number


def parse_quantity(value: str | int | float) -> float:
    """CPU quantities come out in cores, memory and storage in bytes, counts as counts.

    Raises ValueError on garbage, on booleans and on values that are not finite.
    """
    number = float(parse_decimal(value))
    if not math.isfinite(number):
        raise ValueError(f"not a finite Kubernetes quantity: {value!r}")
    return number


def quantity_units(value: str | int | float, units_per_base: int = 1) -> int:
    """The quantity in whole units, rounded up away from zero as Kubernetes' `ScaledValue` does:
    `quantity_units(q, 1000)` is `MilliValue()` (millicores), `quantity_units(q)` is `Value()`."""
    scaled = _EXACT.multiply(parse_decimal(value), Decimal(units_per_base))
    if scaled and scaled.adjusted() > 100:
        raise ValueError(f"Kubernetes quantity {value!r} is out of range")
    return int(scaled.to_integral_value(rounding=ROUND_UP, context=_EXACT))
