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

The headline also runs issue 23's rows (`mostallocated+highnodeutilization@least-waste`,
`kubejoule+rebalancer@kubejoule`); issue 23's targets are judged by `kubejoule-rl ablation`
(rl/evaluation/ablation.py, `ablation_targets`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rl.simulation.headline import (  # noqa: F401  (re-exported: the headline's rows)
    BASELINE,
    BEFORE_7631,
    EXTENDER,
    HEADLINE_POLICIES,
    HEADLINE_SCENARIO,
    KUBEJOULE,
    OPERATORS_PACKING,
    PACKING,
    REBALANCED,
)

SAVING_TARGETS = ((KUBEJOULE, 25.0), (EXTENDER, 15.0))
SLOWDOWN_MARGIN_POINTS = 2.0
PENDING_P99_MARGIN = 0.10


def is_reference(key: str) -> bool:
    """A results key of the hindsight reference (`hindsight`, with controllers or an
    expander): not deployable, reported beside the oracle bound."""
    return key.split("@")[0].split("+")[0] == "hindsight"


def _less(pct: float) -> str:
    """A saving as "N % less" (or "N % more" when it is not one)."""
    return f"{abs(pct):.1f} % {'less' if pct >= 0 else 'more'}"


def _cell(value: Any, fmt: str, suffix: str = "") -> str:
    return "—" if value is None else format(value, fmt) + suffix


def format_table(document: Mapping[str, Any]) -> str:
    """A Markdown table of a results document (runs in order, then the oracle)."""
    lines = [
        "| policy | energy kWh | vs default | gap closed | slowdown mean / p99 % "
        "| pending mean / p99 s | boots | scale-ups / downs | evicted / restarted | lost CPU h "
        "| unschedulable | never scheduled |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = document["policies"]
    # A reference no scheduler can be (hindsight) goes last, beside the oracle bound.
    for name in sorted(rows, key=is_reference):
        row = rows[name]
        lines.append(
            f"| {name} | {_cell(row['energy_kwh'], '.2f')} "
            f"| {_cell(row['energy_vs_default_pct'], '+.1f', ' %')} "
            f"| {_cell(row['gap_closed_pct'], '.1f', ' %')} "
            f"| {_cell(row['slowdown_mean'], '.2f')} / {_cell(row['slowdown_p99'], '.2f')} "
            f"| {_cell(row['pending_seconds_mean'], '.1f')} / {_cell(row['pending_seconds_p99'], '.0f')} "
            f"| {_cell(row['boots'], 'g')} "
            f"| {_cell(row['scale_ups'], 'g')} / {_cell(row['scale_downs'], 'g')} "
            f"| {_cell(row.get('evictions'), 'g')} / {_cell(row['restarted_pods'], 'g')} "
            f"| {_cell(row.get('lost_cpu_hours'), '.2f')} | {_cell(row['unschedulable'], 'g')} "
            f"| {_cell(row['never_scheduled'], 'g')} |"
        )
    lines.append(
        f"| oracle bound | {document['oracle']['energy_kwh']:.2f} | | 100 % | | | | | | | | |"
    )
    return "\n".join(lines)


@dataclass(frozen=True)
class Target:
    target: str
    measured: str
    met: bool

    def as_json(self) -> dict[str, Any]:
        return {"target": self.target, "measured": self.measured, "met": self.met}


def has_headline(document: Mapping[str, Any]) -> bool:
    return all(k in document["policies"] for k in (BASELINE, KUBEJOULE, EXTENDER, PACKING))


def headline_targets(document: Mapping[str, Any]) -> list[Target]:
    """Each issue-14 target, measured on a results document holding the headline runs."""
    rows = document["policies"]
    base = rows[BASELINE]
    targets: list[Target] = []
    for key, saving in SAVING_TARGETS:
        row = rows[key]
        less = -row["energy_vs_default_pct"]
        targets.append(
            Target(
                f"{key} ≥ {saving:g} % less energy than {BASELINE}",
                f"{_less(less)} ({row['energy_kwh']:.2f} vs {base['energy_kwh']:.2f} kWh; "
                f"{row['gap_closed_pct']:.1f} % of the oracle gap)",
                less >= saving,
            )
        )
    for key, _ in SAVING_TARGETS:
        row = rows[key]
        margin = row["slowdown_mean"] - base["slowdown_mean"]
        targets.append(
            Target(
                f"{key} mean slowdown ≤ {BASELINE}'s + {SLOWDOWN_MARGIN_POINTS:g} points",
                f"{row['slowdown_mean']:.2f} % vs {base['slowdown_mean']:.2f} % ({margin:+.2f} points)",
                margin <= SLOWDOWN_MARGIN_POINTS + 1e-9,
            )
        )
        limit = base["pending_seconds_p99"] * (1 + PENDING_P99_MARGIN)
        targets.append(
            Target(
                f"{key} p99 pending ≤ {BASELINE}'s + {PENDING_P99_MARGIN:.0%}",
                f"{row['pending_seconds_p99']:.1f} s vs {base['pending_seconds_p99']:.1f} s",
                row["pending_seconds_p99"] <= limit + 1e-9,
            )
        )
    worst = max(max(r["never_scheduled"] for r in row["runs"]) for row in rows.values())
    targets.append(
        Target(
            "zero pods left unscheduled (every run)",
            f"at most {worst} never scheduled in a run",
            worst == 0,
        )
    )
    ours, packing = rows[KUBEJOULE]["energy_kwh"], rows[PACKING]["energy_kwh"]
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
