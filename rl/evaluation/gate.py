"""The promotion gate: a candidate policy replaces the baseline only if it wins on cases it never
saw, by a margin the statistics support, without hurting the pods.

Over paired runs (the same held-out case, the same settings, the same tie-breaking seed for both
sides) it promotes only if every criterion holds:

1. the candidate leaves zero pods unscheduled (never run) in every case;
2. a one-sided Wilcoxon signed-rank test of per-case energy (candidate < baseline) gives p < 0.05
   (`scipy.stats.wilcoxon`, exact for small samples without ties, else the normal approximation);
3. the paired-bootstrap 95 % upper bound of the mean relative energy difference
   `mean((E_cand − E_base) / E_base)` is below −1 % (cases resampled with replacement, 10,000
   resamples, a fixed seed; the bound is the 95th percentile: a one-sided 95 % bound);
4. p95 pending time (arrival to start, over every pod of every case) and mean slowdown are within
   +5 % of the baseline's (plus 1 s / 0.001 absolute, so two zeros compare equal);
5. no single case uses more than 3 % more energy than the baseline.

The candidate is measured against several baselines in one run (`kubejoule-rl gate`: the
shipped default profile and bin packing): `evaluate` judges one pairing, `combine` promotes only
if every pairing does. A refusal is a result, not an error: the report is written either way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

GATE_SCHEMA = "kubejoule.gate/v2"
P_VALUE_MAX = 0.05
CI_UPPER_MAX = -0.01
SLO_TOLERANCE = 0.05
PENDING_SLACK_SECONDS = 1.0
SLOWDOWN_SLACK = 0.001
WORST_CASE_MAX = 0.03
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 12
MIN_CASES = 6  # the one-sided Wilcoxon test cannot reach p < 0.05 with fewer pairs


@dataclass(frozen=True)
class CaseResult:
    """One held-out case run by both sides."""

    name: str
    candidate_kwh: float
    baseline_kwh: float
    candidate_unschedulable: int  # pods that never ran
    baseline_unschedulable: int
    candidate_pending_s: tuple[float, ...]  # per pod: start − submit
    baseline_pending_s: tuple[float, ...]
    candidate_slowdowns: tuple[float, ...]  # per pod, as a fraction
    baseline_slowdowns: tuple[float, ...]

    @property
    def relative_difference(self) -> float:
        return (self.candidate_kwh - self.baseline_kwh) / self.baseline_kwh


def _p95(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(1, math.ceil(0.95 * len(ordered))) - 1]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def wilcoxon_less(candidate: Sequence[float], baseline: Sequence[float]) -> float:
    """One-sided p-value that the candidate's values are lower (paired); 1.0 when all equal."""
    from scipy.stats import wilcoxon

    diffs = np.asarray(candidate, dtype=float) - np.asarray(baseline, dtype=float)
    if not np.any(diffs != 0):
        return 1.0
    return float(wilcoxon(diffs, alternative="less").pvalue)


def bootstrap_upper(values: Sequence[float], seed: int = BOOTSTRAP_SEED) -> float:
    """One-sided 95 % upper bound of the mean: the 95th percentile of resampled means."""
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(data), size=(BOOTSTRAP_RESAMPLES, len(data)))
    return float(np.quantile(data[picks].mean(axis=1), 0.95))


def evaluate(cases: Sequence[CaseResult]) -> dict[str, Any]:
    """The verdict of one pairing (candidate against one baseline) and its numbers."""
    if len(cases) < MIN_CASES:
        raise ValueError(f"the gate needs at least {MIN_CASES} cases, got {len(cases)}")
    relative = [c.relative_difference for c in cases]
    p_value = wilcoxon_less([c.candidate_kwh for c in cases], [c.baseline_kwh for c in cases])
    ci_upper = bootstrap_upper(relative)
    mean_relative = _mean(relative)
    pending = {
        side: _p95([p for c in cases for p in getattr(c, f"{side}_pending_s")])
        for side in ("candidate", "baseline")
    }
    slowdown = {
        side: _mean([s for c in cases for s in getattr(c, f"{side}_slowdowns")])
        for side in ("candidate", "baseline")
    }
    reasons = []
    unscheduled = sum(c.candidate_unschedulable for c in cases)
    if unscheduled:
        reasons.append(f"the candidate left {unscheduled} pod(s) unscheduled")
    if not p_value < P_VALUE_MAX:
        reasons.append(f"Wilcoxon signed-rank p = {p_value:.4g}, not < {P_VALUE_MAX}")
    if not ci_upper < CI_UPPER_MAX:
        reasons.append(
            f"bootstrap 95 % upper bound of the mean relative energy difference is "
            f"{100 * ci_upper:+.2f} %, not below {100 * CI_UPPER_MAX:+.0f} %"
        )
    pending_limit = pending["baseline"] * (1 + SLO_TOLERANCE) + PENDING_SLACK_SECONDS
    if pending["candidate"] > pending_limit:
        reasons.append(
            f"p95 pending time {pending['candidate']:.1f} s against the baseline's "
            f"{pending['baseline']:.1f} s (more than +{100 * SLO_TOLERANCE:.0f} %)"
        )
    slowdown_limit = slowdown["baseline"] * (1 + SLO_TOLERANCE) + SLOWDOWN_SLACK
    if slowdown["candidate"] > slowdown_limit:
        reasons.append(
            f"mean slowdown {100 * slowdown['candidate']:.2f} % against the baseline's "
            f"{100 * slowdown['baseline']:.2f} % (more than +{100 * SLO_TOLERANCE:.0f} %)"
        )
    worse = [c for c in cases if c.relative_difference > WORST_CASE_MAX]
    if worse:
        worst = max(worse, key=lambda c: c.relative_difference)
        reasons.append(
            f"{len(worse)} case(s) more than {100 * WORST_CASE_MAX:.0f} % worse "
            f"(worst: {worst.name}, {100 * worst.relative_difference:+.2f} %)"
        )
    return {
        "verdict": "refuse" if reasons else "promote",
        "reasons": reasons,
        "cases": [_case_json(c) for c in cases],
        "mean_relative_difference": mean_relative,
        "ci_upper": ci_upper,
        "p_value": p_value,
        "candidate_kwh_total": sum(c.candidate_kwh for c in cases),
        "baseline_kwh_total": sum(c.baseline_kwh for c in cases),
        "pending_p95_seconds": pending,
        "slowdown_mean": slowdown,
        "criteria": {
            "p_value_max": P_VALUE_MAX,
            "ci_upper_max": CI_UPPER_MAX,
            "slo_tolerance": SLO_TOLERANCE,
            "worst_case_max": WORST_CASE_MAX,
            "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
            "bootstrap_seed": BOOTSTRAP_SEED,
        },
    }


