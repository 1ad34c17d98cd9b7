"""Fidelity: the same plan (policies × seeds, each seed's workload) in the simulator and on the
real control plane (`kubejoule-rl benchmark --on-cluster --fidelity`), side by side per policy,
means over seeds: energy (kWh), busy node-hours (Σ over nodes of the time a node ran at least
one workload pod), node-hours (nodes on or booting: what the autoscaler's nodes cost), pending
p99 (s), pods placed, and the autoscaler's scale-ups, scale-downs (nodes removed) and evictions
— and the cluster's difference from the
simulator in percent, `100 × (cluster − sim) / sim`. The real components are the reference:
where they differ, the simulator's model is what is questioned.

The simulated side runs as the cluster does (`without_agents`): KWOK nodes run no agent, so on
the cluster the extender and the standalone scheduler see every node's telemetry missing and
price each node from the curve their configuration names for it (rl/cluster/schedulers.py: at
the worst state the node could be in, "missing telemetry never wins"); the simulator is given
the same — its telemetry dropout at 1 and the nodes' curves in its schedulers' configuration
(`ClusterModel.configured_curves`) — so both sides decide on the same inputs. Without the
curves the simulated energy plugin scored every node 0 and the standalone scheduler's profile
ranked as MostAllocated alone, while the real one preferred the cheaper kind of node.

And its autoscaler waits for new pods as the real one does at the replay's speedup
(`as_run_on_cluster`): cluster-autoscaler scales up for no Pending pods all under 2 s old, and
those 2 s are of wall clock (core/static_autoscaler.go `unschedulablePodTimeBuffer`, a constant;
rl/simulation/autoscaler/trigger.py), so at N× they are 2·N s of the trace (60 s at 30×) where
the simulator's default is 2 s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rl.evaluation.benchmark import JOULES_PER_KWH, BenchmarkPlan, BenchmarkResult, RunSummary
from scheduler.domain.cluster_defaults import NEW_POD_WAIT_S

AXES = ("energy_kwh", "busy_node_hours", "node_hours", "pending_p99_s", "pods_placed", "scale_ups", "scale_downs",
        "evictions")


def without_agents(plan: BenchmarkPlan) -> BenchmarkPlan:
    """The plan with every node's agent missing and its curve configured, as on KWOK nodes
    (module docstring)."""
    return replace(plan, models={k: replace(m, telemetry_dropout=1.0, configured_curves=True)
                                 for k, m in plan.models.items()})


def as_run_on_cluster(plan: BenchmarkPlan, speedup: float) -> BenchmarkPlan:
    """The plan as the cluster runs it at `speedup` (module docstring): `without_agents`, and
    the autoscaler's wait for new pods 2 s of wall clock."""
    plan = without_agents(plan)
    return replace(plan, models={
        k: m if m.autoscaler is None else replace(m, autoscaler=replace(m.autoscaler, new_pod_wait_s=NEW_POD_WAIT_S * speedup))
        for k, m in plan.models.items()
    })


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def axes_of(runs: Sequence[RunSummary], pods: int) -> dict[str, float]:
    return {
        "energy_kwh": _mean([r.energy_joules / JOULES_PER_KWH for r in runs]),
        "busy_node_hours": _mean([r.busy_node_seconds / 3600.0 for r in runs]),
        "node_hours": _mean([r.node_seconds / 3600.0 for r in runs]),
        "pending_p99_s": _mean([r.pending_p99_s or 0.0 for r in runs]),
        "pods_placed": _mean([float(pods - r.never_scheduled) for r in runs]),
        "scale_ups": _mean([float(r.scale_ups) for r in runs]),
        "scale_downs": _mean([float(r.scale_downs) for r in runs]),
        "evictions": _mean([float(r.evictions) for r in runs]),
    }


def difference_pct(cluster: float, sim: float) -> float | None:
    if sim == 0:
        return 0.0 if cluster == 0 else None
    return 100.0 * (cluster - sim) / sim


def fidelity(sim: BenchmarkResult, cluster: BenchmarkResult, pods: int) -> dict[str, Any]:
    """Per policy that ran complete on the cluster: each axis in both and the difference."""
    rows: dict[str, Any] = {}
    for key in cluster.policies:
        if key not in cluster.runs or key not in sim.runs:
            continue
        seeds = {r.seed for r in cluster.runs[key]}
        rows[key] = _row(seeds, axes_of([r for r in sim.runs[key] if r.seed in seeds], pods),
                         axes_of(cluster.runs[key], pods))
    return rows


def refidelity(sim: BenchmarkResult, saved: Mapping[str, Any], pods: int) -> dict[str, Any]:
    """`fidelity` again with the simulator's side measured anew and the cluster's side as a
    saved document's `fidelity` rows recorded it (`--fidelity-of`): after a change to the model,
    without running the cluster again. ValueError when a saved row's policy is not simulated."""
    rows: dict[str, Any] = {}
    for key, row in saved.items():
        if key not in sim.runs:
            raise ValueError(f"--fidelity-of: {key} is not among the policies simulated")
        seeds = set(row["seeds"])
        rows[key] = _row(seeds, axes_of([r for r in sim.runs[key] if r.seed in seeds], pods),
                         {a: float(row["cluster"][a]) for a in AXES})
    return rows


def _row(seeds: set[int], on_sim: Mapping[str, float], on_cluster: Mapping[str, float]) -> dict[str, Any]:
    return {
        "seeds": sorted(seeds),
        "simulator": {a: round(v, 4) for a, v in on_sim.items()},
        "cluster": {a: round(v, 4) for a, v in on_cluster.items()},
        "difference_pct": {
            a: None if (d := difference_pct(on_cluster[a], on_sim[a])) is None else round(d, 2) for a in AXES
        },
    }


def format_fidelity(rows: dict[str, Any]) -> str:
    autoscaled = any(row["simulator"].get("scale_ups") or row["cluster"].get("scale_ups") for row in rows.values())
    head = ("| policy | energy kWh sim / cluster (Δ %) | busy node-h sim / cluster (Δ %) | node-h sim / cluster (Δ %) "
            "| pending p99 s sim / cluster | pods placed sim / cluster |")
    if autoscaled:
        head += " scale-ups / downs / evictions sim; cluster |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for key, row in rows.items():
        s, c, d = row["simulator"], row["cluster"], row["difference_pct"]

        def pct(axis: str, d: dict[str, float | None] = d) -> str:
            return "—" if d.get(axis) is None else f"{d[axis]:+.2f}"

        line = (
            f"| {key} | {s['energy_kwh']:.4f} / {c['energy_kwh']:.4f} ({pct('energy_kwh')}) | "
            f"{s['busy_node_hours']:.3f} / {c['busy_node_hours']:.3f} ({pct('busy_node_hours')}) | "
            f"{s.get('node_hours', 0.0):.3f} / {c.get('node_hours', 0.0):.3f} ({pct('node_hours')}) | "
            f"{s['pending_p99_s']:.1f} / {c['pending_p99_s']:.1f} | {s['pods_placed']:.0f} / {c['pods_placed']:.0f} |"
        )
        if autoscaled:
            line += (f" {s['scale_ups']:g} / {s['scale_downs']:g} / {s['evictions']:g}; "
                     f"{c['scale_ups']:g} / {c['scale_downs']:g} / {c['evictions']:g} |")
        lines.append(line)
    return "\n".join(lines)
