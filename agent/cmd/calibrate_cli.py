"""`kubejoule-calibrate`: check RAPL, measure idle power, sweep load, fit the node's power curve.

  check   is RAPL usable here, as which user; exits 1 with the reason and the fix when it is not
  run     idle baseline, load sweep, fits, profile YAML (`--out`); with `--bmc-url` the curve is
          fitted against the BMC's platform reading, RAPL's beside it
  wall    fit a RAPL-to-wall correction from a power meter's CSV into an existing profile
  show    print a profile's curve

Exit codes: 0 done, 1 cannot measure (the reason is printed), 2 command-line misuse.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent.calibration.check import run_check
from agent.calibration.console import Progress, format_check, format_summary
from agent.calibration.fit import MODELS, FitError, FitResult, select_model
from agent.calibration.load import LoadError, LoadGenerator, available_cpus
from agent.calibration.measure import Judgement, MeasureError, Meter, Phase, measure_idle, sweep
from agent.calibration.output import build_profile, phase_record, phase_spans, write_profile
from agent.calibration.platform_fit import PlatformFit, fit_platform, with_platform
from agent.calibration.wall import WallMeterError, WallReading, fit_wall_correction, read_wall_csv
from agent.cmd.cloud_cli import (
    calibrate_instance_type_option,
    format_beside,
    validate_calibrate_instance_type,
)
from agent.cmd.devices_cli import bmc_options, open_platform, validate_bmc
from agent.device.hostfs import HostFS
from agent.device.redfish import Reading
from agent.monitor.sampler import default_node_name
from common.options import fraction, int_at_least, non_negative_float, positive_float
from common.power_profile import PowerProfile, PowerProfileError, WallCorrection, load_power_profile

MAX_LOWEST_UTILIZATION = 0.35  # a curve must reach down at least this far to give idle power


class CalibrationFailed(RuntimeError):
    """The calibration cannot go on; the message is the reason (and the fix)."""


def model_list(text: str) -> list[str]:
    models = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if not models or unknown:
        raise argparse.ArgumentTypeError(f"models are {', '.join(MODELS)}; got {text!r}")
    return models


# --- check -------------------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    result = run_check(HostFS(args.procfs, args.sysfs), poll_seconds=args.seconds)
    if args.json:
        print(json.dumps(result.to_record(), indent=2))
    else:
        print(format_check(result))
    if not result.usable:
        for problem in result.problems:
            if problem.severity == "fail":
                print(f"RAPL unusable: {problem.reason}\n  fix: {problem.fix}", file=sys.stderr)
                break
    return 0 if result.usable else 1


# --- run ---------------------------------------------------------------------------------------


def preflight(meter: Meter) -> tuple[str, list[dict[str, Any]], int | None]:
    """RAPL present, node zones readable; returns (node power kind, zones used, CPUs)."""
    reading = meter.read()
    if not reading.rapl.present or not reading.rapl.zones:
        raise CalibrationFailed(
            f"no RAPL counters under {meter.fs.sys('class', 'powercap')}: nothing to calibrate "
            "against. Run `kubejoule-calibrate check` for the reason and the fix"
        )
    kind, ids = meter.node_zones(reading)
    if not ids:
        raise CalibrationFailed("no package or psys zone: node power cannot be formed (see `kubejoule-calibrate check`)")
    broken = {zid: reading.rapl.errors[zid] for zid in ids if zid in reading.rapl.errors}
    if broken:
        first = next(iter(broken.values()))
        raise CalibrationFailed(f"node power zones cannot be read: {first} (see `kubejoule-calibrate check`)")
    zones = [
        {"zone_id": zid, "name": reading.rapl.zones[zid].name, "socket": reading.rapl.zones[zid].socket}
        for zid in ids
    ]
    return kind, zones, reading.cpu.cpus or None


def check_idle_coverage(phases: Sequence[Phase]) -> None:
    """Refuse to report idle power that would be a long extrapolation."""
    measured = [p.utilization for p in phases if p.utilization is not None]
    if not measured:
        raise CalibrationFailed("no phase gave a usable measurement")
    lowest = min(measured)
    if lowest > MAX_LOWEST_UTILIZATION:
        raise CalibrationFailed(
            f"the host never got below {100 * lowest:.0f} % busy (other work kept running), so idle "
            f"power would be an extrapolation from {100 * lowest:.0f}–100 %, not a measurement; "
            "drain the node (`kubectl drain`) and run again, or allow more `--retries`"
        )


@dataclass
class Measured:
    """What a calibration measured and fitted, before it is written."""

    node_power: str
    zones: list[dict[str, Any]]
    cores: int | None
    idle: list[Phase]
    steps: list[Phase]
    fit: FitResult
    # with a BMC: every reading it gave while measuring (time, watts), and where they came from
    platform: list[WallReading] | None = None
    platform_source: dict[str, Any] | None = None


class PlatformRecorder:
    """Keeps every BMC reading with its time, as a wall meter's log (calibration/platform_fit.py)."""

    def __init__(self) -> None:
        self.readings: list[WallReading] = []
        self.source: dict[str, Any] | None = None

    def __call__(self, reading: Reading) -> None:
        self.readings.append(WallReading(time.time(), reading.watts))
        self.source = {"reading": reading.source.reading, "chassis": reading.source.chassis}


