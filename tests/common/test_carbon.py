"""The carbon intensity model (common/carbon.py): Electricity Maps' and the plain CSV, steps that
hold for at most --carbon-max-age, and bad rows as gaps with their reason, never a value."""

from __future__ import annotations

import argparse

import pytest

from common.carbon import (
    JOULES_PER_KWH,
    CarbonIntensityError,
    ConstantIntensity,
    Reading,
    interval_grams,
    load_intensity_csv,
    parse_intensity_csv,
    parse_time,
)
from common.carbon_options import add_carbon_arguments, carbon_start, intensity_from_args

EM_HEADER = (
    "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
    "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,"
    "Data Estimated,Data Estimation Method"
)
T0 = parse_time("2024-03-01T00:00:00Z")
HOUR = 3600.0


def em_csv(rows: list[tuple[str, str, str]]) -> str:
    lines = [EM_HEADER]
    for when, direct, lca in rows:
        lines.append(f"{when},Germany,Germany,DE,{direct},{lca},50,45,entsoe.eu,false,")
    return "\n".join(lines) + "\n"


def test_electricity_maps_export_direct_and_lca_columns():
    text = em_csv([("2024-03-01 00:00:00", "400", "450"), ("2024-03-01 01:00:00", "300", "360")])
    direct = parse_intensity_csv(text, "de.csv")
    lca = parse_intensity_csv(text, "de.csv", basis="lca")
    assert direct.zone == "DE"
    assert direct.at(T0 + 10).value == 400.0 and direct.at(T0 + HOUR + 10).value == 300.0
    assert lca.at(T0 + 10).value == 450.0 and lca.at(T0 + HOUR).value == 360.0
    # the older export spells the life-cycle column out
    older = text.replace("(LCA)", "(life cycle assessment)")
    assert parse_intensity_csv(older, "de.csv", basis="lca").at(T0).value == 450.0


def test_plain_csv_with_iso_and_unix_times():
    series = parse_intensity_csv(f"timestamp,g_per_kwh\n2024-03-01T00:00:00Z,100\n{T0 + HOUR:.0f},200\n")
    assert series.at(T0).value == 100.0 and series.at(T0 + HOUR).value == 200.0


def test_integral_across_steps_is_the_time_weighted_sum():
    series = parse_intensity_csv("timestamp,g_per_kwh\n2024-03-01T00:00:00,100\n2024-03-01T01:00:00,300\n")
    half_and_half = series.integral(T0 + HOUR / 2, T0 + 1.5 * HOUR)
    assert half_and_half.value == pytest.approx(100 * HOUR / 2 + 300 * HOUR / 2)
    # 1 kWh spent evenly over that hour: 200 g
    assert interval_grams(JOULES_PER_KWH, half_and_half, HOUR) == pytest.approx(200.0)


@pytest.mark.parametrize(
    ("value", "why"),
    [("", "empty value"), ("-12", "negative value -12"), ("n/a", "not a number"), ("nan", "not finite")],
)
def test_a_bad_value_is_a_gap_with_its_line_not_the_last_value(value, why):
    text = em_csv([
        ("2024-03-01 00:00:00", "400", "450"),
        ("2024-03-01 01:00:00", value, "450"),
        ("2024-03-01 02:00:00", "200", "250"),
    ])
    series = parse_intensity_csv(text, "de.csv")
    reading = series.at(T0 + HOUR + 60)
    assert reading.value is None
    assert why in reading.reason and "line 3 of de.csv" in reading.reason
    assert series.integral(T0, T0 + 3 * HOUR).value is None  # any part unknown: the whole unknown
    assert series.integral(T0 + 2 * HOUR, T0 + 3 * HOUR).value == pytest.approx(200 * HOUR)


