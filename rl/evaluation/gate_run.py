"""Running the promotion gate (`kubejoule-rl gate`): load the held-out cases, run the candidate
and every baseline on each, hand each pairing to `rl.evaluation.gate.evaluate` and the lot to
`rl.evaluation.gate.combine`.

The baselines default to the strongest scorer we ship and the strongest simple peer:
`kubejoule` (the policy of the standalone scheduler's default profile, `kubejoule_profile()`, so
the gate always measures against whatever that profile is when it runs) and `mostallocated`
(bin packing). A candidate is promoted only if it passes against both. Each policy runs once per
case, however many pairings use it.

A held-out directory holds one folder per case, each with `nodes.yaml` and `trace.csv` and
optionally `daemonsets.yaml` (else the bundled DaemonSets, as `kubejoule-rl benchmark` uses) and
`pdbs.yaml` (the trace's PodDisruptionBudgets). Every side runs the same case with the same
settings and the same tie-breaking seed.

Semantics: cluster-autoscaler's as it ships (rl/simulation/autoscaler/scan.py, rl/simulation/autoscaler/scaledown.py: utilization
scale-down at 0.5, the cool-downs, drains that respect the workloads), with the `kubejoule`
expander for every side — only powered-on nodes are candidates, Pending pods make the autoscaler
boot nodes (`boot_seconds`), nodes unneeded for `scale_down_unneeded_s` go — DaemonSet pods on
every node, and telemetry as the scheduler sees it (5 s samples and refreshes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl.evaluation.benchmark import JOULES_PER_KWH, run_once
from rl.evaluation.gate import CaseResult, combine, evaluate
from rl.evaluation.parallel import run_tasks
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.cluster import ClusterModel
from rl.simulation.engine.telemetry import TelemetryModel
from rl.simulation.engine.workloads import WorkloadModel
from rl.simulation.traces.scenario import (
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
from scheduler.domain.cluster_defaults import BOOT_SECONDS, SCALE_DOWN_UNNEEDED_S

DEFAULT_SCALE_DOWN_UNNEEDED_S = SCALE_DOWN_UNNEEDED_S
DEFAULT_BOOT_SECONDS = BOOT_SECONDS
EXPANDER = "kubejoule"
# The shipped default profile's policy, then bin packing (module docstring).
SHIPPED_DEFAULT_POLICY = "kubejoule"
DEFAULT_BASELINES = (SHIPPED_DEFAULT_POLICY, "mostallocated")


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


@dataclass(frozen=True)
class GatePlan:
    """What the gate runs: each case with each side, with the same settings and seed."""

    candidate: str
    baselines: tuple[str, ...]
    cases: tuple[HeldOutCase, ...]
    scale_down_unneeded_s: float = DEFAULT_SCALE_DOWN_UNNEEDED_S
    boot_seconds: float = DEFAULT_BOOT_SECONDS
    seed: int = 0

    @property
    def policies(self) -> tuple[str, ...]:
        """The candidate, then each baseline, each once."""
        return policies_of(self.candidate, self.baselines)

    @property
    def tasks(self) -> list[tuple[int, str]]:
        """(case index, policy): case by case, the candidate then each baseline."""
        return [(i, p) for i in range(len(self.cases)) for p in self.policies]

    @property
    def semantics(self) -> str:
        """The cluster rules every side ran under, read from the model the gate builds
        (`gate_cluster`), so the record cannot drift from what ran."""
        cluster = gate_cluster((), self.scale_down_unneeded_s, self.boot_seconds)
        a, telemetry = cluster.autoscaler, cluster.telemetry
        assert a is not None and telemetry is not None
        threshold = ("only empty nodes" if a.utilization_threshold is None
                     else f"utilization threshold {a.utilization_threshold:g}")
        soft_taint = (f", the nodes found unneeded soft-tainted (DeletionCandidateOfClusterAutoscaler, "
                      f"PreferNoSchedule), up to {a.max_bulk_soft_taint_count} taint changes a loop"
                      if a.max_bulk_soft_taint_count > 0 else ", no soft taint on unneeded nodes")
        return (
            f"cluster-autoscaler's shipped rules with the {a.expander} expander for every side: "
            f"a loop every {a.scan_interval_s:g} s"
            f"{', and at once on an unschedulable pod and after a scale-up or scale-down' if a.frequent_loops_enabled else ''}"
            f" (none scaling up for pods under {a.new_pod_wait_s:g} s old), boot {a.boot_seconds:g} s; scale-down after "
            f"{a.scale_down_unneeded_s:g} s unneeded ({threshold}, DaemonSet pods "
            f"{'ignored' if a.ignore_daemonsets_utilization else 'counted'}), delay after add "
            f"{a.delay_after_add_s:g} s, after delete {a.delay_after_delete_s:g} s, after failure "
            f"{a.delay_after_failure_s:g} s, up to {a.max_scale_down_parallelism} empty nodes at once, "
            f"{a.max_drain_parallelism} drain at a time through the cases' PDBs, a node found unremovable not "
            f"considered again for {a.unremovable_recheck_s:g} s"
            f"{soft_taint}; DaemonSets on every "
            f"node; telemetry sampled every {telemetry.sample_seconds:g} s, refreshed every "
            f"{telemetry.refresh_seconds:g} s"
        )


@dataclass(frozen=True)
class SideResult:
    """One side's run of one case: what the verdict reads of it."""

    kwh: float
    never_scheduled: int
    pending_s: tuple[float, ...]  # per pod: arrival to first start
    slowdowns: tuple[float, ...]  # per pod, as a fraction


