"""The benchmark's tables: every run, and the headline's targets (issue 14).

The headline (`heterogeneous-autoscaler`, `HEADLINE_POLICIES`) compares with
`default@least-waste`: kube-scheduler and cluster-autoscaler as they ship (least-waste has been
its default expander since kubernetes/autoscaler PR #7631; `default@random` is the row for
autoscalers before it). It separates the two contributions with a 2 × 2 of {default, kubejoule}
scheduler × {least-waste, kubejoule} expander; beside it kube-scheduler with the extender at
weights 1, 5 and 12, the heuristic (the energy plugin with a ΔP_ref that never saturates), the
bin-packing baseline operators already run (`mostallocated@least-waste`), and MostAllocated,
PEAKS and Trimaran with the kubejoule expander, so that they differ from `kubejoule@kubejoule`
in the scheduler only.

Targets (issue 14's), on the headline's means over seeds (`headline_targets`):
`kubejoule@kubejoule` uses ≥ 25 % less energy than the baseline, `default+extender:5@kubejoule`
≥ 15 % less; each has mean slowdown ≤ the baseline's + 2 points and p99 pending time ≤ the
baseline's + 10 %; no pod is left unscheduled in any run; `kubejoule@kubejoule` uses less than
`mostallocated@least-waste`.

Issue 33: every comparison is paired per seed with a 95 % interval (rl/evaluation/paired.py), and
a target is "met" only when the whole interval clears it; the recommended setup (`RECOMMENDED`)
must be no worse than bin packing with our expander (`PACKING_REFERENCE`) on energy, lost
CPU-hours, evictions and p99 pending time (each interval's upper end ≤ 0), and its saving's
interval must be within ±1 %. `format_split_table` shows where each row's energy goes, beside the
oracle bound's split.

The headline also runs issue 23's rows (`mostallocated+highnodeutilization@least-waste`,
`kubejoule+rebalancer@kubejoule`); issue 23's targets are judged by `kubejoule-rl ablation`
(rl/evaluation/ablation.py, `ablation_targets`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rl.evaluation.paired import AXES, Interval, format_interval
from rl.evaluation.rows import BenchmarkDocument, PolicyRow, document_of
from rl.simulation.engine.energy import ENERGY_PARTS
from rl.simulation.traces.headline import (  # noqa: F401  (re-exported: the headline's rows)
    BASELINE,
    BEFORE_7631,
    EXTENDER,
    HEADLINE_POLICIES,
    HEADLINE_SCENARIO,
    KUBEJOULE,
    OPERATORS_PACKING,
    PACKING,
    PACKING_REFERENCE,
    REBALANCED,
    RECOMMENDED,
)

SAVING_TARGETS = ((RECOMMENDED, 25.0), (KUBEJOULE, 25.0), (EXTENDER, 15.0))
INTERVAL_TARGET_PCT = 1.0  # the recommended setup's saving known within ±1 %
SLOWDOWN_MARGIN_POINTS = 2.0
PENDING_P99_MARGIN = 0.10


def is_reference(key: str) -> bool:
    """A results key of the hindsight reference (`hindsight`, with controllers or an
    expander): not deployable, reported beside the oracle bound."""
    return key.split("@")[0].split("+")[0] == "hindsight"


def _less(pct: float) -> str:
    """A saving as "N % less" (or "N % more" when it is not one)."""
    return f"{abs(pct):.1f} % {'less' if pct >= 0 else 'more'}"


def _number(value: float | None) -> float:
    """A mean the targets need (a run without pods has none: a document error)."""
    if value is None:
        raise ValueError("a headline row lacks a mean the targets compare")
    return value


def _no_worse(interval: Interval) -> bool:
    """The interval's upper end is ≤ 0 (none: not shown to be)."""
    return interval.high is not None and interval.high <= 0


def _cell(value: object, fmt: str, suffix: str = "") -> str:
    return "—" if value is None else format(value, fmt) + suffix


# A results document: its records, or its JSON (read back as records).
Document = BenchmarkDocument | Mapping[str, Any]


