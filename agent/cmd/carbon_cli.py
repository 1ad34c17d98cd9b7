"""`kubejoule-agent run`'s carbon options (common/carbon_options.py): the intensity is loaded at
parse time, so a bad CSV is a usage error with its reason (and re-read when it changes,
common/carbon_file.py), and turned into the collector's CarbonLedger
(agent/monitor/carbon_ledger.py)."""

from __future__ import annotations

import argparse

from agent.monitor.carbon_ledger import CarbonLedger
from common.carbon import CarbonIntensity, CarbonIntensityError
from common.carbon_file import IntensityFile
from common.carbon_options import live_intensity_from_args


def validate_carbon(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    try:
        args.carbon = live_intensity_from_args(args)
    except CarbonIntensityError as exc:
        parser.error(str(exc))


def carbon_ledger(args: argparse.Namespace) -> CarbonLedger | None:
    intensity: CarbonIntensity | IntensityFile | None = args.carbon
    return CarbonLedger(intensity) if intensity is not None else None


def describe(args: argparse.Namespace) -> str | None:
    """The intensity for the start-up log line."""
    intensity: CarbonIntensity | IntensityFile | None = args.carbon
    if intensity is None:
        return None
    if args.carbon_intensity is not None:
        return f"{args.carbon_intensity:g} g/kWh (configured)"
    return f"{args.carbon_intensity_csv} ({args.carbon_intensity_basis}{', zone ' + intensity.zone if intensity.zone else ''})"
