"""kubejoule's rebalancer on a running control plane, for the on-cluster benchmark's
`POLICY+rebalancer` (rl/evaluation/on_cluster_policy.py): `python -m scheduler.cmd.cli rebalancer
--mode active` (never imported: rl.cluster only starts it) against the cluster's API, without
leader election, with the settings the simulator's `+rebalancer` runs with
(rl/simulation/controllers/rebalancer.py `modelled_config`), their times divided by the speedup
like cluster-autoscaler's timers (rl/cluster/autoscaler.py).

Its configuration is the one the harness gives the extender and the standalone scheduler
(rl/cluster/schedulers.py): the nodes' curves (`curves:`) and cores, since KWOK nodes run no
agent, and no telemetry source. What it then sees: every node's telemetry missing, so each
round skips every node with pods for `telemetry` (scheduler/decisions/rebalance.py: it never
evicts on missing data) — the simulator's `+rebalancer` on the same inputs (rl/evaluation/fidelity.py
`without_agents`) skips them for the same reason. Each round's outcome is in its log
(`logs/kj-TAG-rebalancer.log`, "rebalancer round: ...")."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from rl.cluster.api import probe_http
from rl.cluster.controlplane import Cluster
from rl.cluster.processes import Process, free_port, start, wait_ready
from rl.simulation.traces.scenario import NodeSpec

READY_TIMEOUT_S = 120.0
ROOT = Path(__file__).resolve().parents[2]

# The `rebalancer:` settings that are durations of the trace's time: divided by the speedup.
SCALED = ("interval_seconds", "node_cooldown_seconds", "pod_startup_seconds", "scale_down_unneeded_seconds")
# (setting, value, why it is not divided by the speedup) — docs/how-to/real-kubernetes.md lists them
UNSCALED: tuple[tuple[str, str, str], ...] = (
    ("rebalancer.max_clock_jump_seconds", "5 s", "a check of the host's clocks (wall against monotonic), "
     "not a time of the trace"),
    ("max_staleness_seconds, refresh_seconds", "30 s, 5 s",
     "the telemetry store's: KWOK nodes have no telemetry to age"),
    ("the lifetime predictor's priors (scheduler/lifetimes)", "per kind of pod",
     "seconds of the trace; a prediction from priors alone is never acted on (`prediction_fallback`)"),
)


def scaled_settings(settings: Mapping[str, Any], speedup: float) -> dict[str, Any]:
    """The `rebalancer:` section with its trace durations (`SCALED`) ÷ `speedup`, active mode."""
    if speedup <= 0:
        raise ValueError(f"speedup {speedup:g}: must be > 0")
    out = {k: v for k, v in settings.items() if k != "mode"}
    for key in SCALED:
        if key in out:
            out[key] = float(out[key]) / speedup
    return {**out, "mode": "active"}


def rebalancer_config(kubeconfig: Path, nodes: Sequence[NodeSpec], settings: Mapping[str, Any]) -> dict[str, Any]:
    """Its configuration file's content (module docstring)."""
    return {
        "kubernetes": {"kubeconfig": str(kubeconfig)},
        "curves": {n.name: {"points": list(n.curve.as_points())} for n in nodes},
        "telemetry": {"node_cores": {n.name: n.cpu_cores for n in nodes}},
        "rebalancer": dict(settings),
    }


def start_rebalancer(cluster: Cluster, nodes: Sequence[NodeSpec], settings: Mapping[str, Any],
                     name: str) -> Process:
    """Start it with `settings` (already scaled) as `name`; ready (watch synced) on return.
    ComponentError when it does not start."""
    path = cluster.directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(rebalancer_config(cluster.kubeconfig, nodes, settings)))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KUBECONFIG": str(cluster.kubeconfig)}
    process = start(name, [sys.executable, "-m", "scheduler.cmd.cli", "rebalancer", "--mode", "active",
                           "--no-leader-elect", "--listen", f"127.0.0.1:{port}", "--config", str(path)],
                    cluster.directory / "logs", env=env)
    wait_ready(process, lambda: probe_http("127.0.0.1", port, "/readyz"), READY_TIMEOUT_S)
    return process
