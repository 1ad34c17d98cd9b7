"""common/quantity.py against Kubernetes' own quantity tests, translated table by table.

Source of every table: kubernetes/kubernetes,
staging/src/k8s.io/apimachinery/pkg/api/resource/quantity_test.go (read at commit 002cd1a0cd96).
Each case keeps the Go input and its expected value; `decQuantity(i, e)` there is i × 10^e here.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from common.quantity import parse_decimal, parse_quantity, quantity_units
from scheduler.cluster.kubeobjects import resources_from_k8s
from scheduler.domain.model import Resources, ShapeError

GO = "quantity_test.go"

# TestQuantityParse, the `table` of valid inputs: (input, exact value). The Go test also parses
# every input with a leading "-" (expecting the negated value) and a leading "+" (the same value).
PARSE = [
    ("0", "0"), ("0n", "0"), ("0u", "0"), ("0m", "0"), ("0Ki", "0"), ("0k", "0"), ("0Mi", "0"), ("0M", "0"),
    ("0Gi", "0"), ("0G", "0"), ("0Ti", "0"), ("0T", "0"),
    # Quantity less numbers are allowed
    ("1", "1"),
    # Binary suffixes
    ("1Ki", "1024"), ("8Ki", str(8 * 1024)), ("7Mi", str(7 * 1024**2)), ("6Gi", str(6 * 1024**3)),
    ("5Ti", str(5 * 1024**4)), ("4Pi", str(4 * 1024**5)), ("3Ei", str(3 * 1024**6)),
    ("10Ti", str(10 * 1024**4)), ("100Ti", str(100 * 1024**4)),
    # Decimal suffixes
    ("5n", "5e-9"), ("4u", "4e-6"), ("3m", "3e-3"), ("9", "9"), ("8k", "8e3"), ("50k", "5e4"), ("7M", "7e6"),
    ("6G", "6e9"), ("5T", "5e12"), ("40T", "4e13"), ("300T", "3e14"), ("2P", "2e15"), ("1E", "1e18"),
    # Decimal exponents
    ("1E-3", "1e-3"), ("1e3", "1e3"), ("1E6", "1e6"), ("1e9", "1e9"), ("1E12", "1e12"), ("1e15", "1e15"),
    ("1E18", "1e18"),
    # Nonstandard but still parsable
    ("1e14", "1e14"), ("1e13", "1e13"), ("100.035k", "100035"),
    # Things that look like floating point
    ("0.001", "1e-3"), ("0.0005k", "5e-1"), ("0.005", "5e-3"), ("0.05", "5e-2"), ("0.5", "5e-1"),
    ("0.00050k", "5e-1"), ("0.00500", "5e-3"), ("0.05000", "5e-2"), ("0.50000", "5e-1"), ("0.5e0", "5e-1"),
    ("0.5e-1", "5e-2"), ("0.5e-2", "5e-3"), ("10.035M", "10035e3"),
    ("1.2e3", "12e2"), ("1.3E+6", "13e5"), ("1.40e9", "14e8"), ("1.53E12", "153e10"), ("1.6e15", "16e14"),
    ("1.7E18", "17e17"),
    ("9.01", "901e-2"), ("8.1k", "81e2"), ("7.123456M", "7123456"), ("6.987654321G", "6987654321"),
    ("5.444T", "5444e9"), ("40.1T", "401e11"), ("300.2T", "3002e11"), ("2.5P", "25e14"), ("1.01E", "101e16"),
    # Things that saturate/round
    ("3.001n", "4e-9"), ("1.1E-9", "2e-9"), ("0.0000000001", "1e-9"), ("0.0000000005", "1e-9"),
    ("0.00000000050", "1e-9"), ("0.5e-9", "1e-9"), ("0.9n", "1e-9"), ("0.00000012345", "124e-9"),
    ("0.00000012354", "124e-9"), ("9Ei", str(2**63 - 1)), ("9223372036854775807Ki", str(2**63 - 1)),
    ("12E", "12e18"),
    # We'll accept fractional binary stuff, too.
    ("100.035Ki", "10243584e-2"), ("0.5Mi", str(512 * 1024)), ("0.05Gi", "536870912e-1"),
    ("0.025Ti", "274877906944e-1"),
    # Things written by trolls
    ("0.000000000001Ki", "2e-9"), (".001", "1e-3"), (".0001k", "100e-3"), ("1.", "1"), ("1.G", "1e9"),
]

# TestQuantityParse: `ParseQuantity("")` and the `invalid` list must fail.
INVALID = ["", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", "1e4294967297",
           " 1", "1 "]

# TestNegativeValueRoundsAwayFromZero: (input, Value(), MilliValue()).
VALUE_AND_MILLI = [
    ("-.484785E-7466", -1, -1), (".484785E-7466", 1, 1),
    ("-.484785E-1", -1, -49), (".484785E-1", 1, 49), ("-0.0005", -1, -1), ("0.0005", 1, 1),
    ("-1500m", -2, -1500), ("1500m", 2, 1500),
    ("-9.5000000001Gi", -10200547329, -10200547328108), ("9.5000000001Gi", 10200547329, 10200547328108),
    ("-1", -1, -1000), ("1", 1, 1000), ("0", 0, 0),
]

# TestQuantityRoundUp, the scales at or below the unit (the ones a whole-unit read uses):
# (input, scale, expected value after RoundUp(scale)). Scales 1 and 2 (rounding up to tens and
# hundreds) are left out: nothing here reads a quantity in tens.
ROUND_UP = [
    ("9.01", -3, "901e-2"), ("9.01", -2, "901e-2"), ("9.01", -1, "91e-1"), ("9.01", 0, "10"),
    ("-9.01", -3, "-901e-2"), ("-9.01", -2, "-901e-2"), ("-9.01", -1, "-91e-1"), ("-9.01", 0, "-10"),
]

# TestScaledValue: NewScaledQuantity(1, from).ScaledValue(to) == expected; the quantity is written
# here as the string it prints as ("1n", "1u", "1m", "1", and 1e2 for scale 2).
SCALED = [
    ("1n", -9, 1), ("1n", -6, 1), ("1n", -3, 1), ("1n", 0, 1),
    ("1u", -9, 1000), ("1u", -6, 1), ("1u", -3, 1), ("1u", 0, 1),
    ("1m", -9, 1000 * 1000), ("1m", -6, 1000), ("1m", -3, 1), ("1m", 0, 1),
    ("1", -9, 1000 * 1000 * 1000), ("1", -6, 1000 * 1000), ("1", -3, 1000), ("1", 0, 1),
    ("1e2", -2, 100 * 100),
]


@pytest.mark.parametrize("sign", ["", "-", "+"])
@pytest.mark.parametrize(("text", "expected"), PARSE, ids=[c[0] for c in PARSE])
def test_parse_as_kubernetes_TestQuantityParse(text: str, expected: str, sign: str) -> None:
    """quantity_test.go TestQuantityParse: the table, its negated and its "+" forms."""
    value = Decimal(expected)
    assert parse_decimal(sign + text) == (-value if sign == "-" else value)
    assert parse_quantity(sign + text) == float(-value if sign == "-" else value)


@pytest.mark.parametrize("text", INVALID)
def test_what_kubernetes_refuses_is_refused_TestQuantityParse_invalid(text: str) -> None:
    """quantity_test.go TestQuantityParse: the empty string and the `invalid` list."""
    with pytest.raises(ValueError):
        parse_quantity(text)


@pytest.mark.parametrize(("text", "value", "milli"), VALUE_AND_MILLI, ids=[c[0] for c in VALUE_AND_MILLI])
def test_whole_units_round_away_from_zero_TestNegativeValueRoundsAwayFromZero(text: str, value: int, milli: int) -> None:
    """quantity_test.go TestNegativeValueRoundsAwayFromZero: Value() and MilliValue()."""
    assert quantity_units(text) == value
    assert quantity_units(text, 1000) == milli


@pytest.mark.parametrize(("text", "scale", "expected"), ROUND_UP, ids=[f"{c[0]}@{c[1]}" for c in ROUND_UP])
def test_rounding_up_to_a_scale_TestQuantityRoundUp(text: str, scale: int, expected: str) -> None:
    """quantity_test.go TestQuantityRoundUp: RoundUp(scale) is a whole number of 10^scale units."""
    units = quantity_units(text, 10**-scale)
    assert Decimal(units).scaleb(scale) == Decimal(expected)


@pytest.mark.parametrize(("text", "to_scale", "expected"), SCALED, ids=[f"{c[0]}->{c[1]}" for c in SCALED])
def test_scaled_values_TestScaledValue(text: str, to_scale: int, expected: int) -> None:
    """quantity_test.go TestScaledValue: ScaledValue(to) of a one-unit quantity."""
    assert quantity_units(text, 10**-to_scale) == expected


@pytest.mark.parametrize(("number", "expected"), [(1, "1"), (10, "10"), (-1, "-1"), (0.5, "0.5"), (1e-05, "0.00001")])
def test_json_numbers_read_as_their_text(number: int | float, expected: str) -> None:
    """quantity_test.go TestJSONWhitespace: a JSON number (1, 10, -1) is the quantity its text
    spells; a float's text is its shortest repr. Booleans are not quantities."""
    assert parse_decimal(number) == Decimal(expected)
    with pytest.raises(ValueError):
        parse_quantity(True)


def test_the_scheduler_reads_requests_as_kubernetes_does() -> None:
    """scheduler/domain/model.py reads requests and capacities through the same rounding: 0.0005 CPU is
    1m (TestNegativeValueRoundsAwayFromZero "0.0005"), 2.5m is 3m, half a byte is a byte."""
    assert resources_from_k8s({"cpu": "0.0005", "memory": "0.5"}) == Resources(cpu_millicores=1, memory_bytes=1)
    assert resources_from_k8s({"cpu": "2.5m", "memory": "1.5Gi"}).cpu_millicores == 3
    assert resources_from_k8s({"cpu": "1500m", "memory": "9.5000000001Gi"}).memory_bytes == 10200547329
    with pytest.raises(ShapeError, match="resources.cpu"):
        resources_from_k8s({"cpu": " 1"})
