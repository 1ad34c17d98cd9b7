"""Node power from its parts: the CPU side (RAPL or a calibrated estimate), the GPUs, the platform.

`compose` takes the Snapshot of the CPU side — node watts are the CPU side's, split into idle,
host and pods by CPU time exactly as before — and makes the node's (DESIGN.md, "Node power"):

* without a platform reading: node = CPU side + Σ GPUs, with the source of the CPU side (`rapl`,
  `estimated`); unknown when either is (never a partial sum labelled as the node);
* with a fresh, plausible platform reading from the BMC: node = that reading (`platform`); the
  CPU side and the GPUs are inside it, and the rest (fans, power supplies, disks, NICs) is
  `platform_other_watts`, charged to idle — never to pods. A reading below its parts (beyond
  5 % and 1 W: the BMC averages over its own window) is not used, with an `implausible` gap.

The GPUs' shares join the parts: pods' `gpu_watts`, the host, idle, and what could not be
split (`gpu_unattributed_watts`). With node power known,
`Σ pods (watts + gpu_watts) + host + idle + gpu_unattributed = node`; unknown, every share is
unknown. `check_invariant` checks it every interval (to 1e-6 relative) on the composed Snapshot:
a breach is logged with the numbers and flagged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

from agent.device.gaps import GAP_IMPLAUSIBLE, GAP_INCOMPLETE, Gap, Subject
from agent.device.platform import PlatformState
from agent.monitor.gpu_power import GpuResult
from agent.monitor.snapshot import SOURCE_NONE, SOURCE_PLATFORM, PlatformPower, PodPower, Snapshot

log = logging.getLogger("kubejoule.agent.sampler")  # the name a breach was always logged under

INVARIANT_RELATIVE_TOLERANCE = 1e-6

# A platform reading may be this far below its parts before it is refused: a BMC's reading is
# averaged over its own window (often a second or more) and lags the counters.
PLATFORM_SLACK_RATIO = 0.05
PLATFORM_SLACK_WATTS = 1.0


def _add(*values: float | None) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _platform(cpu: float | None, gpus: float | None, platform: PlatformState, gaps: list[Gap]
              ) -> tuple[float | None, PlatformPower]:
    """(the platform's watts when they can be node power, the record of the reading)."""
    inside = _add(cpu, gpus)
    record = PlatformPower(platform.watts, platform.age_seconds, platform.reading, platform.chassis,
                           None, cpu, gpus, platform.energy_kwh)
    if platform.watts is None:
        gaps.append(Gap(Subject.PLATFORM, platform.reason or "no reading", platform.kind))
        return None, record
    if inside is not None and inside > platform.watts * (1 + PLATFORM_SLACK_RATIO) + PLATFORM_SLACK_WATTS:
        gaps.append(Gap(Subject.PLATFORM, (
            f"the BMC's reading {platform.watts:.1f} W is below its parts (CPU side {cpu:.1f} W + GPUs "
            f"{gpus or 0.0:.1f} W): node power is the parts' sum instead"), GAP_IMPLAUSIBLE))
        return None, replace(record, watts=None)
    other = None if inside is None else max(platform.watts - inside, 0.0)
    return platform.watts, replace(record, other_watts=other)


def _pods(pods: Iterable[PodPower], gpus: GpuResult | None, known: bool, gaps: list[Gap]) -> tuple[PodPower, ...]:
    if gpus is None:
        return tuple(pods) if known else tuple(replace(p, watts=None) for p in pods)
    out = []
    listed = set()
    for pod in pods:
        listed.add(pod.uid)
        holds = pod.uid in gpus.pod_watts or pod.uid in gpus.unknown_pods
        gpu_watts = gpus.pod_watts.get(pod.uid) if known and pod.uid not in gpus.unknown_pods else None
        if holds and gpu_watts is None and known:
            gaps.append(Gap(Subject.POD, "its GPU's power is unknown this interval (see the gpu gap)", GAP_INCOMPLETE, name=pod.uid))
        out.append(replace(pod, watts=pod.watts if known else None, gpu_watts=gpu_watts, gpu=holds))
    for uid in sorted(set(gpus.pod_watts) - listed):  # a GPU's pod whose cgroup was not read
        gaps.append(Gap(Subject.POD, "charged GPU power, but its cgroup was not read this interval: "
                                      "its GPU share is unattributed", GAP_INCOMPLETE, name=uid))
    return tuple(out)


def compose(snapshot: Snapshot, gpus: GpuResult | None, platform: PlatformState | None) -> Snapshot:
    """The node's snapshot from the CPU side's (see the module docstring)."""
    if gpus is None and platform is None:
        return snapshot
    gaps = list(snapshot.gaps)
    if gpus is not None:
        gaps.extend(gpus.gaps)
    cpu, source = snapshot.node_watts, snapshot.source
    gpu_watts = gpus.watts if gpus is not None else 0.0
    platform_record = None
    node: float | None = None
    other: float | None = 0.0
    if platform is not None:
        node, platform_record = _platform(cpu, gpu_watts, platform, gaps)
        if node is not None:
            source, other = SOURCE_PLATFORM, platform_record.other_watts
            # node power is known: the CPU side's own gaps no longer say the node's is unknown
            gaps = [replace(g, subject=Subject.RAPL) if g.subject is Subject.NODE else g for g in gaps]
    if node is None:
        node = _add(cpu, gpu_watts)
        if node is None and cpu is not None:
            gaps.append(Gap(Subject.NODE, "node power is unknown because a GPU's power is unknown (see the gpu gaps)",
                            GAP_INCOMPLETE))
    devices = gpus.devices if gpus is not None else ()
    if node is None:  # every share of unknown node power is unknown
        return replace(snapshot, source=SOURCE_NONE, node_watts=None, idle_watts=None, active_watts=None,
                       host_watts=None, pods=_pods(snapshot.pods, gpus, False, gaps), gaps=tuple(gaps),
                       gpus=devices, platform=platform_record,
                       vms=tuple(replace(v, watts=None) for v in snapshot.vms),
                       processes=tuple(replace(p, watts=None) for p in snapshot.processes),
                       busy_processes=tuple(replace(p, watts=None) for p in snapshot.busy_processes))
    idle = _add(snapshot.idle_watts, gpus.idle_watts if gpus is not None else 0.0, other)
    host = _add(snapshot.host_watts, gpus.host_watts if gpus is not None else 0.0)
    return replace(
        snapshot, source=source, node_watts=node, idle_watts=idle,
        active_watts=None if idle is None else node - idle, host_watts=host,
        pods=_pods(snapshot.pods, gpus, True, gaps), gaps=tuple(gaps),
        gpus=devices, platform=platform_record,
        gpu_unattributed_watts=gpus.unattributed_watts if gpus is not None else None,
    )


def invariant_error(
    node_watts: float, idle_watts: float, pod_watts: list[float], host_watts: float
) -> float:
    """Relative error of Σpods + host + idle against node power."""
    total = sum(pod_watts) + host_watts + idle_watts
    scale = max(abs(node_watts), 1e-12)
    return abs(total - node_watts) / scale


def invariant_holds(
    node_watts: float, idle_watts: float, pod_watts: list[float], host_watts: float
) -> bool:
    if node_watts == 0.0:
        return abs(sum(pod_watts) + host_watts + idle_watts) <= 1e-9
    return invariant_error(node_watts, idle_watts, pod_watts, host_watts) <= INVARIANT_RELATIVE_TOLERANCE


def check_invariant(snapshot: Snapshot) -> Snapshot:
    """Σ pods (CPU and GPU shares) + host + idle + unattributed GPU power = node, when all are
    known; a breach is logged with the numbers and flagged (the exporter counts it)."""
    node, idle, host = snapshot.node_watts, snapshot.idle_watts, snapshot.host_watts
    shares = [p.watts for p in snapshot.pods] + [p.gpu_watts for p in snapshot.pods if p.gpu]
    unattributed = snapshot.gpu_unattributed_watts or 0.0
    if node is None or idle is None or host is None or any(w is None for w in shares):
        return snapshot
    known = [w for w in shares if w is not None] + [unattributed]
    if invariant_holds(node, idle, known, host):
        return snapshot
    log.warning(
        "attribution invariant breached: pods + host + idle != node",
        extra={"fields": {
            "node_watts": node, "idle_watts": idle, "pods_watts": sum(known) - unattributed,
            "gpu_unattributed_watts": unattributed, "host_watts": host,
            "relative_error": invariant_error(node, idle, known, host),
        }},
    )
    return replace(snapshot, invariant_breached=True)
