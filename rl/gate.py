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

A refusal is a result, not an error: the report is written either way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

GATE_SCHEMA = "kubejoule.gate/v1"
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
    """The verdict and its numbers (gate.json's content minus the run description)."""
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
        "schema": GATE_SCHEMA,
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


def report_markdown(document: dict[str, Any]) -> str:
    """gate.md: the verdict, the reasons, the statistics, one line per case."""
    lines = [
        f"# Promotion gate: {document['verdict'].upper()}",
        "",
        f"candidate `{document.get('candidate', '?')}` against baseline "
        f"`{document.get('baseline', '?')}` on {len(document['cases'])} held-out cases "
        f"({document.get('heldout', '?')}; {document.get('semantics', '')}).",
        "",
    ]
    lines += [f"- refused: {r}" for r in document["reasons"]] or ["- every criterion holds"]
    pending, slowdown = document["pending_p95_seconds"], document["slowdown_mean"]
    lines += [
        "",
        "| statistic | value | needed |",
        "|---|---:|---|",
        f"| mean relative energy difference | {100 * document['mean_relative_difference']:+.2f} % | |",
        f"| bootstrap 95 % upper bound | {100 * document['ci_upper']:+.2f} % | < −1 % |",
        f"| Wilcoxon signed-rank p (one-sided) | {document['p_value']:.4g} | < 0.05 |",
        f"| energy, candidate / baseline (kWh, all cases) | "
        f"{document['candidate_kwh_total']:.2f} / {document['baseline_kwh_total']:.2f} | |",
        f"| p95 pending, candidate / baseline (s) | {pending['candidate']:.1f} / "
        f"{pending['baseline']:.1f} | ≤ +5 % |",
        f"| mean slowdown, candidate / baseline | {100 * slowdown['candidate']:.2f} % / "
        f"{100 * slowdown['baseline']:.2f} % | ≤ +5 % |",
        "",
        "| case | candidate kWh | baseline kWh | difference | unscheduled (cand/base) |",
        "|---|---:|---:|---:|---:|",
    ]
    for c in document["cases"]:
        lines.append(
            f"| {c['name']} | {c['candidate_kwh']:.3f} | {c['baseline_kwh']:.3f} | "
            f"{100 * c['relative_difference']:+.2f} % | "
            f"{c['candidate_unschedulable']}/{c['baseline_unschedulable']} |"
        )
    return "\n".join(lines) + "\n"