def format_table(document: Document) -> str:
    """A Markdown table of a results document (runs in order, then the oracle)."""
    doc = document_of(document)
    lines = [
        "| policy | energy kWh | vs default | gap closed | slowdown mean / p99 % "
        "| pending mean / p99 s | boots | scale-ups / downs | evicted / restarted | lost CPU h "
        "| unschedulable | never scheduled |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = doc.policies
    # A reference no scheduler can be (hindsight) goes last, beside the oracle bound.
    for name in sorted(rows, key=is_reference):
        row = rows[name]
        lines.append(
            f"| {name} | {_cell(row.energy_kwh, '.2f')} "
            f"| {_vs_default(row)} "
            f"| {_cell(row.gap_closed_pct, '.1f', ' %')} "
            f"| {_cell(row.slowdown_mean, '.2f')} / {_cell(row.slowdown_p99, '.2f')} "
            f"| {_cell(row.pending_seconds_mean, '.1f')} / {_cell(row.pending_seconds_p99, '.0f')} "
            f"| {_cell(row.boots, 'g')} "
            f"| {_cell(row.scale_ups, 'g')} / {_cell(row.scale_downs, 'g')} "
            f"| {_cell(row.evictions, 'g')} / {_cell(row.restarted_pods, 'g')} "
            f"| {_cell(row.lost_cpu_hours, '.2f')} | {_cell(row.unschedulable, 'g')} "
            f"| {_cell(row.never_scheduled, 'g')} |"
        )
    lines.append(
        f"| oracle bound | {_cell(doc.oracle.energy_kwh, '.2f')} | | 100 % | | | | | | | | |"
    )
    return "\n".join(lines)


def _vs_default(row: PolicyRow) -> str:
    """The difference of the means, and the paired 95 % interval where there is one."""
    cell = _cell(row.energy_vs_default_pct, "+.1f", " %")
    interval = row.paired.energy_vs_baseline_pct
    if interval and interval.low is not None and interval.high is not None:
        cell += f" [{interval.low:+.1f}, {interval.high:+.1f}]"
    return cell


_PART_LABELS = {
    "work": "work",
    "idle_with_pods": "idle, nodes with pods",
    "idle_empty": "idle, empty nodes",
    "daemonsets": "DaemonSets",
    "boots": "boots",
    "standby": "standby (off)",
}


def format_split_table(document: Document) -> str:
    """Where each row's energy goes (kWh, mean over seeds), node-hours, and the oracle bound's
    split: the parts a row spends above the bound's are what is left to save."""
    parts = " | ".join(_PART_LABELS[p] for p in ENERGY_PARTS)
    lines = [
        f"| policy | energy kWh | {parts} | node-hours |",
        "|---|---:|" + "---:|" * len(ENERGY_PARTS) + "---:|",
    ]
    doc = document_of(document)
    for name in sorted(doc.policies, key=is_reference):
        row = doc.policies[name]
        split = row.energy_split_kwh
        if not split:
            continue
        cells = " | ".join(_cell(split[p], ".2f") for p in ENERGY_PARTS)
        lines.append(f"| {name} | {row.energy_kwh:.2f} | {cells} | {_cell(row.node_hours, '.1f')} |")
    oracle = doc.oracle.split_kwh
    if oracle:
        cells = " | ".join(_cell(oracle[p], ".2f") for p in ENERGY_PARTS)
        lines.append(f"| oracle bound | {_cell(doc.oracle.energy_kwh, '.2f')} | {cells} | |")
    return "\n".join(lines)


def format_carbon_table(document: Document) -> str:
    """Each row's energy beside its grams of CO2-equivalent (mean over seeds), g per kWh, and why
    grams are unknown where they are (the first run's reason)."""
    doc = document_of(document)
    carbon = doc.scenario.get("carbon") or {}
    lines = [
        f"Carbon (gCO2eq, mean over seeds; intensity {carbon.get('source', '?')}"
        f"{' ' + carbon['zone'] if carbon.get('zone') else ''} from {carbon.get('start', '?')}):",
        "| policy | energy kWh | carbon g | g/kWh | unknown because |",
        "|---|---:|---:|---:|---|",
    ]
    for name in sorted(doc.policies, key=is_reference):
        row = doc.policies[name]
        grams, kwh = row.carbon_g, row.energy_kwh
        per_kwh = grams / kwh if grams is not None and kwh else None
        gap = next((r.carbon_gap for r in row.runs if r.carbon_gap), "")
        lines.append(f"| {name} | {kwh:.2f} | {_cell(grams, '.1f')} | {_cell(per_kwh, '.1f')} | {gap} |")
    return "\n".join(lines)


def format_packing_table(document: Document) -> str:
    """Each row against bin packing with our expander, paired per seed with 95 % intervals;
    "no worse" only when every interval's upper end is ≤ 0."""
    header = " | ".join(f"{axis} ({unit})" for axis, unit, _, _ in AXES)
    lines = [f"| policy vs {PACKING_REFERENCE} | {header} | no worse on every axis |",
             "|---|" + "---:|" * len(AXES) + "---|"]
    doc = document_of(document)
    for name in sorted(doc.policies, key=is_reference):
        paired = doc.policies[name].paired.vs_packing
        if not paired or name == PACKING_REFERENCE:
            continue
        cells = " | ".join(format_interval(paired[axis], "+.2f") for axis, _, _, _ in AXES)
        verdict = all(_no_worse(paired[a]) for a, _, _, _ in AXES)
        lines.append(f"| {name} | {cells} | {'yes' if verdict else 'no'} |")
    return "\n".join(lines)


@dataclass(frozen=True)
class Target:
    target: str
    measured: str
    met: bool

    def as_json(self) -> dict[str, object]:
        return {"target": self.target, "measured": self.measured, "met": self.met}


def has_headline(document: Document) -> bool:
    """The runs the targets need (the recommended setup's are judged when it ran)."""
    return all(k in document_of(document).policies for k in (BASELINE, KUBEJOULE, EXTENDER, PACKING))


def headline_targets(document: Document) -> list[Target]:
    """Each issue-14 target, measured on a results document holding the headline runs."""
    doc = document_of(document)
    rows = doc.policies
    base = rows[BASELINE]
    targets: list[Target] = []
    present = [(key, saving) for key, saving in SAVING_TARGETS if key in rows]
    for key, saving in present:
        row = rows[key]
        less = -_number(row.energy_vs_default_pct)
        interval = row.paired.energy_vs_baseline_pct
        met = less >= saving
        if interval is not None:  # met only when the whole interval clears the target
            met = interval.high is not None and interval.high <= -saving
        targets.append(
            Target(
                f"{key} ≥ {saving:g} % less energy than {BASELINE}",
                f"{_less(less)} ({row.energy_kwh:.2f} vs {base.energy_kwh:.2f} kWh; "
                f"{_number(row.gap_closed_pct):.1f} % of the oracle gap"
                + (f"; paired {format_interval(interval, '+.1f', '%')}" if interval else "") + ")",
                met,
            )
        )
    for key, _ in present:
        row = rows[key]
        slowdown, base_slowdown = _number(row.slowdown_mean), _number(base.slowdown_mean)
        margin = slowdown - base_slowdown
        targets.append(
            Target(
                f"{key} mean slowdown ≤ {BASELINE}'s + {SLOWDOWN_MARGIN_POINTS:g} points",
                f"{slowdown:.2f} % vs {base_slowdown:.2f} % ({margin:+.2f} points)",
                margin <= SLOWDOWN_MARGIN_POINTS + 1e-9,
            )
        )
        p99, base_p99 = _number(row.pending_seconds_p99), _number(base.pending_seconds_p99)
        limit = base_p99 * (1 + PENDING_P99_MARGIN)
        targets.append(
            Target(
                f"{key} p99 pending ≤ {BASELINE}'s + {PENDING_P99_MARGIN:.0%}",
                f"{p99:.1f} s vs {base_p99:.1f} s",
                p99 <= limit + 1e-9,
            )
        )
    worst = max(max(r.never_scheduled for r in row.runs) for row in rows.values())
    targets.append(
        Target(
            "zero pods left unscheduled (every run)",
            f"at most {worst} never scheduled in a run",
            worst == 0,
        )
    )
    targets += recommended_targets(doc)
    ours, packing = rows[KUBEJOULE].energy_kwh, rows[PACKING].energy_kwh
    targets.append(
        Target(
            f"{KUBEJOULE} uses less energy than {PACKING}",
            f"{_less(100 * (1 - ours / packing))} ({ours:.2f} vs {packing:.2f} kWh)",
            ours < packing,
        )
    )
    return targets


def format_targets(targets: list[Target]) -> str:
    lines = ["| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {t.target} | {t.measured} | {'met' if t.met else 'MISSED'} |" for t in targets]
    return "\n".join(lines)


def recommended_targets(document: Document) -> list[Target]:
    """Issue 33's: the recommended setup's saving against the baseline known within ±1 %, and
    no worse than bin packing with our expander on any axis (each interval's upper end ≤ 0)."""
    rows = document_of(document).policies
    row = rows.get(RECOMMENDED)
    if row is None or BASELINE not in rows:
        return []
    targets = []
    interval = row.paired.energy_vs_baseline_pct
    if interval is not None:
        low, high = interval.low, interval.high
        half = None if high is None or low is None else (high - low) / 2
        targets.append(
            Target(
                f"{RECOMMENDED} energy vs {BASELINE} known within ±{INTERVAL_TARGET_PCT:g} % (95 %)",
                f"{format_interval(interval, '+.2f', '%')} over {interval.seeds} seeds"
                + ("" if half is None else f" (±{half:.2f} %)"),
                half is not None and half <= INTERVAL_TARGET_PCT,
            )
        )
    paired = row.paired.vs_packing
    if paired is not None and RECOMMENDED != PACKING_REFERENCE:
        for axis, unit, _, _ in AXES:
            found = paired[axis]
            targets.append(
                Target(
                    f"{RECOMMENDED} {axis} no worse than {PACKING_REFERENCE}'s (upper end ≤ 0)",
                    format_interval(found, "+.2f", unit),
                    _no_worse(found),
                )
            )
    return targets
