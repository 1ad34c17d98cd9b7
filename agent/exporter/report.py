"""Human-readable rendering of a Snapshot (the `once` and `replay` table)."""

from __future__ import annotations

from agent.monitor.snapshot import Snapshot


def fmt_watts(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.2f} W"


def fmt_cpu(seconds: float | None, width: int) -> str:
    return f"{'unknown':>{width}}" if seconds is None else f"{seconds:>{width}.3f}"


def format_snapshot(snap: Snapshot) -> str:
    lines = [
        f"node {snap.node}   interval {snap.interval_seconds:.2f} s   source {snap.source}"
        + (f" ({snap.estimate})" if snap.estimate else ""),
        f"node power   {fmt_watts(snap.node_watts)}",
        f"idle power   {fmt_watts(snap.idle_watts)} ({snap.idle_source})   "
        f"active power {fmt_watts(snap.active_watts)}",
        "cpu utilization "
        + ("unknown" if snap.cpu_utilization is None else f"{100 * snap.cpu_utilization:.1f} %"),
        f"host power   {fmt_watts(snap.host_watts)} (active power of everything not in a pod)",
    ]
    if snap.zones:
        lines.append("")
        lines.append(f"{'zone':<16}{'id':<18}{'socket':>7}{'watts':>14}")
        for zone in snap.zones:
            socket = "-" if zone.socket is None else str(zone.socket)
            lines.append(f"{zone.zone:<16}{zone.zone_id:<18}{socket:>7}{fmt_watts(zone.watts):>14}")
    if snap.pods:
        lines.append("")
        lines.append(f"{'pod':<48}{'qos':<12}{'cpu s':>9}{'watts':>12}")
        for pod in sorted(snap.pods, key=lambda p: -(p.watts or 0.0)):
            label = f"{pod.namespace}/{pod.name}" if pod.name else pod.uid
            lines.append(f"{label:<48}{pod.qos or '-':<12}{fmt_cpu(pod.cpu_seconds, 9)}{fmt_watts(pod.watts):>12}")
    if snap.vms:
        lines.append("")
        lines.append(f"{'vm':<32}{'pid':>8}{'cpu s':>9}{'watts':>12}")
        for vm in snap.vms:
            lines.append(f"{vm.name:<32}{vm.pid:>8}{fmt_cpu(vm.cpu_seconds, 9)}{fmt_watts(vm.watts):>12}")
    if snap.processes:
        lines.append("")
        lines.append(f"{'process':<24}{'pid':>8}{'cpu s':>9}{'watts':>12}")
        for proc in snap.processes:
            lines.append(f"{proc.comm:<24}{proc.pid:>8}{proc.cpu_seconds:>9.3f}{fmt_watts(proc.watts):>12}")
    if snap.gaps:
        lines.append("")
        lines.append("gaps (not measured this interval, and why):")
        for gap in snap.gaps:
            lines.append(f"  - {gap.what}: {gap.reason}")
    return "\n".join(lines)
