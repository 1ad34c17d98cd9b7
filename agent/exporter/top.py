"""`kubejoule-agent top`: a live terminal view, refreshed every interval.

Node watts and their source, the idle/active split, then the pods, VMs and processes using the
most power. On a terminal each frame replaces the last (ANSI clear); when stdout is not a
terminal (a pipe, a test) frames are printed one after another. Ctrl-C quits cleanly.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from typing import TextIO

from agent.exporter.report import fmt_cpu, fmt_watts
from agent.monitor.sampler import Sampler
from agent.monitor.snapshot import Snapshot

CLEAR = "\x1b[H\x1b[2J"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _percent(value: float | None) -> str:
    return "unknown" if value is None else f"{100 * value:.1f} %"


def render(snap: Snapshot, width: int = 100, rows: int = 10) -> str:
    """One frame of the view (pure, for tests): at most `rows` lines per section."""
    name_width = max(width - 40, 16)
    lines = [
        _fit(f"kubejoule top — node {snap.node}   interval {snap.interval_seconds:.1f} s   "
             f"source {snap.source}   {time.strftime('%H:%M:%S', time.localtime(snap.timestamp))}", width),
        f"node  {fmt_watts(snap.node_watts):>12}   idle {fmt_watts(snap.idle_watts)} ({snap.idle_source})   "
        f"active {fmt_watts(snap.active_watts)}   cpu {_percent(snap.cpu_utilization)}",
        f"host  {fmt_watts(snap.host_watts):>12}   (active power of everything not in a pod)",
    ]

    def section(title: str, header: str, body: list[str], total: int) -> None:
        lines.append("")
        more = f"  (top {len(body)} of {total})" if total > len(body) else ""
        lines.append(_fit(f"{title}{more}", width))
        lines.append(header)
        lines.extend(body)

    pods = sorted(snap.pods, key=lambda p: (-(p.watts or 0.0), -(p.cpu_seconds or 0.0), p.uid))
    section(
        "PODS",
        f"{'pod':<{name_width}}{'qos':<12}{'cpu s':>10}{'watts':>14}",
        [
            f"{_fit(f'{p.namespace}/{p.name}' if p.name else p.uid, name_width - 1):<{name_width}}"
            f"{p.qos or '-':<12}{fmt_cpu(p.cpu_seconds, 10)}{fmt_watts(p.watts):>14}"
            for p in pods[:rows]
        ],
        len(pods),
    )
    vms = sorted(snap.vms, key=lambda v: (-(v.watts or 0.0), v.name))
    section(
        "VMS",
        f"{'vm':<{name_width}}{'pid':>12}{'cpu s':>10}{'watts':>14}",
        [f"{_fit(v.name, name_width - 1):<{name_width}}{v.pid:>12}{fmt_cpu(v.cpu_seconds, 10)}{fmt_watts(v.watts):>14}"
         for v in vms[:rows]],
        len(vms),
    )
    section(
        "PROCESSES",
        f"{'comm':<{name_width}}{'pid':>12}{'cpu s':>10}{'watts':>14}",
        [f"{_fit(p.comm, name_width - 1):<{name_width}}{p.pid:>12}{p.cpu_seconds:>10.3f}{fmt_watts(p.watts):>14}"
         for p in snap.processes[:rows]],
        len(snap.processes),
    )
    if snap.gaps:
        lines.append("")
        lines.append("gaps:")
        lines.extend(_fit(f"  - {g.what}: {g.reason}", width) for g in snap.gaps[:rows])
    return "\n".join(lines)


def run_top(
    sampler: Sampler,
    interval_seconds: float,
    count: int | None = None,
    rows: int | None = None,
    out: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Show a frame every interval, `count` times (forever when None). Returns the exit code."""
    stream = out or sys.stdout
    interactive = stream.isatty()
    shown = 0
    try:
        before = sampler.read()
        while count is None or shown < count:
            sleep(interval_seconds)
            after = sampler.read()
            snapshot = sampler.compute(before, after)
            before = after
            size = shutil.get_terminal_size((100, 40))
            per_section = rows if rows is not None else max(3, (size.lines - 14) // 3)
            frame = render(snapshot, size.columns, per_section)
            stream.write((CLEAR if interactive else ("\n" if shown else "")) + frame + "\n")
            stream.flush()
            shown += 1
    except KeyboardInterrupt:
        stream.write("\n")
    return 0