def measure_and_fit(args: argparse.Namespace, meter: Meter, workers: int, progress: Progress) -> Measured:
    recorder = PlatformRecorder()
    poller = open_platform(args, args.node or default_node_name(), on_reading=recorder)
    if poller is not None:
        poller.start()  # polls on its own thread while the phases run
    try:
        measured = _measure_and_fit(args, meter, workers, progress)
    finally:
        if poller is not None:
            poller.stop()
    if poller is not None:
        measured.platform, measured.platform_source = recorder.readings, recorder.source
    return measured


def _measure_and_fit(args: argparse.Namespace, meter: Meter, workers: int, progress: Progress) -> Measured:
    node_power, zones, cores = preflight(meter)
    if args.wall_meter and args.wall_meter.exists():
        read_wall_csv(args.wall_meter, allow_empty=True)  # a malformed log fails now, not after the sweep
    judgement = Judgement(
        quiet_utilization=args.quiet_utilization, retries=args.retries, retry_wait_seconds=args.retry_wait
    )
    idle = measure_idle(
        meter, args.idle_seconds, args.sample_seconds, judgement, progress.warn, progress, args.settle_seconds
    )
    check_idle_coverage(idle)  # fail fast: no sweep can make up for a host that is never idle
    with LoadGenerator(workers) as generator:
        steps = sweep(
            meter,
            generator,
            args.steps,
            args.step_seconds,
            args.settle_seconds,
            args.sample_seconds,
            judgement,
            progress.warn,
            progress,
        )
    used = [p for p in (*idle, *steps) if p.used]
    check_idle_coverage(used)
    windows = [w for p in used for w in p.windows]
    fit = select_model(windows, args.models)
    peak_u = max(w.utilization for w in windows)
    if peak_u < 0.9:
        progress.warn(
            f"the load reached only {100 * peak_u:.0f} % utilization: max_watts is extrapolated "
            "(is the calibration confined by a CPU limit? give it every CPU)"
        )
    return Measured(node_power, zones, cores, idle, steps, fit)


