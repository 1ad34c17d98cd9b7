"""Synthetic workload traces: diurnal arrivals, heavy-tailed durations, usage around requests.

* Arrivals: a Poisson process whose rate follows the day,
  `λ(t) = λ̄ · (1 + A · cos(2π (t − t_peak) / 86 400))`, drawn by thinning (Lewis & Shedler):
  candidate arrivals at the peak rate, each kept with probability λ(t) / λ_max.
* Durations: bounded Pareto on [min, max] with shape α (α near 1 is heavy-tailed: most pods are
  short, a few run for hours and carry much of the work), drawn by inverting its CDF.
* CPU requests: from a small menu of common sizes (0.25 … 4 cores) with fixed weights.
* Memory requests: the CPU request times a GiB-per-core ratio drawn from a menu, at least 0.125.
* CPU usage: request × r, r log-normal (median `usage_median_ratio`, spread `usage_sigma`),
  capped at `usage_max_ratio`; with the defaults about 15 % of pods use more than they request,
  which is what makes contention (and slowdown) possible.

Families (`generate_family`, `kubejoule-rl trace --family`):

* `diurnal` — the model above, with owners drawn on their own random stream (so the other
  columns are those of the original traces): 60 % Deployment pods (`ReplicaSet`), 10 %
  `StatefulSet` pods, 30 % single-pod `Job`s; priority 0.
* `batch-services` — two populations where pod age and owner kind matter: long-running services
  (owner `ReplicaSet`, priority 1000, `services_share` of the arrivals, durations bounded Pareto
  on [2 h, 24 h], usage about half the request) beside short batch Jobs (owner `Job`, priority
  0, arriving in bursts of 1–`burst_max` pods, durations on [1 min, 30 min], usage near the
  request). The arrival rate follows the same diurnal curve.
* `bursts` — only Jobs, in bursts (CI pipelines, cron fan-outs): burst starts are Poisson, each
  burst 1–`burst_max` pods at the same second, durations on [5 min, 60 min].

Workloads (`workload` column): a service's pods share a Deployment (`svc-<request>-<k>`, k one of
three drawn on the workload stream) or a StatefulSet (`db-<request>`) of their size, so a
workload's pods have one template; a Job is one burst (`job-<n>`; a single pod in `diurnal`).
`family_pdbs` gives every Deployment and StatefulSet a PodDisruptionBudget with
`max_unavailable: 1`; Jobs have none. No pod is bare or annotated `safe-to-evict`.

The same config, family and seed give the same trace, byte for byte.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace

from rl.simulation.traces.trace import PdbSpec, PodSpec

DAY_SECONDS = 86_400.0


def _option(default: float, help_text: str) -> float:
    """A field that `kubejoule-rl trace` offers as an option, with its help text."""
    return field(default=default, metadata={"help": help_text})


@dataclass(frozen=True)
class TraceConfig:
    hours: float = _option(24.0, "length of the arrival window (h)")
    arrivals_per_hour: float = _option(150.0, "mean arrivals per hour over a whole day (λ̄)")
    diurnal_amplitude: float = _option(0.6, "A in [0, 1]: 0 = flat, 1 = no arrivals at the trough")
    peak_hour: float = _option(14.0, "hour of the day with the most arrivals")
    duration_min_s: float = _option(600.0, "shortest run time (s)")
    duration_max_s: float = _option(8 * 3600.0, "longest run time (s)")
    duration_alpha: float = _option(1.2, "Pareto shape of run times (near 1: heavy tail)")
    cpu_sizes: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)  # cores
    cpu_weights: tuple[float, ...] = (0.25, 0.30, 0.25, 0.15, 0.05)
    gib_per_core: tuple[float, ...] = (0.25, 0.5, 1.0)
    usage_median_ratio: float = _option(0.6, "median of CPU usage / request")
    usage_sigma: float = _option(0.5, "σ of ln(usage / request)")
    usage_max_ratio: float = _option(3.0, "cap on usage / request")
    services_share: float = _option(0.3, "batch-services: share of arrivals that are services")
    burst_max: float = _option(8.0, "batch-services, bursts: most pods in one burst")

    def __post_init__(self) -> None:
        if self.hours <= 0 or self.arrivals_per_hour <= 0:
            raise ValueError("hours and arrivals_per_hour must be positive")
        if not 0 <= self.diurnal_amplitude <= 1:
            raise ValueError("diurnal_amplitude must be in [0, 1]")
        if not 0 < self.duration_min_s < self.duration_max_s or self.duration_alpha <= 0:
            raise ValueError("need 0 < duration_min_s < duration_max_s and duration_alpha > 0")
        if len(self.cpu_sizes) != len(self.cpu_weights) or not self.cpu_sizes:
            raise ValueError("cpu_sizes and cpu_weights must have the same, non-zero length")
        if not 0 <= self.services_share <= 1 or self.burst_max < 1:
            raise ValueError("services_share must be in [0, 1] and burst_max >= 1")


def arrival_rate_per_second(t: float, config: TraceConfig) -> float:
    mean = config.arrivals_per_hour / 3600.0
    phase = 2 * math.pi * (t - config.peak_hour * 3600.0) / DAY_SECONDS
    return mean * (1 + config.diurnal_amplitude * math.cos(phase))


def bounded_pareto(rng: random.Random, low: float, high: float, alpha: float) -> float:
    """Inverse-CDF draw from the Pareto(α) distribution truncated to [low, high]."""
    u = rng.random()
    ratio = (low / high) ** alpha
    return low / (1 - u * (1 - ratio)) ** (1 / alpha)


def generate_trace(config: TraceConfig, seed: int) -> list[PodSpec]:
    rng = random.Random(seed)
    horizon = config.hours * 3600.0
    peak_rate = config.arrivals_per_hour / 3600.0 * (1 + config.diurnal_amplitude)
    pods: list[PodSpec] = []
    t = 0.0
    while True:
        t += rng.expovariate(peak_rate)
        if t >= horizon:
            break
        if rng.random() * peak_rate > arrival_rate_per_second(t, config):
            continue
        duration = bounded_pareto(
            rng, config.duration_min_s, config.duration_max_s, config.duration_alpha
        )
        request = rng.choices(config.cpu_sizes, weights=config.cpu_weights)[0]
        memory = max(0.125, request * rng.choice(config.gib_per_core))
        ratio = min(
            config.usage_max_ratio,
            config.usage_median_ratio * math.exp(rng.gauss(0.0, config.usage_sigma)),
        )
        pods.append(
            PodSpec(
                index=len(pods),
                submit_s=round(t, 3),
                duration_s=round(duration, 3),
                cpu_request=request,
                mem_request_gib=round(memory, 3),
                cpu_usage=round(request * ratio, 4),
            )
        )
    return pods


FAMILIES = ("diurnal", "batch-services", "bursts")
SERVICE_PRIORITY = 1000
_SERVICE_DURATION_S = (2 * 3600.0, 24 * 3600.0, 1.1)  # (min, max, Pareto α)
_JOB_DURATION_S = (60.0, 1800.0, 1.3)
_BURST_JOB_DURATION_S = (300.0, 3600.0, 1.5)


def _arrival_times(config: TraceConfig, rng: random.Random, rate_scale: float) -> list[float]:
    """Diurnal Poisson arrival times (thinning), `rate_scale` × the configured mean rate."""
    horizon = config.hours * 3600.0
    peak_rate = rate_scale * config.arrivals_per_hour / 3600.0 * (1 + config.diurnal_amplitude)
    times: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(peak_rate)
        if t >= horizon:
            return times
        if rng.random() * peak_rate <= rate_scale * arrival_rate_per_second(t, config):
            times.append(t)


def _pod(
    rng: random.Random,
    config: TraceConfig,
    submit_s: float,
    durations: tuple[float, float, float],
    usage_median_ratio: float,
    owner_kind: str,
    priority: int,
) -> PodSpec:
    duration = bounded_pareto(rng, *durations)
    request = rng.choices(config.cpu_sizes, weights=config.cpu_weights)[0]
    memory = max(0.125, request * rng.choice(config.gib_per_core))
    ratio = min(
        config.usage_max_ratio, usage_median_ratio * math.exp(rng.gauss(0.0, config.usage_sigma))
    )
    return PodSpec(
        index=0,
        submit_s=round(submit_s, 3),
        duration_s=round(duration, 3),
        cpu_request=request,
        mem_request_gib=round(memory, 3),
        cpu_usage=round(request * ratio, 4),
        owner_kind=owner_kind,
        priority=priority,
    )


def _bursts(
    config: TraceConfig,
    rng: random.Random,
    rate_scale: float,
    durations: tuple[float, float, float],
) -> list[PodSpec]:
    """Jobs in bursts whose mean size keeps the pod rate at `rate_scale` × the configured one;
    a burst is one Job."""
    burst_max = int(config.burst_max)
    mean_burst = (1 + burst_max) / 2
    pods = []
    for burst, start in enumerate(_arrival_times(config, rng, rate_scale / mean_burst)):
        for _ in range(rng.randint(1, burst_max)):
            pod = _pod(rng, config, start, durations, 0.9, "Job", 0)
            pods.append(replace(pod, workload=f"job-{burst}"))
    return pods


_DIURNAL_KINDS = ("ReplicaSet", "StatefulSet", "Job")
_DIURNAL_WEIGHTS = (0.6, 0.1, 0.3)
SERVICE_KINDS = ("ReplicaSet", "StatefulSet")


def _millicores(cores: float) -> str:
    return f"{round(cores * 1000)}m"


def _with_workloads(pods: list[PodSpec], family: str, seed: int) -> list[PodSpec]:
    """Owners (diurnal) and services' workloads, drawn on their own stream (module docstring)."""
    names = random.Random(f"workloads-{family}-{seed}")
    out = []
    for i, pod in enumerate(pods):
        kind = pod.owner_kind
        if family == "diurnal":
            kind = names.choices(_DIURNAL_KINDS, weights=_DIURNAL_WEIGHTS)[0]
        workload = pod.workload
        if kind == "ReplicaSet":
            workload = f"svc-{_millicores(pod.cpu_request)}-{names.randrange(3)}"
        elif kind == "StatefulSet":
            workload = f"db-{_millicores(pod.cpu_request)}"
        elif workload is None:
            workload = f"job-{i}"
        out.append(replace(pod, owner_kind=kind, workload=workload))
    return out


