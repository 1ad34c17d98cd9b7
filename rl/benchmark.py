"""The benchmark harness: every policy × seed on one cluster and trace, against the oracle bound.

Seeds drive the policies' random tie-breaking only; the trace is the same for every run.
Per policy the results are means over seeds:

* `energy_kwh`: cluster energy from t = 0 until the run's last pod finishes;
* `energy_vs_default_pct`: `100 × (E − E_default) / E_default` (negative = saves energy);
* `slowdown_mean`, `slowdown_p99`: per pod `100 × ((finish − submit) / duration − 1)`, in percent
  (0 = the pod started at once and ran at full speed); mean and nearest-rank 99th percentile;
* `unschedulable`: pods that found no feasible node at least once (they waited and were
  retried); `never_scheduled`: pods that never ran;
* `gap_closed_pct`: `100 × (E_default − E) / (E_default − E_oracle)`, the share of the largest
  possible saving the policy achieved (`rl/oracle.py`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rl.oracle import OracleBound, oracle_bound
from rl.policies import make_policy
from rl.progress import ProgressBar
from rl.scenario import NodeSpec, PodSpec
from rl.simulator import PowerOffModel, SimResult, Simulation

SCHEMA = "kubejoule.rl-benchmark/v1"
JOULES_PER_KWH = 3.6e6
PROGRESS_EVERY_DECISIONS = 100


def percentile_nearest_rank(values: Sequence[float], percent: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(percent / 100.0 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class RunSummary:
    policy: str
    seed: int
    energy_joules: float
    slowdown_mean_pct: float | None
    slowdown_p99_pct: float | None
    unschedulable: int
    never_scheduled: int
    boots: int
    end_s: float

    @classmethod
    def of(cls, policy: str, seed: int, result: SimResult) -> RunSummary:
        slowdowns = [100.0 * s for s in result.slowdowns()]
        return cls(
            policy=policy,
            seed=seed,
            energy_joules=result.energy_joules,
            slowdown_mean_pct=sum(slowdowns) / len(slowdowns) if slowdowns else None,
            slowdown_p99_pct=percentile_nearest_rank(slowdowns, 99.0),
            unschedulable=result.unschedulable,
            never_scheduled=result.never_scheduled,
            boots=result.boots,
            end_s=result.end_s,
        )


@dataclass
class BenchmarkResult:
    policies: list[str]
    seeds: int
    oracle: OracleBound
    runs: dict[str, list[RunSummary]] = field(default_factory=dict)
    # Cluster power over time of each policy's first seed: (time s, watts from then on).
    timelines: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def mean_energy_joules(self, policy: str) -> float:
        runs = self.runs[policy]
        return sum(r.energy_joules for r in runs) / len(runs)


def run_once(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    policy_name: str,
    seed: int,
    power_off: PowerOffModel | None = None,
    progress: ProgressBar | None = None,
    record_timeline: bool = False,
) -> SimResult:
    """One simulation of `policy_name` with tie-breaking seeded by `seed`."""
    sim = Simulation(nodes, pods, power_off, record_timeline=record_timeline)
    policy = make_policy(policy_name, nodes, power_off)
    policy.reset(sim.specs, random.Random(seed))
    decisions = 0
    while (decision := sim.next_decision()) is not None:
        sim.place(policy.choose(decision.info, decision.feasible, decision.now))
        decisions += 1
        if progress is not None and decisions % PROGRESS_EVERY_DECISIONS == 0:
            progress.advance(PROGRESS_EVERY_DECISIONS, f"{policy_name} seed {seed}")
    if progress is not None:
        progress.advance(decisions % PROGRESS_EVERY_DECISIONS, f"{policy_name} seed {seed}")
    return sim.result()


def run_benchmark(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    policies: Sequence[str],
    seeds: int = 1,
    power_off: PowerOffModel | None = None,
    show_progress: bool = False,
) -> BenchmarkResult:
    if seeds < 1:
        raise ValueError("seeds must be >= 1")
    for name in policies:  # fail before hours of simulation, not after
        make_policy(name, nodes, power_off)
    bound = oracle_bound(nodes, pods, power_off is not None)
    result = BenchmarkResult(list(policies), seeds, bound)
    progress = (
        ProgressBar(len(policies) * seeds * len(pods), "benchmark") if show_progress else None
    )
    for name in policies:
        result.runs[name] = []
        for seed in range(seeds):
            sim_result = run_once(
                nodes, pods, name, seed, power_off, progress, record_timeline=seed == 0
            )
            result.runs[name].append(RunSummary.of(name, seed, sim_result))
            if seed == 0:
                result.timelines[name] = sim_result.timeline
            if progress is not None:
                # Pods that never got a decision still count as done for the bar.
                progress.advance(sim_result.never_scheduled)
    if progress is not None:
        progress.close()
    return result


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def results_json(result: BenchmarkResult, scenario: dict[str, Any] | None = None) -> dict[str, Any]:
    """The results document (see the module docstring for every field)."""
    oracle_j = result.oracle.energy_joules
    default_j = result.mean_energy_joules("default") if "default" in result.runs else None
    policies: dict[str, Any] = {}
    for name in result.policies:
        runs = result.runs[name]
        energy_j = result.mean_energy_joules(name)
        vs_default = gap = None
        if default_j is not None and default_j > 0:
            vs_default = 100.0 * (energy_j - default_j) / default_j
            if default_j > oracle_j:
                gap = 100.0 * (default_j - energy_j) / (default_j - oracle_j)
        policies[name] = {
            "energy_kwh": _round(energy_j / JOULES_PER_KWH),
            "energy_vs_default_pct": _round(vs_default, 2),
            "slowdown_mean": _round(_mean([r.slowdown_mean_pct for r in runs]), 3),
            "slowdown_p99": _round(_mean([r.slowdown_p99_pct for r in runs]), 3),
            "unschedulable": _round(_mean([float(r.unschedulable) for r in runs]), 2),
            "gap_closed_pct": _round(gap, 2),
            "never_scheduled": _round(_mean([float(r.never_scheduled) for r in runs]), 2),
            "boots": _round(_mean([float(r.boots) for r in runs]), 2),
            "below_oracle": any(r.energy_joules < oracle_j for r in runs),
            "runs": [
                {
                    "seed": r.seed,
                    "energy_kwh": _round(r.energy_joules / JOULES_PER_KWH),
                    "slowdown_mean": _round(r.slowdown_mean_pct, 3),
                    "slowdown_p99": _round(r.slowdown_p99_pct, 3),
                    "unschedulable": r.unschedulable,
                    "never_scheduled": r.never_scheduled,
                    "boots": r.boots,
                    "end_s": _round(r.end_s, 3),
                }
                for r in runs
            ],
        }
    bound = result.oracle
    return {
        "schema": SCHEMA,
        "scenario": scenario or {},
        "seeds": result.seeds,
        "units": {
            "energy": "kWh",
            "slowdown": "percent: 100 × ((finish − submit) / duration − 1) per pod",
        },
        "policies": policies,
        "oracle": {
            "energy_kwh": _round(bound.energy_kwh),
            "idle_kwh": _round(bound.idle_joules / JOULES_PER_KWH),
            "work_core_hours": _round(bound.work_core_seconds / 3600.0, 3),
            "watts_per_core": _round(bound.watts_per_core, 4),
            "horizon_s": _round(bound.horizon_s, 3),
        },
    }


def _cell(value: Any, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def format_table(document: dict[str, Any]) -> str:
    """A Markdown table of a results document (policies in run order, then the oracle)."""
    lines = [
        "| policy | energy kWh | vs default | slowdown mean % | slowdown p99 % | unschedulable | gap closed |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in document["policies"].items():
        lines.append(
            f"| {name} | {_cell(row['energy_kwh'], '.2f')} | "
            f"{_cell(row['energy_vs_default_pct'], '+.1f')}{'' if row['energy_vs_default_pct'] is None else ' %'} | "
            f"{_cell(row['slowdown_mean'], '.2f')} | {_cell(row['slowdown_p99'], '.2f')} | "
            f"{_cell(row['unschedulable'], 'g')} | "
            f"{_cell(row['gap_closed_pct'], '.1f')}{'' if row['gap_closed_pct'] is None else ' %'} |"
        )
    lines.append(f"| oracle bound | {document['oracle']['energy_kwh']:.2f} | | | | | 100 % |")
    return "\n".join(lines)
