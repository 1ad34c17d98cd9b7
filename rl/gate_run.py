"""Running the promotion gate (`kubejoule-rl gate`): load the held-out cases, run both sides on
each, hand the paired results to `rl.gate.evaluate`.

A held-out directory holds one folder per case, each with `nodes.yaml` and `trace.csv` (and
optionally `daemonsets.yaml`, refused until the simulator models DaemonSet pods). Both sides run
the same case with the same settings and the same tie-breaking seed.

Semantics: nodes power off after `power_off_after_s` empty and boot in `boot_seconds` (the
bundled `heterogeneous-poweroff` rules). The autoscaler semantics of the benchmark issue (off
nodes invisible, Pending pods, the `kubejoule` expander) replace these when the simulator has
them; `semantics` in gate.json says which rules were used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl.benchmark import JOULES_PER_KWH, run_once
from rl.gate import CaseResult, evaluate
from rl.scenario import NodeSpec, PodSpec, ScenarioError, load_node_groups, load_trace
from rl.simulator import PowerOffModel, SimResult

DEFAULT_POWER_OFF_AFTER_S = 600.0
DEFAULT_BOOT_SECONDS = 120.0


@dataclass(frozen=True)
class HeldOutCase:
    name: str
    nodes: list[NodeSpec]
    pods: list[PodSpec]


def load_cases(directory: str | Path) -> list[HeldOutCase]:
    """Every case folder of `directory`, sorted by name; ScenarioError for a bad one."""
    root = Path(directory)
    if not root.is_dir():
        raise ScenarioError(f"{root}: not a directory")
    cases = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        nodes_file, trace_file = folder / "nodes.yaml", folder / "trace.csv"
        if not nodes_file.is_file() or not trace_file.is_file():
            raise ScenarioError(f"{folder}: a case needs nodes.yaml and trace.csv")
        if (folder / "daemonsets.yaml").exists():
            raise ScenarioError(
                f"{folder}: daemonsets.yaml is not supported yet (the simulator has no DaemonSet pods)"
            )
        try:
            case = HeldOutCase(folder.name, load_node_groups(nodes_file), load_trace(trace_file))
        except ScenarioError as exc:
            raise ScenarioError(f"{folder.name}: {exc}") from exc
        if not case.pods:
            raise ScenarioError(f"{folder.name}: the trace has no pods")
        cases.append(case)
    if not cases:
        raise ScenarioError(f"{root}: no case folders")
    return cases


def _case_result(name: str, candidate: SimResult, baseline: SimResult) -> CaseResult:
    def pending(result: SimResult) -> tuple[float, ...]:
        return tuple(o.start_s - o.submit_s for o in result.outcomes)

    return CaseResult(
        name=name,
        candidate_kwh=candidate.energy_joules / JOULES_PER_KWH,
        baseline_kwh=baseline.energy_joules / JOULES_PER_KWH,
        candidate_unschedulable=candidate.never_scheduled,
        baseline_unschedulable=baseline.never_scheduled,
        candidate_pending_s=pending(candidate),
        baseline_pending_s=pending(baseline),
        candidate_slowdowns=tuple(candidate.slowdowns()),
        baseline_slowdowns=tuple(baseline.slowdowns()),
    )


def run_gate(
    candidate: str,
    baseline: str,
    cases: Sequence[HeldOutCase],
    power_off: PowerOffModel,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """gate.json's document: both policies on every case, then the verdict."""
    results = []
    for case in cases:
        runs = [
            run_once(case.nodes, case.pods, policy, seed, power_off)
            for policy in (candidate, baseline)
        ]
        results.append(_case_result(case.name, *runs))
        if progress is not None:
            progress(case.name)
    document = evaluate(results)
    document.update(
        {
            "candidate": candidate,
            "baseline": baseline,
            "seed": seed,
            "semantics": (
                f"power-off after {power_off.after_seconds:g} s empty, boot {power_off.boot_seconds:g} s"
            ),
        }
    )
    return document


def candidate_policy(candidate: str) -> str:
    """A model file becomes the `learned:PATH` policy; anything else is a policy name."""
    return f"learned:{candidate}" if Path(candidate).is_file() else candidate


def add_parser(sub: Any) -> None:
    gate = sub.add_parser(
        "gate",
        help="promotion gate: a candidate against the baseline on held-out cases",
        description="Exit 0 with a verdict (promote or refuse) in --out; 2 for bad input.",
    )
    gate.add_argument("--candidate", required=True, help="model checkpoint (PATH) or policy name")
    gate.add_argument("--baseline", default="heuristic", help="policy name (default heuristic)")
    gate.add_argument(
        "--heldout", required=True, help="directory of case folders (nodes.yaml, trace.csv)"
    )
    gate.add_argument("--out", required=True, help="gate.json path")
    gate.add_argument("--report", help="gate.md path (Markdown report)")
    gate.add_argument("--seed", type=int, default=0, help="tie-breaking seed for both sides (0)")
    gate.add_argument(
        "--power-off-after",
        type=float,
        default=DEFAULT_POWER_OFF_AFTER_S,
        help=f"power a node off after it is empty this long (default {DEFAULT_POWER_OFF_AFTER_S:g} s)",
    )
    gate.add_argument(
        "--boot-seconds",
        type=float,
        default=DEFAULT_BOOT_SECONDS,
        help=f"boot time of a powered-off node (default {DEFAULT_BOOT_SECONDS:g} s)",
    )
    gate.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def command(args: Any) -> int:
    import json
    import sys

    from rl.gate import report_markdown
    from rl.policies import make_policy
    from rl.progress import ProgressBar

    candidate = candidate_policy(args.candidate)
    try:
        power_off = PowerOffModel(args.power_off_after, args.boot_seconds)
        cases = load_cases(args.heldout)
        for policy in (candidate, args.baseline):  # refuse a bad name before any simulation
            make_policy(policy, cases[0].nodes, power_off)
        bar = None if args.no_progress else ProgressBar(len(cases), "gate")
        document = run_gate(
            candidate,
            args.baseline,
            cases,
            power_off,
            args.seed,
            progress=(lambda name: bar.advance(1, name)) if bar is not None else None,
        )
        if bar is not None:
            bar.close()
    except (ScenarioError, ValueError, OSError) as exc:
        print(f"kubejoule-rl gate: {exc}", file=sys.stderr)
        return 2
    document["heldout"] = str(args.heldout)
    Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
    if args.report:
        Path(args.report).write_text(report_markdown(document))
    reasons = "; ".join(document["reasons"]) or "every criterion holds"
    print(
        f"{document['verdict']}: mean relative energy difference "
        f"{100 * document['mean_relative_difference']:+.2f} % "
        f"(95 % upper bound {100 * document['ci_upper']:+.2f} %), p = {document['p_value']:.4g}; "
        f"{reasons}"
    )
    return 0
