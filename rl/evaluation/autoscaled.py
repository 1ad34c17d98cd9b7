"""The benchmark on a real control plane with the real cluster-autoscaler: one run of the plan
(policy @ expander, seed) on the node file's autoscaled groups (rl/cluster/autoscaler.py: CA's
own kwok cloud provider, every timer ÷ speedup, `kubejoule` = `--expander=grpc` to our
expander), recorded from the API — pods (rl/evaluation/replay.py) and nodes
(rl/evaluation/node_watch.py), kept as `logs/<run>-record.json` beside the components' logs —
and turned into the simulator's result by its own power and boot model
(rl/simulation/recorded.py).

Each run starts as the simulator's: the groups' `initially_on` nodes Ready, nothing else; its
cluster-autoscaler (and expander) are its own processes, started for it and stopped after it,
and the nodes it left are deleted before the next run. It ends when every pod has ended (or
was evicted), as a simulation does (its energy counted to its last pod's end).

Workloads: a trace pod without an owner is a bare pod, as the simulator treats it
(rl/simulation/engine/workloads.py: `NotReplicated`, it blocks its node's removal; with
`safe_to_evict: true` it may be drained and is then deleted, not recreated), and so does the real
cluster-autoscaler with the same annotation. A pod with an owner (a ReplicaSet's, a Job's, a
StatefulSet's) has a real owner object, and the trace's PodDisruptionBudgets are real policy/v1
PDBs, so the real drain rules, disruption controller and Eviction API decide which pods may
go; the replay stands in for the workload controllers (off on this cluster) and replaces an
evicted pod as the simulator does (rl/evaluation/owners.py)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from rl.cluster import autoscaler as ca
from rl.cluster.api import Api, ApiError
from rl.cluster.controlplane import Cluster
from rl.cluster.processes import ComponentError, Process, free_port, log_tail, stop
from rl.evaluation.benchmark import BenchmarkPlan, RunTask
from rl.evaluation.node_watch import NodeWatch
from rl.evaluation.on_cluster_policy import start_served
from rl.evaluation.owners import Workloads, check_owned
from rl.evaluation.replay import END_MARGIN_WALL_S, STUCK_WALL_S, Recording, replay
from rl.simulation.cluster import ClusterModel
from rl.simulation.engine.simrecords import SimResult
from rl.simulation.recorded import BootModel, NodeLife, recorded_result
from rl.simulation.traces.scenario import DaemonSetSpec, NodeSpec, PodSpec


def check_autoscaled(cluster: ClusterModel, plan_pods: Sequence[PodSpec]) -> None:
    """ValueError unless the real cluster-autoscaler can run this as the simulator does."""
    model = cluster.autoscaler
    if model is None:
        return
    if model.utilization_threshold is None:
        raise ValueError("--on-cluster: the only-empty-nodes ablation (--old-autoscaler-defaults, threshold off) "
                         "has no cluster-autoscaler flag")
    check_owned(plan_pods, cluster.workloads.pdbs)


def _delete_group_nodes(api: Api, timeout_s: float = 60.0) -> None:
    """Every node of a group gone (a run's leftovers)."""
    deadline = time.monotonic() + timeout_s
    while True:
        items = api.request("GET", "/api/v1/nodes").get("items", [])
        left = [n["metadata"]["name"] for n in items if ca.kwok.GROUP_LABEL in (n["metadata"].get("labels") or {})]
        if not left:
            return
        for name in left:
            with contextlib.suppress(ApiError):
                api.request("DELETE", f"/api/v1/nodes/{name}")
        if time.monotonic() > deadline:
            raise ComponentError("kube-apiserver", f"nodes not deleted after {timeout_s:g} s: {left[:5]}")
        time.sleep(0.3)


def prepare_nodes(api: Api, nodes: Sequence[NodeSpec], boot_wall_s: float, suffix: str) -> list[str]:
    """The provider's ConfigMaps and the groups' initial nodes (names ending in `suffix`), Ready,
    nothing else; their names."""
    _delete_group_nodes(api)
    return ca.place_groups(api, nodes, boot_wall_s, suffix)


def run_autoscaled(cluster: Cluster, bin_dir: Path, ca_bin: Path, plan: BenchmarkPlan, task: RunTask,
                   namespace: str, tag: str, speedup: float, progress: Callable[[str], None],
                   ready: Callable[[list[str]], None]) -> tuple[Recording, list[NodeLife], int]:
    """One run with cluster-autoscaler (module docstring): its recording, its nodes' lives and
    cluster-autoscaler's scale-ups (from its log). `ready(names)` waits for the initial nodes'
    DaemonSet pods."""
    cluster_model = plan.cluster_of(task.expander, task.seed)
    model = cluster_model.autoscaler
    assert model is not None
    api = cluster.admin()
    ready(prepare_nodes(api, plan.nodes, model.boot_seconds / speedup, tag))
    workloads = Workloads(plan.pods_of(task.seed), cluster_model.workloads)
    workloads.install(api, namespace)
    processes: list[Process] = []
    ca_name = f"cluster-autoscaler-{tag}"
    try:
        url = cert = None
        if model.expander == "kubejoule":
            expander, endpoint = ca.start_expander(cluster, plan.nodes, f"expander-{tag}")
            processes.append(expander)
            url, cert = endpoint.url, endpoint.cert
        argv = ca.ca_argv(ca_bin, model, speedup, cluster.kubeconfig, free_port(), url, cert)
        processes.append(ca.start_autoscaler(cluster, argv, ca_name))
        served = start_served(cluster, bin_dir, task.policy, plan.nodes, tag, cluster_model, speedup)
        try:
            recording = Recording(speedup)
            horizon = max((p.submit_s + p.duration_s for p in plan.pods_of(task.seed)), default=0.0)
            nodes = NodeWatch(api, recording, int(horizon / speedup + END_MARGIN_WALL_S + 300))
            recording = replay(
                api, namespace, plan.pods_of(task.seed), served.scheduler_name, speedup,
                lambda: cluster.dead() + served.dead() + [p.name for p in processes if not p.alive()], progress,
                recording=recording, watches=[nodes],
                stuck_wall_s=STUCK_WALL_S + (model.boot_seconds + 30 * model.scan_interval_s) / speedup,
                workloads=workloads,
            )
        finally:
            served.stop()
        lives = nodes.lives()
        _keep_record(cluster.log(f"{tag}-record").with_suffix(".json"), recording, lives)
        scale_ups = ca.scale_ups_in_log(log_tail(cluster.log(ca_name), 10**7))
        return recording, lives, scale_ups
    finally:
        for process in reversed(processes):
            stop(process)


def _keep_record(path: Path, recording: Recording, lives: Sequence[NodeLife]) -> None:
    """The run's record beside the components' logs (what the energy was computed from)."""
    path.write_text(json.dumps({
        "nodes": [asdict(n) for n in lives],
        "pods": [asdict(p) for p in recording.lives()],
        "failure": recording.failure,
    }, indent=1))


def autoscaled_result(recording: Recording, lives: Sequence[NodeLife], scale_ups: int, plan: BenchmarkPlan,
                      task: RunTask, daemonsets: Sequence[DaemonSetSpec]) -> SimResult:
    """The recorded run through the simulator's power and boot model."""
    cluster = plan.cluster_of(task.expander, task.seed)
    model = cluster.autoscaler
    assert model is not None
    end = recording.end_s
    return recorded_result(plan.nodes, plan.pods_of(task.seed), recording.lives(), daemonsets,
                           recording.unschedulable, end, lives, BootModel(model.boot_seconds, model.boot_joules),
                           scale_ups, cluster.workloads)