def family_pdbs(pods: list[PodSpec]) -> tuple[PdbSpec, ...]:
    """A PDB with max_unavailable 1 for every service workload (Deployment, StatefulSet)."""
    services = sorted({p.workload for p in pods if p.owner_kind in SERVICE_KINDS and p.workload})
    return tuple(PdbSpec(w, max_unavailable=1) for w in services)


def generate_family(family: str, config: TraceConfig, seed: int) -> list[PodSpec]:
    """A trace of one family (see the module docstring), sorted by submit time."""
    if family == "diurnal":
        return _with_workloads(generate_trace(config, seed), family, seed)
    rng = random.Random(seed)
    if family == "batch-services":
        share = config.services_share
        pods = [
            _pod(rng, config, t, _SERVICE_DURATION_S, 0.5, "ReplicaSet", SERVICE_PRIORITY)
            for t in _arrival_times(config, rng, share)
        ]
        pods += _bursts(config, rng, 1 - share, _JOB_DURATION_S)
    elif family == "bursts":
        pods = _bursts(config, rng, 1.0, _BURST_JOB_DURATION_S)
    else:
        raise ValueError(f"unknown trace family {family!r}; known: {', '.join(FAMILIES)}")
    pods.sort(key=lambda p: p.submit_s)
    return _with_workloads([replace(p, index=i) for i, p in enumerate(pods)], family, seed)
