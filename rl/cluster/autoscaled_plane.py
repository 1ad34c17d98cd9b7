"""`kubejoule-rl cluster up --autoscaler`: the control plane (rl/cluster/controlplane.py) with the
real cluster-autoscaler scaling the node groups of a `nodes.yaml`, in real time.

Each group is one of cluster-autoscaler's kwok provider's node groups (rl/cluster/autoscaler.py),
between its `min_count` and its `count`; the nodes on at t = 0 (a group's `initial_count`, else
its `min_count`, as in the simulator and the benchmark's `--on-cluster` runs) are created Ready,
and a node cluster-autoscaler adds is Ready after the simulator's default boot
(`BOOT_SECONDS`). cluster-autoscaler runs at speedup 1: every timer at its shipped value (or the
simulator's model's, which are the shipped ones), the default expander (least-waste). It is one
of the cluster's processes, in its state file: `kubejoule-rl cluster down` stops it with the rest.

The binary is one built from cluster-autoscaler's GitHub source
(tools/k8s/build-ca-from-source.sh): no registry this project's CI reaches can build it
(`CA_BLOCKED`). Bad input (no binary, no file there, no node groups) is refused before anything
starts (`AutoscalerInputError`); when something fails after the control plane is up, the plane is
stopped again."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from rl.cluster import autoscaler as ca
from rl.cluster import controlplane
from rl.cluster.controlplane import Cluster, ClusterError, ClusterOptions
from rl.cluster.processes import free_port
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.traces.scenario import NodeSpec, load_node_groups
from scheduler.domain.cluster_defaults import BOOT_SECONDS

PROCESS_NAME = "cluster-autoscaler"
SPEEDUP = 1.0  # real time: the trace's seconds are the wall clock's


class AutoscalerInputError(ClusterError):
    """`up --autoscaler` cannot start as asked (found before anything started)."""


def model() -> AutoscalerModel:
    """The settings cluster-autoscaler runs with: the model's defaults, which are its shipped
    ones (least-waste), and the simulator's default boot."""
    return AutoscalerModel(boot_seconds=BOOT_SECONDS)


def check_inputs(ca_bin: Path | None, nodes_file: Path | None) -> tuple[Path, list[NodeSpec]]:
    """The binary and the nodes to scale; AutoscalerInputError naming what is missing or not
    runnable (a bad node file: ScenarioError)."""
    if ca_bin is None:
        raise AutoscalerInputError(f"--autoscaler needs a cluster-autoscaler binary: {ca.CA_BLOCKED}; {ca.CA_HOW}")
    if not ca_bin.is_file():
        raise AutoscalerInputError(f"--ca-bin {ca_bin}: no such file ({ca.CA_HOW})")
    if not os.access(ca_bin, os.X_OK):
        raise AutoscalerInputError(f"--ca-bin {ca_bin}: not executable")
    if nodes_file is None:
        raise AutoscalerInputError("--autoscaler needs --nodes: the node groups cluster-autoscaler scales "
                                   "(each between its min_count and its count)")
    return ca_bin, load_node_groups(nodes_file)


def autoscaler_argv(cluster: Cluster, ca_bin: Path, port: int) -> list[str]:
    """cluster-autoscaler's command line on `cluster`, at speedup 1 (rl/cluster/autoscaler.py
    `ca_argv`)."""
    return ca.ca_argv(ca_bin, model(), SPEEDUP, cluster.kubeconfig, port)


def up_autoscaled(options: ClusterOptions, ca_bin: Path | None,
                  progress: Callable[[str], None] = lambda _m: None) -> Cluster:
    """The control plane of `options` (its `nodes_file`'s groups autoscaled, not each group's
    `count` of nodes) with cluster-autoscaler running and recorded for `down` (module docstring)."""
    binary, nodes = check_inputs(ca_bin, options.nodes_file)
    cluster = controlplane.up(replace(options, nodes_file=None), progress)
    try:
        progress(f"installing cluster-autoscaler's kwok provider for {len(ca.groups_of(nodes))} node groups")
        initial = ca.place_groups(cluster.admin(), nodes, model().boot_seconds / SPEEDUP,
                                  timeout=options.ready_timeout_s)
        progress(f"created {len(initial)} KWOK nodes on at t = 0")
        progress(f"starting {PROCESS_NAME}")
        process = ca.start_autoscaler(cluster, autoscaler_argv(cluster, binary, free_port()), PROCESS_NAME)
        controlplane.add_process(cluster, process)
    except BaseException:
        progress("stopping the control plane again")
        controlplane.down(cluster)
        raise
    return cluster
