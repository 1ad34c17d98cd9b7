"""`kubejoule-scheduler`: the energy-aware scheduler's command line.

    kubejoule-scheduler extender [--listen HOST:PORT] [--config FILE] [--mode shadow|active]

Each subcommand is one `add_<name>_command(subparsers)` function that declares its arguments
and sets `func` to the function that runs it; `build_parser()` lists them. To add a subcommand,
write its pair of functions and add one line to `SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from scheduler.config import (
    MODES,
    Config,
    ConfigError,
    build_scorer,
    build_store,
    load_config,
    parse_listen,
)
from scheduler.telemetry import parse_static_targets

log = logging.getLogger("kubejoule.scheduler")

Subparsers = Any  # argparse's _SubParsersAction is private


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="YAML configuration (see docs/scheduler.md)")
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error"),
        help="log verbosity (default: info)",
    )


def _load(args: argparse.Namespace) -> Config:
    config = load_config(args.config)
    if getattr(args, "mode", None):
        config = replace(config, mode=args.mode)
    if getattr(args, "listen", None):
        parse_listen(args.listen)
        config = replace(config, listen=args.listen)
    agents = getattr(args, "agent", None)
    if agents:
        try:
            static = {**config.telemetry.agents.static, **parse_static_targets(agents)}
        except ValueError as exc:
            raise ConfigError(f"--agent: {exc}") from exc
        config = replace(
            config,
            telemetry=replace(config.telemetry, agents=replace(config.telemetry.agents, static=static)),
        )
    return config


# -- extender ------------------------------------------------------------------------------------


def add_extender_command(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "extender",
        help="serve the kube-scheduler extender (POST /filter, /prioritize)",
        description="Serve kube-scheduler's extender v1 API with energy scores.",
    )
    parser.add_argument("--listen", metavar="HOST:PORT", help="address to serve on (default 0.0.0.0:8888)")
    parser.add_argument("--mode", choices=MODES, help="shadow (default): record only; active: score")
    parser.add_argument(
        "--agent", action="append", metavar="NODE=URL",
        help="scrape this node's agent (repeatable; adds to the config's static targets)",
    )
    _common_options(parser)
    parser.set_defaults(func=run_extender)


def run_extender(args: argparse.Namespace) -> int:
    import uvicorn

    from scheduler.extender import Extender, MemoryRecorder, create_app

    config = _load(args)
    host, port = parse_listen(config.listen)
    scorer = build_scorer(config)
    store = build_store(config)
    extender = Extender(
        scorer,
        store,
        mode=config.mode,
        power_caps_watts=config.power_caps_watts,
        default_power_cap_watts=config.default_power_cap_watts,
        recorder=MemoryRecorder(config.extender.shadow_log_size),
        max_body_bytes=config.extender.max_body_bytes,
    )
    log.info(
        "extender on %s:%d, mode %s, %d telemetry source(s): %s",
        host, port, config.mode, len(store.sources), ", ".join(s.name for s in store.sources) or "none",
    )
    if not store.sources:
        log.warning("no telemetry source configured: every node will score neutral (50)")
    uvicorn.run(
        create_app(extender),
        host=host,
        port=port,
        log_level=args.log_level,
        access_log=False,
    )
    return 0


# -- the parser ----------------------------------------------------------------------------------

SUBCOMMANDS: list[Callable[[Subparsers], None]] = [add_extender_command]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubejoule-scheduler", description="Energy-aware scheduling for Kubernetes."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(getattr(args, "log_level", "info")).upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"kubejoule-scheduler: configuration error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
