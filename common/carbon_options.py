"""The carbon intensity's command-line options, the same for `kubejoule-agent` and
`kubejoule-rl benchmark` (common/carbon.py says what each means), and the intensity they give."""

from __future__ import annotations

import argparse
from pathlib import Path

from common.carbon import (
    BASES,
    DEFAULT_MAX_AGE_S,
    CarbonIntensity,
    CarbonIntensityError,
    ConstantIntensity,
    load_intensity_csv,
    parse_time,
)
from common.carbon_file import IntensityFile
from common.options import non_negative_float, positive_float


def add_carbon_arguments(parser: argparse.ArgumentParser, constant: bool = True, start: bool = False) -> None:
    """--carbon-intensity (with `constant`), --carbon-intensity-csv, --carbon-intensity-basis,
    --carbon-max-age and (with `start`, the benchmark's) --carbon-start."""
    group = parser.add_argument_group("carbon")
    # The options a command leaves out read as not given, so every command's arguments have them all.
    if not constant:
        parser.set_defaults(carbon_intensity=None)
    if not start:
        parser.set_defaults(carbon_start=None)
    if constant:
        group.add_argument(
            "--carbon-intensity", type=non_negative_float, default=None, metavar="G_PER_KWH",
            help="grid carbon intensity, gCO2eq/kWh, at every time (source=\"configured\")",
        )
    group.add_argument(
        "--carbon-intensity-csv", type=Path, default=None, metavar="PATH",
        help="grid carbon intensity over time: an Electricity Maps CSV export ('Datetime (UTC)', "
        "'Carbon Intensity gCO₂eq/kWh (direct)') or 'timestamp,g_per_kwh' (source=\"csv\")",
    )
    group.add_argument(
        "--carbon-intensity-basis", choices=BASES, default="direct",
        help="which Electricity Maps column: direct (GHG Protocol scope 2; default) or lca (life cycle)",
    )
    group.add_argument(
        "--carbon-max-age", type=positive_float, default=DEFAULT_MAX_AGE_S, metavar="SECONDS",
        help=f"a CSV value holds this long at most (default {DEFAULT_MAX_AGE_S:g}); past it the "
        "intensity is a gap",
    )
    if start:
        group.add_argument(
            "--carbon-start", default=None, metavar="ISO-TIME",
            help="the time the trace's t=0 is mapped to on the intensity series (default: its first row)",
        )


def intensity_from_args(args: argparse.Namespace) -> CarbonIntensity | None:
    """From the arguments of a parser `add_carbon_arguments` built: the intensity the options give (None: none asked for). CarbonIntensityError for a bad
    file or both a constant and a file."""
    value: float | None = args.carbon_intensity
    path: Path | None = args.carbon_intensity_csv
    if value is not None and path is not None:
        raise CarbonIntensityError("give --carbon-intensity or --carbon-intensity-csv, not both")
    if value is not None:
        return ConstantIntensity(value)
    if path is not None:
        return load_intensity_csv(path, args.carbon_intensity_basis, args.carbon_max_age)
    return None


def live_intensity_from_args(args: argparse.Namespace) -> CarbonIntensity | IntensityFile | None:
    """As `intensity_from_args`, for a long-running agent: a CSV is re-read when it changes
    (common/carbon_file.py)."""
    if args.carbon_intensity_csv is not None and args.carbon_intensity is None:
        return IntensityFile(args.carbon_intensity_csv, args.carbon_intensity_basis, args.carbon_max_age)
    return intensity_from_args(args)


def carbon_start(args: argparse.Namespace, intensity: CarbonIntensity) -> float:
    """Where --carbon-start puts the trace's t=0 (Unix seconds): the series' first row by default."""
    text: str | None = args.carbon_start
    if text is None:
        first = intensity.start()
        return 0.0 if first is None else first
    try:
        return parse_time(text)
    except ValueError:
        raise CarbonIntensityError(f"--carbon-start: not an ISO 8601 time: {text!r}") from None