def cmd_run(args: argparse.Namespace) -> int:
    fs = HostFS(args.procfs, args.sysfs)
    workers = args.workers or available_cpus()
    progress = Progress(sys.stderr, not args.no_progress, args.steps + 1)
    try:
        measured = measure_and_fit(args, Meter(fs), workers, progress)
    except (CalibrationFailed, MeasureError, FitError, WallMeterError, LoadError) as exc:
        print(f"calibration failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("calibration interrupted; no profile written", file=sys.stderr)
        return 130
    phases = [*measured.idle, *measured.steps]
    wall: WallCorrection | None = None
    wall_error: str | None = None
    platform: PlatformFit | None = None
    if measured.platform is not None:
        try:
            platform = fit_platform(phases, measured.platform, args.models)
            wall = platform.wall
        except WallMeterError as exc:
            wall_error = f"the platform reading: {exc}"  # RAPL's calibration is good: write it, and say so
    if args.wall_meter:
        try:  # read again: the logger wrote during the run
            spans = phase_spans([phase_record(p) for p in phases])  # the steady phases
            wall = fit_wall_correction(read_wall_csv(args.wall_meter), spans)
        except WallMeterError as exc:
            wall_error = str(exc)  # the calibration itself is good: write it, and say so
    settings = {
        "idle_seconds": args.idle_seconds,
        "quiet_utilization": args.quiet_utilization,
        "retries": args.retries,
        "retry_wait_seconds": args.retry_wait,
        "steps": args.steps,
        "step_seconds": args.step_seconds,
        "settle_seconds": args.settle_seconds,
        "sample_seconds": args.sample_seconds,
        "workers": workers,
        "procfs": str(args.procfs),
        "sysfs": str(args.sysfs),
    }
    doc = build_profile(
        node=args.node or default_node_name(),
        fs=fs,
        cores=measured.cores,
        fit=platform.fit if platform is not None else measured.fit,
        idle_phases=measured.idle,
        steps=measured.steps,
        node_power=measured.node_power,
        zones=measured.zones,
        settings=settings,
        quiet_utilization=args.quiet_utilization,
        wall=wall,
    )
    if platform is not None:
        doc = with_platform(doc, platform, measured.fit, measured.platform_source)
    write_profile(doc, args.out)
    print(format_summary(doc, args.out))
    _print_estimate(args, load_power_profile(args.out))
    if wall_error is not None:
        fix = ("it holds RAPL's curve; run again when the BMC answers" if measured.platform is not None else
               f"fix the log and apply it with `kubejoule-calibrate wall {args.out} CSV`")
        print(f"wall correction failed: {wall_error}\nthe profile was written without it; {fix}", file=sys.stderr)
        return 1
    return 0


# --- wall, show --------------------------------------------------------------------------------


def cmd_wall(args: argparse.Namespace) -> int:
    try:
        load_power_profile(args.profile)
        doc = yaml.safe_load(args.profile.read_text(encoding="utf-8"))
        spans = phase_spans(doc.get("phases") or [])
        if not spans:
            raise WallMeterError(f"{args.profile} lists no measured phases (was it written by `kubejoule-calibrate run`?)")
        wall = fit_wall_correction(read_wall_csv(args.csv), spans)
    except (PowerProfileError, WallMeterError, OSError) as exc:
        print(f"wall correction failed: {exc}", file=sys.stderr)
        return 1
    doc["wall_correction"] = wall.to_mapping()
    out: Path = args.out or args.profile
    write_profile(doc, out)
    print(
        f"wall = {wall.intercept_watts:.2f} W + {wall.slope:.4f} × RAPL (RMS error {wall.error_watts:.2f} W "
        f"over {wall.phases} phases), written to {out}"
    )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    try:
        profile = load_power_profile(args.profile)
    except PowerProfileError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    head = f"{args.profile}: idle {profile.idle_watts:.2f} W"
    if profile.example:
        head += "   (EXAMPLE profile: published figures for another machine, not this node)"
    print(head)
    if profile.curve is None:
        print("no curve (idle_watts only): node power cannot be estimated without RAPL")
        return 0
    print(f"model {profile.model}" + (f", held-out error {profile.fit_error_watts:.2f} W" if profile.fit_error_watts else ""))
    for u, watts in profile.model_points():
        print(f"{100 * u:>5.0f} %{watts:>10.2f} W")
    _print_estimate(args, profile)
    return 0


def _print_estimate(args: argparse.Namespace, profile: PowerProfile) -> None:
    """With --instance-type: the published estimate beside the measured CPU side."""
    if args.estimate is None:
        return
    cpu = profile.cpu
    if cpu is None or cpu.curve is None:
        print(f"no measured curve of the CPU side to compare {args.estimate.provenance} with")
        return
    print()
    print(format_beside(cpu.model_points(), args.estimate, profile.cores))


# --- parser ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubejoule-calibrate",
        description="Check RAPL, measure idle power, sweep load and fit the node's power curve.",
    )
    # what a subcommand has no option for reads as its default (a subcommand's own values replace these)
    parser.set_defaults(validate=None, estimate=None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    host = argparse.ArgumentParser(add_help=False)
    host.add_argument("--procfs", type=Path, default=Path("/proc"), help="host procfs root (default /proc)")
    host.add_argument("--sysfs", type=Path, default=Path("/sys"), help="host sysfs root (default /sys)")

    check = sub.add_parser("check", parents=[host], help="is RAPL usable here, and as which user")
    check.add_argument("--seconds", type=positive_float, default=1.0, help="how long to poll the counters (default 1)")
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    check.set_defaults(func=cmd_check)

    # a BMC: the curve fitted against its platform reading, polled every second while measuring
    run = sub.add_parser("run", parents=[host, bmc_options(interval_seconds=1.0)],
                         help="measure idle power, sweep load, write a profile")
    run.add_argument("--out", type=Path, required=True, help="profile YAML to write")
    run.add_argument("--node", default=None, help="node name (default $NODE_NAME, else the hostname)")
    run.add_argument("--idle-seconds", type=positive_float, default=60.0, help="idle baseline length (default 60)")
    run.add_argument(
        "--quiet-utilization", type=fraction, default=0.05,
        help="highest utilization that counts as idle, 0-1 (default 0.05)",
    )
    run.add_argument(
        "--retries", type=int_at_least(0), default=3,
        help="retries of a phase when the host is busy or the load unsteady (default 3)",
    )
    run.add_argument("--retry-wait", type=non_negative_float, default=10.0, help="seconds to wait before a retry (default 10)")
    run.add_argument("--steps", type=int_at_least(2), default=11, help="load levels from 0%% to 100%% (default 11)")
    run.add_argument("--step-seconds", type=positive_float, default=30.0, help="measured seconds per level (default 30)")
    run.add_argument("--settle-seconds", type=non_negative_float, default=5.0, help="seconds before each level is measured (default 5)")
    run.add_argument("--sample-seconds", type=positive_float, default=1.0, help="window length within a phase (default 1)")
    run.add_argument("--workers", type=int_at_least(1), default=None, help="load worker processes (default: one per usable CPU)")
    run.add_argument("--models", type=model_list, default=list(MODELS), help="models to fit, comma separated (default linear,fan,points)")
    run.add_argument("--wall-meter", type=Path, default=None, metavar="CSV", help="wall power log (timestamp,watts) for a RAPL-to-wall correction")
    run.add_argument("--no-progress", action="store_true", help="no progress output")
    calibrate_instance_type_option(run)
    run.set_defaults(func=cmd_run, validate=_validate_run)

    wall = sub.add_parser("wall", help="fit a RAPL-to-wall correction into an existing profile")
    wall.add_argument("profile", type=Path, metavar="PROFILE", help="the power profile to add the correction to")
    wall.add_argument("csv", type=Path, metavar="CSV", help="wall power log: timestamp,watts")
    wall.add_argument("--out", type=Path, default=None, help="write here instead of updating PROFILE")
    wall.set_defaults(func=cmd_wall)

    show = sub.add_parser("show", help="print a profile's curve")
    show.add_argument("profile", type=Path, metavar="PROFILE", help="the power profile to print")
    calibrate_instance_type_option(show)
    show.set_defaults(func=cmd_show, validate=validate_calibrate_instance_type)
    return parser


def _validate_run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    validate_bmc(parser, args)
    validate_calibrate_instance_type(parser, args)
    if args.wall_meter is not None and (args.bmc_url is not None or args.bmc_url_file is not None):
        parser.error("--wall-meter and a BMC: the BMC's platform reading is the wall; give one of them")
    if args.sample_seconds > args.step_seconds:
        parser.error("--sample-seconds must not exceed --step-seconds")
    if args.sample_seconds > args.idle_seconds:
        parser.error("--sample-seconds must not exceed --idle-seconds")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    validate: Callable[[argparse.ArgumentParser, argparse.Namespace], None] | None = args.validate
    if validate is not None:
        validate(parser, args)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
