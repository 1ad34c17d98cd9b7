"""`--instance-type`: a cloud instance's power curve from published coefficients
(common/cloud_estimates.py; docs/agent.md, "Cloud instances").

`--instance-type aws:m5.xlarge` names the type; the default, `auto`, reads it from the agent's
own Node (`node.kubernetes.io/instance-type` and `spec.providerID`) when the Kubernetes API is
used, no power profile is given and the host has no RAPL package zone — the only case where the
curve would be used. The curve becomes the sampler's profile: node power estimated from CPU
utilization, `source="estimated"` with `estimate="ccf:aws:m5.xlarge"`. A type the data does not
have is a gap of every interval that names it, never a curve borrowed from a similar type.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from common.cloud_estimates import (
    CloudEstimateError,
    InstanceCoefficients,
    lookup,
    node_instance_type,
    parse_instance_type,
)
from common.power_profile import PowerProfile

AUTO = "auto"
NONE = "none"


def add_instance_type_option(options: argparse.ArgumentParser) -> None:
    options.add_argument(
        "--instance-type", default=AUTO, metavar="PROVIDER:TYPE",
        help="cloud instance type (aws:, gcp:, azure:) whose published coefficients give node power "
             "where RAPL is absent (source estimated); auto (default): from this Node's labels; none: off",
    )


def validate_instance_type(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Parse time: a malformed value is a usage error; a well-formed type the data lacks is a
    gap (args.estimate_gap), as it is when read from the Node."""
    args.estimate_gap = None
    text: str = args.instance_type
    if text in (AUTO, NONE):
        return
    try:
        provider, name = parse_instance_type(text)
    except CloudEstimateError as exc:
        parser.error(f"--instance-type: {exc}")
    if args.profile is not None:
        parser.error("--instance-type and --power-profile: give one curve (a measured profile is better)")
    use_instance_type(args, provider, name)


def use_instance_type(args: argparse.Namespace, provider: str, name: str) -> None:
    try:
        args.profile = lookup(provider, name).profile()
    except CloudEstimateError as exc:
        args.estimate_gap = str(exc)


def _measured(args: argparse.Namespace) -> bool:
    """Node power is measured here: RAPL has a package zone, or (a VM node) the agent reads its
    host's counter (`--host-energy`, resolved into args.host_energy_dir where that option exists)."""
    from agent.device.hostfs import HostFS
    from agent.device.rapl import discover_zones
    from agent.monitor.rapl_power import node_zone_ids

    if args.host_energy_dir is not None:
        return True
    present, zones, _ = discover_zones(HostFS(args.procfs, args.sysfs))
    return present and bool(node_zone_ids(zones)[1])


def resolve_from_node(args: argparse.Namespace, node: str, say: Callable[[str], None]) -> None:
    """`once` and `run`, before sampling starts. Where power is measured the estimate is not used
    (measured power, and its curve is not exported as the node's). `--instance-type auto`: read
    this Node once; a Node of no known cloud (bare metal, kind) or without the label changes
    nothing; an API that cannot be read is said (once) and changes nothing."""
    profile: PowerProfile | None = args.profile
    if profile is not None and profile.estimate is not None and _measured(args):
        say(f"node power is measured here (RAPL or the host's counter): {profile.estimate}'s coefficients "
            "are not used")
        args.profile = None
        return
    if args.instance_type != AUTO or profile is not None:
        return
    if args.no_kube or _measured(args):
        return
    from agent.kube.client import KubeClient, KubeError

    try:
        client = KubeClient.connect(args.kubeconfig, request_timeout_seconds=3.0)
    except KubeError:
        return  # no API configured: nothing to read the type from
    try:
        found = node_instance_type(client.get_node(node))
    except KubeError as exc:
        say(f"instance type unknown: {exc}")
        return
    finally:
        client.close()
    if found is not None:
        use_instance_type(args, *found)
        if args.estimate_gap is not None:
            say(args.estimate_gap)


# -- kubejoule-calibrate: the estimate beside the measured curve ------------------------------


def calibrate_instance_type_option(options: argparse.ArgumentParser) -> None:
    options.add_argument(
        "--instance-type", default=None, metavar="PROVIDER:TYPE",
        help="also print the curve published coefficients give this cloud instance type "
             "(aws:m5.xlarge …) beside the measured one",
    )


def validate_calibrate_instance_type(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Before measuring: a malformed or unknown type is a usage error naming it (a calibration
    takes minutes; it should not end in a comparison that cannot be made)."""
    args.estimate = None
    if args.instance_type is None:
        return
    try:
        args.estimate = lookup(*parse_instance_type(args.instance_type))
    except CloudEstimateError as exc:
        parser.error(f"--instance-type: {exc}")


def format_beside(measured: Sequence[tuple[float, float]], estimate: InstanceCoefficients,
                  cores: int | None = None) -> str:
    """The measured curve (the CPU side) and the estimate at 0 %, 10 % … 100 %, with the
    difference, so a user sees how far the estimate is on this machine."""
    archs = ", ".join(estimate.architectures)
    lines = [
        f"estimate {estimate.provenance}: {estimate.vcpus} vCPUs × {estimate.min_watts_per_vcpu:.3f}–"
        f"{estimate.max_watts_per_vcpu:.3f} W per vCPU ({archs}; Cloud Carbon Footprint, {estimate.source})",
        f"{'util':>6}{'measured':>12}{'estimated':>12}{'estimate − measured':>24}",
    ]
    curve = estimate.curve()
    errors = []
    for u, watts in measured:
        guess = curve.watts(u)
        errors.append(guess - watts)
        relative = f" ({100 * (guess - watts) / watts:+.0f} %)" if watts > 0 else ""
        lines.append(f"{100 * u:>5.0f} %{watts:>10.2f} W{guess:>10.2f} W{guess - watts:>+14.2f} W{relative}")
    if errors:
        rms = (sum(e * e for e in errors) / len(errors)) ** 0.5
        lines.append(f"RMS difference over the {len(errors)} levels: {rms:.2f} W")
    if cores is not None and cores != estimate.vcpus:
        lines.append(
            f"the coefficients are per vCPU: at this machine's {cores} CPUs they give "
            f"{cores * estimate.min_watts_per_vcpu:.2f}–{cores * estimate.max_watts_per_vcpu:.2f} W"
        )
    return "\n".join(lines)
