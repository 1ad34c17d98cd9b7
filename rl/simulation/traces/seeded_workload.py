"""Each seed's own workload, drawn from a scenario's trace (issue 33), so that a benchmark's seeds
are samples of the workload and not only of tie-breaking.

From one seed, reproducibly (`draw_workload`):

* **Arrivals jittered**: every arrival group — the pods of one workload that arrive at the same
  second (a Job's burst, a scale-up of a Deployment), or a pod without a workload alone — moves
  by its own offset, uniform in ±`ARRIVAL_JITTER_S`, never before 0; bursts stay bursts.
* **Durations resampled** from the trace's own distribution for the pod's workload: a pod's run
  time is the run time of a pod drawn at random from its workload (the pods of one Deployment,
  StatefulSet or Job). A workload with fewer than `MIN_SAMPLES` pods has no distribution of its
  own: its pods draw from the pool of every such pod of the same owner kind, and a pod alone of
  its kind from every pod of the trace (the stated fallbacks, reported in `WorkloadDraw.notes`
  and printed by the benchmark); a trace of one pod cannot vary, and that is an error
  (`CannotVary`), never a silent single sample.
* **The telemetry lag's phase**: the agents' sample grid is offset by a draw uniform in
  [0, sample seconds) (rl/simulation/engine/telemetry.py, `TelemetryModel.phase_s`).
* The tie-breaking is the seed itself (rl/evaluation/benchmark.py), as before.

Requests, usage, owners, priorities and workloads stay each pod's own; the pods are re-indexed
in arrival order. `--tie-seeds-only` (the old behaviour, an ablation) runs the trace as given for
every seed.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from rl.simulation.traces.trace import PodSpec, ScenarioError

ARRIVAL_JITTER_S = 300.0
MIN_SAMPLES = 2


class CannotVary(ScenarioError):
    """A trace with no distribution to draw a seed's workload from."""


@dataclass(frozen=True)
class WorkloadDraw:
    pods: tuple[PodSpec, ...]
    telemetry_phase_s: float  # the agents' sample grid offset, in [0, sample seconds)
    notes: tuple[str, ...] = ()  # fallbacks taken (the same for every seed)


def duration_pools(pods: Sequence[PodSpec]) -> tuple[dict[int, str], dict[str, list[float]], list[str]]:
    """Each pod's pool name, each pool's run times, and the fallbacks taken (module docstring):
    its workload's pods; else every pod of its owner kind without such a workload; else every
    pod of the trace. CannotVary when the trace has a single pod."""
    if len(pods) < MIN_SAMPLES:
        raise CannotVary(
            f"the trace cannot vary per seed: it has {len(pods)} pod(s), so run times have no "
            "distribution to resample (give a longer trace, or --tie-seeds-only to run it as "
            "given with tie-breaking seeds)"
        )
    by_workload: dict[str, int] = defaultdict(int)
    by_kind: dict[str, int] = defaultdict(int)
    for pod in pods:
        if pod.workload:
            by_workload[pod.workload] += 1
    for pod in pods:
        if by_workload.get(pod.workload or "", 0) < MIN_SAMPLES:
            by_kind[pod.owner_kind or "bare"] += 1
    pool_of: dict[int, str] = {}
    fallen: dict[str, int] = defaultdict(int)
    for pod in pods:
        kind = pod.owner_kind or "bare"
        if by_workload.get(pod.workload or "", 0) >= MIN_SAMPLES:
            pool_of[pod.index] = f"workload {pod.workload}"
        elif by_kind[kind] >= MIN_SAMPLES:
            pool_of[pod.index] = f"owner kind {kind}"
            fallen[f"{kind} pods of workloads with fewer than {MIN_SAMPLES} pods draw run times from every such {kind} pod"] += 1
        else:
            pool_of[pod.index] = "the trace"
            fallen[f"{kind} pods, alone of their kind, draw run times from every pod of the trace"] += 1
    pools: dict[str, list[float]] = defaultdict(list)
    for pod in pods:
        pools[pool_of[pod.index]].append(pod.duration_s)
    notes = [f"{count} {what}" for what, count in sorted(fallen.items())]
    return pool_of, dict(pools), notes


def draw_workload(
    pods: Sequence[PodSpec], seed: int, sample_seconds: float = 5.0
) -> WorkloadDraw:
    """Seed `seed`'s workload from the trace `pods` (module docstring). CannotVary when the
    trace has nothing to resample."""
    pool_of, pools, notes = duration_pools(pods)
    rng = random.Random(f"workload-{seed}")
    offsets: dict[tuple[str, float] | int, float] = {}
    drawn: list[PodSpec] = []
    for pod in pods:
        group: tuple[str, float] | int = (pod.workload, pod.submit_s) if pod.workload else pod.index
        if group not in offsets:
            offsets[group] = rng.uniform(-ARRIVAL_JITTER_S, ARRIVAL_JITTER_S)
        duration = rng.choice(pools[pool_of[pod.index]])
        drawn.append(
            replace(pod, submit_s=max(0.0, pod.submit_s + offsets[group]), duration_s=duration)
        )
    ordered = sorted(drawn, key=lambda p: (p.submit_s, p.index))
    phase = rng.uniform(0.0, sample_seconds)
    return WorkloadDraw(
        tuple(replace(p, index=i) for i, p in enumerate(ordered)), phase, tuple(notes)
    )