def _case_json(case: CaseResult) -> dict[str, Any]:
    data = asdict(case)
    for side in ("candidate", "baseline"):
        data[f"{side}_pending_p95_s"] = _p95(data.pop(f"{side}_pending_s"))
        data[f"{side}_slowdown_mean"] = _mean(data.pop(f"{side}_slowdowns"))
    data["relative_difference"] = case.relative_difference
    return data


def combine(comparisons: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """gate.json's verdict over every baseline (`comparisons`: baseline → `evaluate()`'s
    result): promote only if the candidate is promoted against each; a reason per failed
    criterion, named by its baseline."""
    if not comparisons:
        raise ValueError("the gate needs at least one baseline")
    reasons = [
        f"against {baseline}: {reason}"
        for baseline, result in comparisons.items()
        for reason in result["reasons"]
    ]
    return {
        "schema": GATE_SCHEMA,
        "verdict": "refuse" if reasons else "promote",
        "reasons": reasons,
        "baselines": list(comparisons),
        "comparisons": [{"baseline": b, **result} for b, result in comparisons.items()],
    }


def comparison(document: Mapping[str, Any], baseline: str) -> dict[str, Any]:
    """The pairing of `document` (gate.json) against `baseline`; KeyError if it has none."""
    for entry in document["comparisons"]:
        if entry["baseline"] == baseline:
            return dict(entry)
    raise KeyError(f"the gate did not compare against {baseline!r}")


def report_markdown(document: Mapping[str, Any]) -> str:
    """gate.md: the verdict, the reasons, the statistics per baseline, one line per case."""
    comparisons = document["comparisons"]
    baselines = [c["baseline"] for c in comparisons]
    names = ", ".join(f"`{b}`" for b in baselines)
    lines = [
        f"# Promotion gate: {document['verdict'].upper()}",
        "",
        f"candidate `{document.get('candidate', '?')}` against {names} on "
        f"{len(comparisons[0]['cases'])} held-out cases ({document.get('heldout', '?')}; "
        f"{document.get('semantics', '')}). It is promoted only if it passes against each.",
        "",
    ]
    lines += [f"- refused: {r}" for r in document["reasons"]] or ["- every criterion holds"]

    def row(label: str, cell: Any, needed: str = "") -> str:
        return f"| {label} | " + " | ".join(cell(c) for c in comparisons) + f" | {needed} |"

    lines += [
        "",
        "| statistic | " + " | ".join(f"vs `{b}`" for b in baselines) + " | needed |",
        "|---|" + "---:|" * len(baselines) + "---|",
        row("verdict", lambda c: f"**{c['verdict']}**"),
        row(
            "mean relative energy difference",
            lambda c: f"{100 * c['mean_relative_difference']:+.2f} %",
        ),
        row("bootstrap 95 % upper bound", lambda c: f"{100 * c['ci_upper']:+.2f} %", "< −1 %"),
        row("Wilcoxon signed-rank p (one-sided)", lambda c: f"{c['p_value']:.4g}", "< 0.05"),
        row(
            "energy, candidate / baseline (kWh, all cases)",
            lambda c: f"{c['candidate_kwh_total']:.2f} / {c['baseline_kwh_total']:.2f}",
        ),
        row(
            "p95 pending, candidate / baseline (s)",
            lambda c: (
                f"{c['pending_p95_seconds']['candidate']:.1f} / "
                f"{c['pending_p95_seconds']['baseline']:.1f}"
            ),
            "≤ +5 %",
        ),
        row(
            "mean slowdown, candidate / baseline",
            lambda c: (
                f"{100 * c['slowdown_mean']['candidate']:.2f} % / "
                f"{100 * c['slowdown_mean']['baseline']:.2f} %"
            ),
            "≤ +5 %",
        ),
        "",
        "| case | candidate kWh | "
        + " | ".join(f"`{b}` kWh | difference" for b in baselines)
        + " | unscheduled (candidate) |",
        "|---|---:|" + "---:|---:|" * len(baselines) + "---:|",
    ]
    for k, first in enumerate(comparisons[0]["cases"]):
        cells = [f"{first['candidate_kwh']:.3f}"]
        for c in comparisons:
            case = c["cases"][k]
            cells += [f"{case['baseline_kwh']:.3f}", f"{100 * case['relative_difference']:+.2f} %"]
        cells.append(str(first["candidate_unschedulable"]))
        lines.append(f"| {first['name']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
