"""Telemetry as the scheduler sees it in the simulator.

A real scheduler reads a node's utilization and watts from its telemetry store, which holds the
agents' latest samples as of its last refresh: agents sample every `sample_seconds` (at φ, φ + S,
φ + 2S, …, φ the phase, 0 unless a seed draws it; the agent's default interval is 5 s) and the store refreshes every `refresh_seconds` (at
0, R, 2R, …; the scheduler's default `refresh_seconds` is 5). So at time t the scheduler sees
the sample taken at `s = ⌊(⌊t / R⌋ R − φ) / S⌋ S + φ`. Pods bound since that sample are not in it; the
scheduler's cluster cache adds their CPU requests as `cpu_since_sample_cores` (a pod counts when
it was placed after the sample, `placed_at > sample_time`, as scheduler/cluster/cache.py counts
it). A node that was not running at `s` (off, booting) has no sample: its telemetry is missing.

Fault mode (`--telemetry-dropout P`): each node's agent is missing for the whole run with
probability P, drawn per node from the run's seed (`dropped_nodes`) — an agent that never
deployed, or died: the store has no sample for the node, and the scorer has to price it without
one (the rule of docs/scheduler.md, "Missing telemetry"). The nodes' power is still simulated.

`TelemetryModel` None is the perfect-telemetry ablation: every node is a fresh sample of the
instantaneous state, and only pods waiting for a booting node (the visible-power-off ablation)
are "since the sample".
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.domain.model import NodeTelemetry, PodInfo

# A sample time within this of a grid point is on it (float round-off of t / R).
_GRID_EPSILON = 1e-9


@dataclass(frozen=True)
class TelemetryModel:
    sample_seconds: float = 5.0
    refresh_seconds: float = 5.0
    # The agents sample at phase, phase + S, … (a seed's draw, rl/simulation/traces/seeded_workload.py;
    # 0: in step with the store's refreshes). Before the first sample the store has none.
    phase_s: float = 0.0

    def __post_init__(self) -> None:
        if not (self.sample_seconds > 0 and self.refresh_seconds > 0):
            raise ValueError("sample and refresh intervals must be > 0")
        if not 0.0 <= self.phase_s < self.sample_seconds:
            raise ValueError("the sample phase must be in [0, sample seconds)")

    def visible_sample_time(self, now: float) -> float:
        """The time of the sample the scheduler sees at `now` (negative: none yet)."""
        refreshed = math.floor(now / self.refresh_seconds + _GRID_EPSILON) * self.refresh_seconds
        since_phase = refreshed - self.phase_s
        return (
            math.floor(since_phase / self.sample_seconds + _GRID_EPSILON) * self.sample_seconds
            + self.phase_s
        )


class TelemetryRecorder:
    """Each node's (on, utilization, watts) from every change on, to read them as of a sample."""

    def __init__(
        self, node_count: int, model: TelemetryModel | None, missing: frozenset[int] = frozenset()
    ) -> None:
        self.model = model
        self.missing = missing  # nodes whose agent is missing (the dropout fault)
        self._times: list[list[float]] = [[] for _ in range(node_count)]
        self._values: list[list[tuple[bool, float, float]]] = [[] for _ in range(node_count)]

    def __deepcopy__(self, memo: dict[int, object]) -> TelemetryRecorder:
        """A copy whose histories can grow apart (Simulation.fork); their entries are
        immutable and shared."""
        copied = TelemetryRecorder(0, self.model, self.missing)
        copied._times = [list(t) for t in self._times]
        copied._values = [list(v) for v in self._values]
        return copied

    def record(self, node: int, now: float, on: bool, utilization: float, watts: float) -> None:
        times, values = self._times[node], self._values[node]
        if self.model is None:  # only the present is ever read
            times[:] = [now]
            values[:] = [(on, utilization, watts)]
            return
        if times and times[-1] == now:
            values[-1] = (on, utilization, watts)
        else:
            times.append(now)
            values.append((on, utilization, watts))

    def view(
        self,
        node: int,
        name: str,
        cores: float,
        points: tuple[float, ...],
        now: float,
        placed_at: Mapping[int, float],
        infos: Sequence[PodInfo],
        pending_cpu_cores: float,
    ) -> tuple[NodeTelemetry | None, float]:
        """The node's telemetry as the scheduler holds it at `now`, and the CPU (cores)
        requested by pods placed since that sample."""
        times, values = self._times[node], self._values[node]
        if node in self.missing:
            return None, 0.0
        if self.model is None:
            on, utilization, watts = values[-1]
            booting = not on and bool(placed_at)  # the ablation's node booting for its pods
            telemetry = NodeTelemetry(
                node=name,
                sample_time=now,
                watts=watts if on or booting else None,
                source="estimated" if on or booting else "none",
                utilization=utilization,
                cores=cores,
                curve_points=points,
            )
            return telemetry, pending_cpu_cores
        sample_time = self.model.visible_sample_time(now)
        position = bisect.bisect_right(times, sample_time) - 1
        if position < 0 or not values[position][0]:
            return None, 0.0
        _, utilization, watts = values[position]
        since = sum(
            infos[index].requests.cpu_millicores for index, t in placed_at.items() if t > sample_time
        )
        telemetry = NodeTelemetry(
            node=name,
            sample_time=sample_time,
            watts=watts,
            source="estimated",
            utilization=utilization,
            cores=cores,
            curve_points=points,
        )
        return telemetry, since / 1000.0


def dropped_nodes(names: Sequence[str], probability: float, seed: int) -> frozenset[str]:
    """The nodes whose agent is missing in the dropout fault mode (module docstring): each with
    `probability`, independently, the same for every policy run with this seed."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError("the telemetry dropout must be a probability in [0, 1]")
    if probability == 0.0:
        return frozenset()
    rng = random.Random(f"telemetry-dropout-{seed}")
    return frozenset(name for name in names if rng.random() < probability)
