"""The ablation's table and targets (rl/evaluation/ablation.py builds the document): per row the
sums over cases, against the baseline and bin packing with the paired 95 % intervals over seeds
(issue 33), and issue 23's targets for each recommended setup, "met" only when the interval
clears the target."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rl.evaluation.ablation import (
    BASELINE,
    OPERATORS,
    PACKING,
    RECOMMENDED,
    SAVING_VS_BASELINE_PCT,
    SAVING_VS_PACKING_PCT,
    SLOWDOWN_MARGIN_POINTS,
)
from rl.evaluation.ablation_rows import AblationDocument, ablation_of
from rl.evaluation.paired import Interval, format_interval


def _cell(value: object, fmt: str, suffix: str = "") -> str:
    return "—" if value is None else format(value, fmt) + suffix


def _vs(pct: float | None, interval: Interval | None) -> str:
    """The difference of the sums, and the paired 95 % interval over seeds where there is one."""
    cell = _cell(pct, "+.1f", " %")
    if interval and interval.low is not None and interval.high is not None:
        cell += f" [{interval.low:+.1f}, {interval.high:+.1f}]"
    return cell


# An ablation document: its records, or its JSON (read back as records).
Document = AblationDocument | Mapping[str, Any]


def ablation_table(document: Document) -> str:
    """The Markdown table of an ablation document (rows in order, then the oracle bound)."""
    doc = ablation_of(document)
    lines = [
        "| row | entry | energy kWh | vs baseline | vs bin packing | gap closed "
        "| worst case vs baseline | slowdown mean % | evictions | never scheduled |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in doc.rows:
        entry = row.entry.replace("{profiles}/", "")
        lines.append(
            f"| {row.label} | `{entry}` | {row.energy_kwh:.2f} "
            f"| {_vs(row.vs_baseline_pct, row.vs_baseline_interval_pct)} "
            f"| {_vs(row.vs_packing_pct, row.vs_packing_interval_pct)} "
            f"| {_cell(row.gap_closed_pct, '.1f', ' %')} "
            f"| {_cell(row.worst_case_vs_baseline_pct, '+.1f', ' %')} "
            f"| {_cell(row.slowdown_mean, '.2f')} | {row.evictions:g} "
            f"| {row.never_scheduled:g} |"
        )
    lines.append(f"| oracle bound | | {doc.oracle_kwh:.2f} | | | 100 % | | | | |")
    return "\n".join(lines)


def ablation_targets(document: Document) -> list[tuple[str, str, bool]]:
    """Issue 23's targets for each recommended setup the ablation ran, as (target, measured,
    met): ≥ 25 % less energy than the baseline and ≥ 5 % less than both bin-packing setups,
    mean slowdown ≤ the baseline's + 2 points, no more evictions than the baseline's, no pod
    never scheduled. Empty without the baseline."""
    rows = {r.entry: r for r in ablation_of(document).rows}
    base = rows.get(BASELINE)
    if base is None:
        return []
    targets = []
    for entry in RECOMMENDED:
        row = rows.get(entry)
        if row is None:
            continue
        entry = entry.replace("{profiles}/", "")  # noqa: PLW2901 (the name as the table shows it)
        less = -_number(row.vs_baseline_pct)
        interval = row.vs_baseline_interval_pct
        targets.append((
            f"{entry} ≥ {SAVING_VS_BASELINE_PCT:g} % less energy than {BASELINE}",
            f"{_less(less)} ({row.energy_kwh:.2f} vs {base.energy_kwh:.2f} kWh"
            + (f"; paired {format_interval(interval, '+.1f', '%')}" if interval else "") + ")",
            _clears(interval, -SAVING_VS_BASELINE_PCT, less >= SAVING_VS_BASELINE_PCT),
        ))
        for peer in (PACKING, OPERATORS):
            other = rows.get(peer)
            if other is None:
                continue
            saving = 100.0 * (other.energy_kwh - row.energy_kwh) / other.energy_kwh
            interval = row.vs_packing_interval_pct if peer == PACKING else None
            targets.append((
                f"{entry} ≥ {SAVING_VS_PACKING_PCT:g} % less energy than {peer}",
                f"{_less(saving)} ({row.energy_kwh:.2f} vs {other.energy_kwh:.2f} kWh"
                + (f"; paired {format_interval(interval, '+.1f', '%')}" if interval else "") + ")",
                _clears(interval, -SAVING_VS_PACKING_PCT, saving >= SAVING_VS_PACKING_PCT),
            ))
        if row.slowdown_mean is not None and base.slowdown_mean is not None:
            margin = row.slowdown_mean - base.slowdown_mean
            targets.append((
                f"{entry} mean slowdown ≤ {BASELINE}'s + {SLOWDOWN_MARGIN_POINTS:g} points",
                f"{row.slowdown_mean:.2f} % vs {base.slowdown_mean:.2f} % ({margin:+.2f} points)",
                margin <= SLOWDOWN_MARGIN_POINTS + 1e-9,
            ))
        targets.append((
            f"{entry} evictions ≤ {BASELINE}'s (cluster-autoscaler alone)",
            f"{row.evictions:g} vs {base.evictions:g}",
            row.evictions <= base.evictions,
        ))
        for axis, found in (row.vs_packing_axes or {}).items():
            targets.append((
                f"{entry} {axis} no worse than {PACKING}'s (paired, upper end ≤ 0)",
                format_interval(found, "+.2f"),
                found.high is not None and found.high <= 0,
            ))
        targets.append((
            f"{entry} pods never scheduled: none",
            f"{row.never_scheduled:g}",
            row.never_scheduled == 0,
        ))
    return targets


def _clears(interval: Interval | None, limit_pct: float, point_met: bool) -> bool:
    """Met only when the paired interval's upper end is ≤ `limit_pct` (issue 33); a document
    without intervals (older, or one seed) is judged on the point estimate."""
    if interval is None:
        return point_met
    return interval.high is not None and interval.high <= limit_pct


def _number(value: float | None) -> float:
    """A difference the targets need (the baseline ran, so it has one)."""
    if value is None:
        raise ValueError("an ablation row lacks its difference from the baseline")
    return value


def _less(pct: float) -> str:
    """A saving as "N % less", a loss as "N % more"."""
    return f"{abs(pct):.1f} % {'less' if pct >= 0 else 'more'}"


def targets_table(targets: Sequence[tuple[str, str, bool]]) -> str:
    lines = ["| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {'met' if ok else 'MISSED'} |" for t, m, ok in targets]
    return "\n".join(lines)


def write_ablation(document: AblationDocument, out: str, report: str | None) -> None:
    """The ablation's JSON to `out`, its table (and targets) to `report` and stdout."""
    Path(out).write_text(json.dumps(document.as_json(), indent=2) + "\n")
    table = ablation_table(document)
    targets = ablation_targets(document)
    if targets:
        table += "\n\n" + targets_table(targets)
    if report:
        Path(report).write_text(table + "\n")
    print(table)
