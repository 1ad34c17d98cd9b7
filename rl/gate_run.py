"""Running the promotion gate (`kubejoule-rl gate`): load the held-out cases, run both sides on
each, hand the paired results to `rl.gate.evaluate`.

A held-out directory holds one folder per case, each with `nodes.yaml` and `trace.csv` and
optionally `daemonsets.yaml` (else the bundled DaemonSets, as `kubejoule-rl benchmark` uses) and
`pdbs.yaml` (the trace's PodDisruptionBudgets). Both sides run the same case with the same
settings and the same tie-breaking seed.

Semantics: cluster-autoscaler's as it ships (rl/autoscaler.py, rl/scaledown.py: utilization
scale-down at 0.5, the cool-downs, drains that respect the workloads), with the `kubejoule`
expander for both sides — only powered-on nodes are candidates, Pending pods make the autoscaler
boot nodes (`boot_seconds`), nodes unneeded for `scale_down_unneeded_s` go — DaemonSet pods on
every node, and telemetry as the scheduler sees it (5 s samples and refreshes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl.autoscaler import AutoscalerModel
from rl.benchmark import JOULES_PER_KWH, run_once
from rl.cluster import ClusterModel
from rl.gate import CaseResult, evaluate
from rl.sampling import TelemetryModel
from rl.scenario import (
    DEFAULT_DAEMONSETS_FILE,
    DaemonSetSpec,
    NodeSpec,
    PdbSpec,
    PodSpec,
    ScenarioError,
    load_daemonsets,
    load_node_groups,
    load_pdbs,
    load_trace,
    scenario_path,
)
from rl.simulator import SimResult
from rl.workloads import WorkloadModel

DEFAULT_SCALE_DOWN_UNNEEDED_S = 600.0
DEFAULT_BOOT_SECONDS = 120.0
EXPANDER = "kubejoule"


@dataclass(frozen=True)
class HeldOutCase:
    name: str
    nodes: list[NodeSpec]
    pods: list[PodSpec]
    daemonsets: tuple[DaemonSetSpec, ...]
    pdbs: tuple[PdbSpec, ...] = ()


def gate_cluster(
    daemonsets: tuple[DaemonSetSpec, ...],
    scale_down_unneeded_s: float = DEFAULT_SCALE_DOWN_UNNEEDED_S,
    boot_seconds: float = DEFAULT_BOOT_SECONDS,
    pdbs: tuple[PdbSpec, ...] = (),
) -> ClusterModel:
    """The gate's cluster rules: autoscaler with the kubejoule expander, lagging telemetry."""
    return ClusterModel(
        autoscaler=AutoscalerModel(
            expander=EXPANDER,
            boot_seconds=boot_seconds,
            scale_down_unneeded_s=scale_down_unneeded_s,
        ),
        daemonsets=daemonsets,
        telemetry=TelemetryModel(),
        workloads=WorkloadModel(pdbs),
    )


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
        daemonsets_file = folder / "daemonsets.yaml"
        if not daemonsets_file.exists():
            daemonsets_file = scenario_path(DEFAULT_DAEMONSETS_FILE)
        pdbs_file = folder / "pdbs.yaml"
        try:
            pods = load_trace(trace_file)
            case = HeldOutCase(
                folder.name,
                load_node_groups(nodes_file),
                pods,
                tuple(load_daemonsets(daemonsets_file)),
                load_pdbs(pdbs_file, pods) if pdbs_file.exists() else (),
            )
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
        return tuple(o.pending_s for o in result.outcomes)  # arrival to first start

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
    scale_down_unneeded_s: float = DEFAULT_SCALE_DOWN_UNNEEDED_S,
    boot_seconds: float = DEFAULT_BOOT_SECONDS,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """gate.json's document: both policies on every case, then the verdict."""
    results = []
    for case in cases:
        cluster = gate_cluster(case.daemonsets, scale_down_unneeded_s, boot_seconds, case.pdbs)
        runs = [
            run_once(case.nodes, case.pods, policy, seed, cluster=cluster)
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
                f"cluster-autoscaler, {EXPANDER} expander, scale-down after "
                f"{scale_down_unneeded_s:g} s unneeded, boot {boot_seconds:g} s, DaemonSets, "
                "telemetry sampled every 5 s"
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
        "--scale-down-unneeded",
        type=float,
        default=DEFAULT_SCALE_DOWN_UNNEEDED_S,
        help="autoscaler: power a node off after it is unneeded this long "
        f"(default {DEFAULT_SCALE_DOWN_UNNEEDED_S:g} s)",
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
        cluster = gate_cluster((), args.scale_down_unneeded, args.boot_seconds)
        cases = load_cases(args.heldout)
        for policy in (candidate, args.baseline):  # refuse a bad name before any simulation
            make_policy(policy, cases[0].nodes, cluster.policy_power_off())
        bar = None if args.no_progress else ProgressBar(len(cases), "gate")
        document = run_gate(
            candidate,
            args.baseline,
            cases,
            args.scale_down_unneeded,
            args.boot_seconds,
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
