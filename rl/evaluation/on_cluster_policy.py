"""A benchmark policy's processes on the cluster, with its controllers: `POLICY` is served by its
scheduler(s) (rl/cluster/schedulers.py), and `POLICY+rebalancer` (or `+rebalancer:FILE`, the
`rebalancer:` settings of a scheduler configuration FILE) adds kubejoule's rebalancer in active
mode (rl/cluster/rebalancer.py), configured as the simulator's `+rebalancer` runs it
(rl/simulation/controllers/rebalancer.py `modelled_config`: the run's cluster-autoscaler
threshold and unneeded time, the workloads' pod startup time), its times ÷ the speedup. Its
evictions are the replay's like cluster-autoscaler's (rl/evaluation/replay.py: a pod deleted
before its end is evicted; an owned pod's replacement is the replay's, rl/evaluation/owners.py).
Other controllers (`+highnodeutilization`) have no process here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from rl.cluster.controlplane import Cluster
from rl.cluster.rebalancer import scaled_settings, start_rebalancer
from rl.cluster.schedulers import PolicyScheduler, check_policy, start_policy
from rl.simulation.cluster import ClusterModel
from rl.simulation.controllers.rebalancer import RebalancerController, modelled_config
from rl.simulation.controllers.suffixes import make_controller, split_controllers
from rl.simulation.traces.scenario import NodeSpec

ON_CLUSTER_CONTROLLERS = ("rebalancer",)


def check_on_cluster_policy(policy: str) -> None:
    """ValueError for a policy (without its `@EXPANDER`) the cluster cannot run: its base as
    `check_policy`, its controllers the rebalancer only, once, its settings FILE readable."""
    base, controllers = split_controllers(policy)
    names = [c.partition(":")[0] for c in controllers]
    other = next((n for n in names if n not in ON_CLUSTER_CONTROLLERS), None)
    if other is not None:
        raise ValueError(f"--on-cluster: +{other} has no process here; known: "
                         + ", ".join(f"+{c}" for c in ON_CLUSTER_CONTROLLERS))
    if len(names) > 1:
        raise ValueError(f"--on-cluster: {policy!r}: one +rebalancer at most")
    for suffix in controllers:
        make_controller(suffix)  # ValueError naming a bad FILE
    check_policy(base)


def rebalancer_settings(suffix: str, model: ClusterModel, speedup: float) -> dict[str, object]:
    """The live rebalancer's `rebalancer:` section for `+rebalancer[:FILE]` beside a run of
    `model` at `speedup` (module docstring)."""
    controller = make_controller(suffix)
    assert isinstance(controller, RebalancerController)
    config = modelled_config(controller.config, model.autoscaler, model.workloads.pod_startup_s)
    return scaled_settings(asdict(config), speedup)


def start_served(cluster: Cluster, bin_dir: Path, policy: str, nodes: Sequence[NodeSpec], tag: str,
                 model: ClusterModel, speedup: float) -> PolicyScheduler:
    """Start what serves `policy` (module docstring), each process ready on return; its
    `processes` stop together. ComponentError when one does not start."""
    check_on_cluster_policy(policy)
    base, controllers = split_controllers(policy)
    served = start_policy(cluster, bin_dir, base, nodes, tag)
    served.policy = policy
    try:
        for suffix in controllers:
            settings = rebalancer_settings(suffix, model, speedup)
            served.processes.append(start_rebalancer(cluster, nodes, settings, f"{served.scheduler_name}-rebalancer"))
    except BaseException:
        served.stop()
        raise
    return served
