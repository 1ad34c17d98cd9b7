"""The benchmark on a real control plane (`kubejoule-rl benchmark --on-cluster`), static cluster:
the plan's runs (rl/evaluation/benchmark.py: policy × seed, each seed's workload) each replayed
on one control plane with the node groups' nodes as KWOK nodes (rl/cluster), by the policy's real
scheduler (rl/cluster/schedulers.py), recorded from the API (rl/evaluation/replay.py) and turned
into the simulator's result by the simulator's own power model (rl/simulation/recorded.py), so
the results document is the simulated benchmark's.

The DaemonSets (`--daemonsets`) are real DaemonSets, created once before the first run: their
pods take their requests on every node as in the simulator (their CPU usage enters the energy
through the power model, as there).

A run that fails (module docstring of replay.py) stops the benchmark: the runs before it are
kept as the results, the failed one is kept apart, marked partial, with its reason
(`PartialRun`); nothing partial enters the results' table.

With the autoscaler (`--autoscaler`, expanders, POLICY@EXPANDER) the runs need a
cluster-autoscaler binary (`ca_bin`): the Go module proxy answers 403 "This module version is not
available" for k8s.io/autoscaler/cluster-autoscaler at every version, so no registry builds it;
one built from its GitHub source is given with `--ca-bin` (rl/cluster/autoscaler.py). Without
it they are refused with that reason; with it each run is rl/evaluation/autoscaled.py's.

The plane's kube-controller-manager runs without the workload controllers (ReplicaSet, Job,
StatefulSet…: `REPLAYED_CONTROLLERS`): the replay creates every trace pod, and in the autoscaled
runs stands in for an owned pod's controller (rl/evaluation/owners.py)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from common.jsonvalue import subobject, subobjects
from rl.cluster.api import Api, ApiError
from rl.cluster.autoscaler import CA_BLOCKED, CA_HOW, ON_CLUSTER_EXPANDERS
from rl.cluster.controlplane import (
    NODES_READY_TIMEOUT_S,
    REPLAYED_CONTROLLERS,
    Cluster,
    ClusterOptions,
    create_nodes,
    down,
    up,
    wait_nodes_ready,
)
from rl.cluster.processes import ComponentError
from rl.evaluation.autoscaled import (
    autoscaled_result,
    check_autoscaled,
    prepare_nodes,
    run_autoscaled,
)
from rl.evaluation.benchmark import BenchmarkPlan, RunOutcome, RunSummary, RunTask
from rl.evaluation.on_cluster_policy import check_on_cluster_policy, start_served
from rl.evaluation.replay import Recording, replay
from rl.simulation.cluster import ClusterModel
from rl.simulation.engine.simrecords import SimResult
from rl.simulation.recorded import recorded_result
from rl.simulation.traces.kubeobjects import requests_object
from rl.simulation.traces.scenario import DaemonSetSpec, NodeSpec, PodSpec

AUTOSCALER_BLOCKED = (
    f"--on-cluster without a cluster-autoscaler binary runs a static cluster only: {CA_BLOCKED}, so "
    f"--autoscaler, --expanders and POLICY@EXPANDER need one: {CA_HOW}; see docs/how-to/real-kubernetes.md"
)
DAEMONSET_NAMESPACE = "kj-daemonsets"


@dataclass(frozen=True)
class PartialRun:
    """A run that stopped before its end: why, and what it measured until then."""

    task: RunTask
    reason: str
    result: SimResult | None = None
    pods_ended: int = 0

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"policy": self.task.key, "seed": self.task.seed, "partial": True,
                               "reason": self.reason, "pods_ended": self.pods_ended}
        if self.result is not None:
            out["energy_kwh_so_far"] = round(self.result.energy_joules / 3.6e6, 4)
            out["trace_seconds_so_far"] = round(self.result.end_s, 3)
        return out


def check_static(cluster: ClusterModel, expanders: Sequence[str], policies: Sequence[str],
                 ca_bin: Path | None = None, pods: Sequence[PodSpec] = ()) -> None:
    """ValueError unless the run is one the cluster can do: real schedulers only, and the
    autoscaler only with a cluster-autoscaler binary and its expanders."""
    autoscaled = cluster.autoscaler is not None or bool(expanders) or any("@" in p for p in policies)
    if autoscaled and ca_bin is None:
        raise ValueError(AUTOSCALER_BLOCKED)
    if autoscaled:
        if ca_bin is not None and not ca_bin.is_file():
            raise ValueError(f"--ca-bin {ca_bin}: no such file")
        named = [*expanders, *(p.split("@", 1)[1] for p in policies if "@" in p)]
        known = (*ON_CLUSTER_EXPANDERS, "kubejoule")
        unknown = next((e for e in named if e not in known), None)
        if unknown is not None:
            raise ValueError(f"--on-cluster: expander {unknown!r} is not run on the cluster; known: {', '.join(known)}")
        check_autoscaled(cluster, pods)
    if cluster.power_off is not None:
        raise ValueError("--on-cluster: --power-off-visible / --power-off-after are simulator ablations (no real node powers off here)")
    for policy in policies:
        check_on_cluster_policy(policy.split("@", 1)[0])


def check_fits(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec], daemonsets: Sequence[DaemonSetSpec]) -> None:
    """ValueError naming the first pod that no node can hold beside its DaemonSet pods: on the
    cluster it would wait forever (in the simulator it would be `never_scheduled`)."""
    ds_cpu = sum(d.cpu_request for d in daemonsets)
    ds_mem = sum(d.mem_request_gib for d in daemonsets)
    room = [(n.cpu_cores - ds_cpu, n.memory_gib - ds_mem, n.max_pods - len(daemonsets)) for n in nodes]
    for pod in pods:
        if not any(pod.cpu_request <= c + 1e-9 and pod.mem_request_gib <= m + 1e-9 and p >= 1 for c, m, p in room):
            raise ValueError(
                f"trace row {pod.index}: the pod requests {pod.cpu_request:g} CPU and {pod.mem_request_gib:g} GiB; "
                f"no node has that much room beside its DaemonSet pods, so it would never be scheduled"
            )


def _namespace(api: Api, name: str) -> None:
    api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    deadline = time.monotonic() + 60
    while not api.exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"):
        if time.monotonic() > deadline:
            raise ComponentError("kube-controller-manager", f"no default ServiceAccount in {name} after 60 s")
        time.sleep(0.2)


DAEMONSET_TIMEOUT_S = 120.0  # wall seconds for the DaemonSets' pods to be Running


def create_daemonsets(api: Api, daemonsets: Sequence[DaemonSetSpec], nodes: int, timeout_s: float = DAEMONSET_TIMEOUT_S) -> None:
    """The DaemonSets, their pods Running on every node on return."""
    if not daemonsets:
        return
    _namespace(api, DAEMONSET_NAMESPACE)
    for ds in daemonsets:
        labels = {"kubejoule.io/daemonset": ds.name}
        api.request("POST", f"/apis/apps/v1/namespaces/{DAEMONSET_NAMESPACE}/daemonsets", {
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": ds.name},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [{"name": "main", "image": "registry.invalid/daemon",
                                "resources": {"requests": requests_object(ds.cpu_request, ds.mem_request_gib)}}],
                "tolerations": [{"operator": "Exists"}]}}},
        })
    _wait_running(api, lambda pod: True, nodes * len(daemonsets), timeout_s)


def wait_daemonset_pods(api: Api, node_names: Sequence[str], per_node: int, timeout_s: float = DAEMONSET_TIMEOUT_S) -> None:
    """The DaemonSet pods Running on each of `node_names` (nodes just created)."""
    names = set(node_names)
    _wait_running(api, lambda pod: subobject(pod, "spec").get("nodeName") in names, len(names) * per_node, timeout_s)


def _wait_running(api: Api, which: Callable[[Mapping[str, object]], bool], want: int, timeout_s: float) -> None:
    if want <= 0:
        return
    deadline = time.monotonic() + timeout_s
    while True:
        items = subobjects(api.request("GET", f"/api/v1/namespaces/{DAEMONSET_NAMESPACE}/pods"), "items")
        running = sum(1 for p in items if subobject(p, "status").get("phase") == "Running" and which(p))
        if running >= want:
            return
        if time.monotonic() > deadline:
            raise ComponentError("kube-controller-manager", f"DaemonSet pods: {running} of {want} Running after {timeout_s:g} s")
        time.sleep(0.2)


def result_of(recording: Recording, nodes: Sequence[NodeSpec], pods: Sequence[PodSpec],
              daemonsets: Sequence[DaemonSetSpec]) -> SimResult:
    """The recorded run through the simulator's power model (partial: up to where it stopped)."""
    end = recording.end_s if recording.failure is not None else None
    return recorded_result(nodes, pods, recording.lives(), daemonsets, recording.unschedulable, end)