def run_side(plan: GatePlan, task: tuple[int, str]) -> SideResult:
    """One case run by one side (a pool worker's `work`)."""
    case = plan.cases[task[0]]
    cluster = gate_cluster(case.daemonsets, plan.scale_down_unneeded_s, plan.boot_seconds, case.pdbs)
    result = run_once(case.nodes, case.pods, task[1], plan.seed, cluster=cluster)
    return SideResult(
        result.energy_joules / JOULES_PER_KWH,
        result.never_scheduled,
        tuple(o.pending_s for o in result.outcomes),
        tuple(result.slowdowns()),
    )


def policies_of(candidate: str, baselines: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([candidate, *baselines]))


def gate_document(
    plan: Mapping[str, Any], names: Sequence[str], sides: Sequence[SideResult]
) -> dict[str, Any]:
    """gate.json's document from every case's sides (in `GatePlan.tasks` order) and the plan's
    description (`plan_description`): the candidate paired with each baseline, the verdict
    over all the pairings."""
    baselines = list(dict.fromkeys(plan["baselines"]))
    policies = policies_of(plan["candidate"], baselines)
    if len(sides) != len(names) * len(policies):
        raise ValueError(f"{len(sides)} runs for {len(names)} cases × {len(policies)} policies")
    by_case = [
        dict(zip(policies, sides[k * len(policies) : (k + 1) * len(policies)], strict=True))
        for k in range(len(names))
    ]

    def paired(baseline: str) -> list[CaseResult]:
        return [
            CaseResult(
                name=name,
                candidate_kwh=runs[plan["candidate"]].kwh,
                baseline_kwh=runs[baseline].kwh,
                candidate_unschedulable=runs[plan["candidate"]].never_scheduled,
                baseline_unschedulable=runs[baseline].never_scheduled,
                candidate_pending_s=runs[plan["candidate"]].pending_s,
                baseline_pending_s=runs[baseline].pending_s,
                candidate_slowdowns=runs[plan["candidate"]].slowdowns,
                baseline_slowdowns=runs[baseline].slowdowns,
            )
            for name, runs in zip(names, by_case, strict=True)
        ]

    document = combine({b: evaluate(paired(b)) for b in baselines})
    document.update({k: plan[k] for k in ("candidate", "seed", "semantics", "heldout")})
    return document


def plan_description(plan: GatePlan, heldout: str) -> dict[str, Any]:
    """What every shard of the gate shares (rl/evaluation/shards.py)."""
    return {
        "candidate": plan.candidate,
        "baselines": list(plan.baselines),
        "seed": plan.seed,
        "semantics": plan.semantics,
        "heldout": heldout,
        "cases": [case.name for case in plan.cases],
        "tasks": [[plan.cases[i].name, policy] for i, policy in plan.tasks],
    }


def run_gate(
    plan: GatePlan,
    heldout: str,
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """gate.json's document: every policy on every case, in `jobs` processes, then the
    verdict."""
    tasks = plan.tasks

    def done(position: int, side: SideResult) -> None:
        if progress is not None:
            progress(plan.cases[tasks[position][0]].name)

    sides = run_tasks(run_side, plan, tasks, jobs, done)
    return gate_document(plan_description(plan, heldout), [c.name for c in plan.cases], sides)


def merged_gate(plan: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """gate.json's document from the joined runs of a gate's shards."""
    from rl.evaluation.shards import ShardError

    try:
        sides = [
            SideResult(
                r["kwh"], r["never_scheduled"], tuple(r["pending_s"]), tuple(r["slowdowns"])
            )
            for r in runs
        ]
        return gate_document(plan, plan["cases"], sides)
    except (KeyError, TypeError, ValueError) as exc:
        raise ShardError(f"plan or runs: not a gate shard's: {exc}") from exc


def write_gate(document: Mapping[str, Any], out: str, report: str | None) -> None:
    """gate.json (and the Markdown report), and the verdict on stdout."""
    import json

    from rl.evaluation.gate import report_markdown

    Path(out).write_text(json.dumps(document, indent=2) + "\n")
    if report:
        Path(report).write_text(report_markdown(dict(document)))
    print(f"{document['verdict']} ({document['candidate']})")
    for entry in document["comparisons"]:
        reasons = "; ".join(entry["reasons"]) or "every criterion holds"
        print(
            f"  against {entry['baseline']}: {entry['verdict']}, mean relative energy difference "
            f"{100 * entry['mean_relative_difference']:+.2f} % (95 % upper bound "
            f"{100 * entry['ci_upper']:+.2f} %), p = {entry['p_value']:.4g}; {reasons}"
        )


def candidate_policy(candidate: str) -> str:
    """A model file becomes the `learned:PATH` policy; anything else is a policy name."""
    return f"learned:{candidate}" if Path(candidate).is_file() else candidate