def test_missing_rows_go_stale_after_max_age():
    text = "timestamp,g_per_kwh\n2024-03-01T00:00:00Z,100\n2024-03-01T05:00:00Z,200\n"
    hourly = parse_intensity_csv(text, "x.csv")
    stale = hourly.at(T0 + 2 * HOUR)
    assert stale.value is None and "stale" in stale.reason and "--carbon-max-age 3600" in stale.reason
    assert hourly.at(T0 + HOUR - 1).value == 100.0
    assert hourly.at(T0 + 5 * HOUR).value == 200.0
    lenient = parse_intensity_csv(text, "x.csv", max_age_s=6 * HOUR)
    assert lenient.at(T0 + 2 * HOUR).value == 100.0


def test_before_the_first_and_after_the_last_row_are_gaps():
    series = parse_intensity_csv("timestamp,g_per_kwh\n2024-03-01T00:00:00Z,100\n", "x.csv")
    before, after = series.at(T0 - 1), series.at(T0 + HOUR)
    assert before.value is None and "starts at 2024-03-01T00:00:00Z" in before.reason
    assert after.value is None and "ends there" in after.reason


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("when,value\n1,2\n", "no header found"),
        ("Datetime (UTC),Zone Id,Carbon Intensity gCO₂eq/kWh (LCA)\n2024-03-01,DE,1\n", "(direct)"),
        ("timestamp,g_per_kwh\n", "no rows"),
        ("timestamp,g_per_kwh\nyesterday,100\n", "line 2: not a time"),
        ("timestamp,g_per_kwh\n2024-03-01T00:00:00Z,1\n2024-03-01T00:00:00+00:00,2\n", "given twice"),
        ("timestamp,g_per_kwh\n2024-03-01T00:00:00Z\n", "line 2 has 1 columns"),
    ],
)
def test_a_file_that_cannot_be_placed_in_time_is_refused(text, message):
    with pytest.raises(CarbonIntensityError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_intensity_csv(text)


def test_two_zones_in_one_file_are_refused():
    text = em_csv([("2024-03-01 00:00:00", "400", "450")]) + (
        "2024-03-01 01:00:00,France,France,FR,50,60,90,30,x,false,\n"
    )
    with pytest.raises(CarbonIntensityError, match="several zones"):
        parse_intensity_csv(text)


def test_unreadable_file(tmp_path):
    with pytest.raises(CarbonIntensityError, match="cannot read"):
        load_intensity_csv(tmp_path / "missing.csv")


def test_constant_intensity():
    constant = ConstantIntensity(250.0)
    assert constant.integral(0, 10).value == 2500.0
    assert interval_grams(3.6e6, constant.integral(0, 10), 10) == pytest.approx(250.0)
    assert interval_grams(None, constant.integral(0, 10), 10) is None
    assert interval_grams(1.0, Reading(None, "x"), 10) is None
    with pytest.raises(CarbonIntensityError):
        ConstantIntensity(-1.0)


def _options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_carbon_arguments(parser, start=True)
    return parser.parse_args(argv)


def test_options_give_one_intensity(tmp_path):
    csv_path = tmp_path / "ci.csv"
    csv_path.write_text("timestamp,g_per_kwh\n2024-03-01T00:00:00Z,100\n")
    assert intensity_from_args(_options([])) is None
    assert intensity_from_args(_options(["--carbon-intensity", "300"])) == ConstantIntensity(300.0)
    args = _options(["--carbon-intensity-csv", str(csv_path), "--carbon-max-age", "60"])
    series = intensity_from_args(args)
    assert series is not None and series.at(T0 + 61).value is None
    assert carbon_start(args, series) == T0  # default: the series' first row
    assert carbon_start(_options(["--carbon-start", "2024-03-01T02:00:00Z"]), series) == T0 + 2 * HOUR
    with pytest.raises(CarbonIntensityError, match="not both"):
        intensity_from_args(_options(["--carbon-intensity", "1", "--carbon-intensity-csv", str(csv_path)]))
    with pytest.raises(CarbonIntensityError, match="--carbon-start"):
        carbon_start(_options(["--carbon-start", "soon"]), series)
    with pytest.raises(SystemExit):
        _options(["--carbon-intensity", "-5"])