def run_tag(task: RunTask) -> str:
    """The run's name in the cluster (namespace, processes, logs): its key and seed, DNS-safe."""
    return "".join(c if c.isalnum() else "-" for c in f"{task.key}-s{task.seed}".lower())


def run_task(cluster: Cluster, bin_dir: Path, plan: BenchmarkPlan, task: RunTask, daemonsets: Sequence[DaemonSetSpec],
             speedup: float, progress: Callable[[str], None],
             ca_bin: Path | None = None) -> tuple[SimResult, Recording]:
    """One run of the plan on the cluster; its result and its recording (failure set when it
    stopped early)."""
    api = cluster.admin()
    tag = run_tag(task)
    namespace = f"kj-run-{tag}"
    _namespace(api, namespace)
    pods = plan.pods_of(task.seed)
    if task.expander is not None:
        assert ca_bin is not None
        recording, lives, scale_ups = run_autoscaled(
            cluster, bin_dir, ca_bin, plan, task, namespace, tag, speedup, progress,
            lambda names: wait_daemonset_pods(api, names, len(daemonsets)))
        with contextlib.suppress(ApiError, OSError):
            api.request("DELETE", f"/api/v1/namespaces/{namespace}")
        return autoscaled_result(recording, lives, scale_ups, plan, task, daemonsets), recording
    served = start_served(cluster, bin_dir, task.policy, plan.nodes, tag, plan.cluster_of(task.expander, task.seed),
                          speedup)
    try:
        recording = replay(api, namespace, pods, served.scheduler_name, speedup,
                           lambda: cluster.dead() + served.dead(), progress)
    finally:
        served.stop()
    with contextlib.suppress(ApiError, OSError):  # the cluster is torn down at the end anyway
        api.request("DELETE", f"/api/v1/namespaces/{namespace}")
    return result_of(recording, plan.nodes, pods, daemonsets), recording


