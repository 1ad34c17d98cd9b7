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

The same config and seed give the same trace, byte for byte.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from rl.scenario import PodSpec

DAY_SECONDS = 86_400.0


def _option(default: float, help_text: str) -> Any:
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

    def __post_init__(self) -> None:
        if self.hours <= 0 or self.arrivals_per_hour <= 0:
            raise ValueError("hours and arrivals_per_hour must be positive")
        if not 0 <= self.diurnal_amplitude <= 1:
            raise ValueError("diurnal_amplitude must be in [0, 1]")
        if not 0 < self.duration_min_s < self.duration_max_s or self.duration_alpha <= 0:
            raise ValueError("need 0 < duration_min_s < duration_max_s and duration_alpha > 0")
        if len(self.cpu_sizes) != len(self.cpu_weights) or not self.cpu_sizes:
            raise ValueError("cpu_sizes and cpu_weights must have the same, non-zero length")


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