def run_on_cluster(plan: BenchmarkPlan, daemonsets: Sequence[DaemonSetSpec], bin_dir: Path, directory: Path,
                   speedup: float, progress: Callable[[str], None],
                   ca_bin: Path | None = None) -> tuple[list[RunOutcome], PartialRun | None]:
    """Every task of the plan, in order, on one control plane brought up in `directory` (and
    stopped on return); the complete runs' outcomes and the run that failed, if one did. Tasks
    with an expander run with the cluster-autoscaler at `ca_bin`."""
    if speedup <= 0:
        raise ValueError(f"--speedup {speedup:g}: must be > 0")
    autoscaled = any(t.expander is not None for t in plan.tasks)
    if autoscaled and ca_bin is None:
        raise ValueError(AUTOSCALER_BLOCKED)
    progress(f"bringing up the control plane ({'autoscaled node groups' if autoscaled else f'{len(plan.nodes)} KWOK nodes'})")
    # The replay stands in for the workload controllers (rl/evaluation/owners.py).
    cluster = up(ClusterOptions(directory / "plane", bin_dir, disabled_controllers=REPLAYED_CONTROLLERS), progress)
    outcomes: list[RunOutcome] = []
    try:
        if autoscaled:
            initial = prepare_nodes(cluster.admin(), plan.nodes, 0.0, "start")
            create_daemonsets(cluster.admin(), daemonsets, len(initial))
        else:
            create_nodes(cluster.admin(), plan.nodes)
            wait_nodes_ready(cluster.admin(), [n.name for n in plan.nodes], NODES_READY_TIMEOUT_S)
            create_daemonsets(cluster.admin(), daemonsets, len(plan.nodes))
        for number, task in enumerate(plan.tasks, 1):
            progress(f"run {number}/{len(plan.tasks)}: {task.key} seed {task.seed} at {speedup:g}× speed")
            try:
                result, recording = run_task(cluster, bin_dir, plan, task, daemonsets, speedup,
                                             _prefixed(progress, task.key), ca_bin)
            except (ComponentError, ApiError, OSError) as exc:
                return outcomes, PartialRun(task, f"{type(exc).__name__}: {exc}")
            if recording.failure is not None:
                return outcomes, PartialRun(task, recording.failure, result, len(recording.ended))
            outcomes.append(RunOutcome(RunSummary.of(task.key, task.seed, result, plan.carbon),
                                       result.timeline if task.seed == 0 else None))
        return outcomes, None
    finally:
        down(cluster)


def _prefixed(progress: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    return lambda message: progress(f"{prefix}: {message}")
