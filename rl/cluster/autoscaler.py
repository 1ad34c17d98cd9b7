"""The real cluster-autoscaler on the harness's control plane, for `kubejoule-rl benchmark
--on-cluster` with a node-group file's autoscaled groups (rl/evaluation/autoscaled.py).

The binary is cluster-autoscaler built from its GitHub source with `-tags kwok` (or
`externalgrpc,kwok`; tools/k8s/build-ca-from-source.sh): the Go module proxy refuses its module,
so no registry this project's CI reaches can build it (`CA_BLOCKED`).

Node groups are cluster-autoscaler's own kwok cloud provider (cloudprovider/kwok/ in its source):
the ConfigMap `kwok-provider-config` (templates read from a ConfigMap, groups by the
`kubejoule.io/node-group` label, no provider taint) and `kwok-provider-templates`, one template
Node per group — the group's KWOK node (rl/cluster/kwok.py: its capacity, its power curve
annotation), its min and max size in the provider's annotations, and the boot delay as
`kubejoule.io/boot-delay`, so that KWOK makes a node the autoscaler creates Ready only after the
simulator's boot time ÷ speedup. The provider names the nodes it creates `<group>-<5 random
characters>`; the nodes on at t = 0 (a group's `initial_count`, else `min_count`: the simulator's
`initially_on`) are created by the harness as `<group>-<i>`, Ready at once, carrying the
provider's group annotation and provider ID so it counts them. The provider never creates a
group's minimum itself (its `Refresh` counts the group's nodes in the cluster).

Timers (`SCALED_TIMERS`): every cluster-autoscaler flag that is a wait in the trace's time is
given its value ÷ speedup — the settings the simulator models (AutoscalerModel) at the model's
values, the others at cluster-autoscaler's defaults; `UNSCALED` lists what cannot be. Every
other flag is left at its shipped default."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rl.cluster import kwok
from rl.cluster.api import Api, ApiError, probe_http
from rl.cluster.controlplane import NODES_READY_TIMEOUT_S, Cluster, wait_nodes_ready
from rl.cluster.pki import Authority
from rl.cluster.processes import ComponentError, Process, free_port, start, stop, wait_ready
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.traces.scenario import NodeSpec
from scheduler.domain.cluster_defaults import (
    MAX_GRACEFUL_TERMINATION_S,
    MAX_POD_EVICTION_S,
    NODE_DELETION_DELAY_TIMEOUT_S,
    SCALE_DOWN_DELAY_AFTER_ADD_S,
    SCALE_DOWN_DELAY_AFTER_FAILURE_S,
    SCALE_DOWN_UNNEEDED_S,
    SCAN_INTERVAL_S,
    UNREMOVABLE_NODE_RECHECK_S,
)

CA_BIN_ENV = "KUBEJOULE_CA_BIN"
CA_BLOCKED = (
    "cluster-autoscaler cannot be built from a registry here: the Go module proxy answers 403 'This module "
    "version is not available' for k8s.io/autoscaler/cluster-autoscaler at every version"
)
CA_HOW = (
    f"give --ca-bin PATH (or set ${CA_BIN_ENV}) to a cluster-autoscaler built from its GitHub source with "
    "`tools/k8s/build-ca-from-source.sh SRC_DIR` (outside CI)"
)
PROVIDER_NAMESPACE = "kube-system"
PROVIDER_CONFIG = "kwok-provider-config"
PROVIDER_TEMPLATES = "kwok-provider-templates"
# cloudprovider/kwok/kwok_constants.go
NG_NAME_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/name"
NG_MIN_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/min-count"
NG_MAX_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/max-count"
NG_DESIRED_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/desired-count"
PROVIDER_ID_PREFIX = "kwok:"
READY_TIMEOUT_S = 120.0
ON_CLUSTER_EXPANDERS = ("least-waste", "random", "most-pods")  # cluster-autoscaler's own, same names


@dataclass(frozen=True)
class Timer:
    """A cluster-autoscaler flag that is a wait: its value in trace seconds (from the model, or
    cluster-autoscaler's default) and where that default is."""

    flag: str
    model_field: str | None  # AutoscalerModel's field, None: cluster-autoscaler's default below
    default_s: float
    source: str

    def trace_seconds(self, model: AutoscalerModel) -> float:
        return float(getattr(model, self.model_field)) if self.model_field else self.default_s


SCALED_TIMERS: tuple[Timer, ...] = (
    Timer("scan-interval", "scan_interval_s", SCAN_INTERVAL_S, "config/const.go DefaultScanInterval"),
    Timer("scale-down-unneeded-time", "scale_down_unneeded_s", SCALE_DOWN_UNNEEDED_S, "config/const.go DefaultScaleDownUnneededTime"),
    Timer("scale-down-delay-after-add", "delay_after_add_s", SCALE_DOWN_DELAY_AFTER_ADD_S, "config/flags/flags.go"),
    # 0 makes cluster-autoscaler use the scan interval (already scaled)
    Timer("scale-down-delay-after-delete", "delay_after_delete_s", 0, "config/flags/flags.go"),
    Timer("scale-down-delay-after-failure", "delay_after_failure_s", SCALE_DOWN_DELAY_AFTER_FAILURE_S, "config/const.go DefaultScaleDownDelayAfterFailure"),
    Timer("max-pod-eviction-time", "max_pod_eviction_s", MAX_POD_EVICTION_S, "config/flags/flags.go"),
    Timer("scale-down-unready-time", None, 1200, "config/const.go DefaultScaleDownUnreadyTime"),
    Timer("max-node-provision-time", None, 900, "config/flags/flags.go"),
    Timer("max-node-startup-time", None, 900, "config/flags/flags.go"),
    Timer("node-delete-delay-after-taint", None, 5, "config/flags/flags.go"),
    Timer("node-deletion-delay-timeout", None, NODE_DELETION_DELAY_TIMEOUT_S, "config/flags/flags.go"),
    Timer("unremovable-node-recheck-timeout", "unremovable_recheck_s", UNREMOVABLE_NODE_RECHECK_S, "config/flags/flags.go"),
    Timer("initial-node-group-backoff-duration", None, 300, "config/flags/flags.go"),
    Timer("max-node-group-backoff-duration", None, 1800, "config/flags/flags.go"),
    Timer("node-group-backoff-reset-timeout", None, 10800, "config/flags/flags.go"),
)
# (flag or constant, value, why it is not divided by the speedup)
UNSCALED: tuple[tuple[str, str, str], ...] = (
    ("--max-graceful-termination-sec", f"{MAX_GRACEFUL_TERMINATION_S} s", "whole seconds: ÷ speedup, at least 1 s"),
    ("--new-pod-scale-up-delay", "0 s", "zero at its default"),
    ("unschedulablePodTimeBuffer (core/static_autoscaler.go)", "2 s", "a constant: no scale-up while every "
     "Pending pod is under 2 s of wall clock old, 2·N s of the trace at N× (the fidelity run's simulator "
     "is given that: rl/evaluation/fidelity.py as_run_on_cluster)"),
    ("--max-inactivity, --max-failing-time, --max-startup-time", "10, 15, 20 min",
     "the process's own liveness (/health-check), not a decision"),
    ("--scale-down-simulation-timeout, --max-binpacking-time, --max-nodegroup-binpacking-duration, "
     "--max-bulk-soft-taint-time", "30 s, 5 min, 10 s, 3 s", "budgets for its own computation"),
    ("DefaultEvictionRetryTime, DefaultPodEvictionHeadroom (core/scaledown/actuation/drain.go)", "10 s, 30 s",
     "constants: a refused eviction is retried every 10 s wall"),
    ("the drain's wait for evicted pods (drain.go, a 5 s poll)", "5 s", "a constant"),
    ("MaxKubernetesEmptyNodeDeletionTime, MaxCloudProviderNodeDeletionTime (delete_in_batch.go)", "3, 5 min",
     "constants (limits, not waits)"),
)


def seconds_flag(seconds: float) -> str:
    """A Go duration for a flag, in milliseconds (cluster-autoscaler parses "250ms")."""
    return f"{round(seconds * 1000)}ms"


def ca_argv(ca_bin: Path, model: AutoscalerModel, speedup: float, kubeconfig: Path, port: int,
            expander_url: str | None = None, expander_cert: Path | None = None) -> list[str]:
    """cluster-autoscaler's command line: the kwok provider, the model's expander (`kubejoule`:
    `grpc` to our expander), every timer ÷ `speedup`, the model's other settings, the rest at
    cluster-autoscaler's defaults."""
    if speedup <= 0:
        raise ValueError(f"speedup {speedup:g}: must be > 0")
    argv = [str(ca_bin), "--cloud-provider=kwok", f"--kubeconfig={kubeconfig}", "--leader-elect=false",
            f"--address=127.0.0.1:{port}", "--v=2", "--logtostderr=true"]
    if model.expander == "kubejoule":
        if expander_url is None or expander_cert is None:
            raise ValueError("the kubejoule expander needs its URL and certificate")
        # The chain ends in a random pick (expander/factory/expander_factory.go): ties among
        # the options our expander returns, and a failed call, go to random, as in the simulator.
        argv += ["--expander=grpc", f"--grpc-expander-url={expander_url}", f"--grpc-expander-cert={expander_cert}"]
    elif model.expander in ON_CLUSTER_EXPANDERS:
        argv.append(f"--expander={model.expander}")
    else:
        raise ValueError(f"expander {model.expander!r} is not run on the cluster; known: "
                         f"{', '.join((*ON_CLUSTER_EXPANDERS, 'kubejoule'))}")
    for timer in SCALED_TIMERS:
        argv.append(f"--{timer.flag}={seconds_flag(timer.trace_seconds(model) / speedup)}")
    argv.append(f"--max-graceful-termination-sec={max(1, round(MAX_GRACEFUL_TERMINATION_S / speedup))}")
    if model.utilization_threshold is None:
        raise ValueError("the only-empty-nodes ablation has no cluster-autoscaler flag")
    argv += [f"--scale-down-utilization-threshold={model.utilization_threshold:g}",
             f"--ignore-daemonsets-utilization={str(model.ignore_daemonsets_utilization).lower()}",
             f"--max-scale-down-parallelism={model.max_scale_down_parallelism}",
             f"--max-drain-parallelism={model.max_drain_parallelism}",
             f"--max-bulk-soft-taint-count={model.max_bulk_soft_taint_count}",
             # loop/trigger.go: a loop at once after a productive one and on an unschedulable pod
             f"--frequent-loops-enabled={str(model.frequent_loops_enabled).lower()}"]
    return argv


def groups_of(nodes: Sequence[NodeSpec]) -> dict[str, list[NodeSpec]]:
    """The node groups in file order: their nodes (slots), ordinal order."""
    out: dict[str, list[NodeSpec]] = {}
    for node in nodes:
        out.setdefault(node.group, []).append(node)
    return out


def _as_group_node(body: dict[str, Any], group: str) -> dict[str, Any]:
    annotations = body["metadata"]["annotations"]
    annotations[NG_NAME_ANNOTATION] = group
    body["spec"]["providerID"] = PROVIDER_ID_PREFIX + body["metadata"]["name"]
    return body


def template_node(group: Sequence[NodeSpec], boot_wall_s: float) -> dict[str, Any]:
    """The group's template for the kwok provider: its KWOK node with the boot delay, its min,
    max and initial size (the provider renames it `kwok-fake-<group>` and sets its own
    annotations; it refuses an initial size below the minimum)."""
    first, size = group[0], len(group)
    body = kwok.node_object(first, boot_wall_s)
    body["metadata"]["name"] = first.group
    body["metadata"]["labels"].pop("kubernetes.io/hostname", None)  # each created node is its own host
    body["metadata"]["annotations"].pop(kwok.METRICS_PATH_ANNOTATION, None)  # set per node by the provider
    body["metadata"]["annotations"][NG_MIN_ANNOTATION] = str(first.min_count)
    body["metadata"]["annotations"][NG_MAX_ANNOTATION] = str(size)
    body["metadata"]["annotations"][NG_DESIRED_ANNOTATION] = str(sum(1 for n in group if n.initially_on))
    # Not Ready until KWOK's boot stage says so: without a Ready condition the node lifecycle
    # controller would take away the not-ready taint the API put on the new node, and pods
    # would be bound to it while it boots.
    body["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                     "message": "booting (KWOK makes it Ready after kubejoule.io/boot-delay)"}]
    return body


def provider_configmaps(nodes: Sequence[NodeSpec], boot_wall_s: float) -> list[dict[str, Any]]:
    """The kwok provider's two ConfigMaps (module docstring)."""
    config = {
        "apiVersion": "v1alpha1", "readNodesFrom": "configmap",
        "nodegroups": {"fromNodeLabelKey": kwok.GROUP_LABEL},
        "nodes": {"skipTaint": True},
        "configmap": {"name": PROVIDER_TEMPLATES},
    }
    templates = {"apiVersion": "v1", "kind": "List",
                 "items": [template_node(g, boot_wall_s) for g in groups_of(nodes).values()]}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": PROVIDER_CONFIG, "namespace": PROVIDER_NAMESPACE},
         "data": {"config": yaml.safe_dump(config, sort_keys=False)}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": PROVIDER_TEMPLATES, "namespace": PROVIDER_NAMESPACE},
         "data": {"templates": yaml.safe_dump(templates, sort_keys=False)}},
    ]


def initial_nodes(nodes: Sequence[NodeSpec], suffix: str = "") -> list[dict[str, Any]]:
    """The nodes on at t = 0 (the simulator's `initially_on`), Ready at once, in their group;
    `suffix` makes each run's names its own (no pod of an earlier run's node is taken for one
    of its)."""
    out = []
    for spec in nodes:
        if spec.initially_on:
            body = kwok.node_object(spec)
            if suffix:
                body["metadata"]["name"] = f"{spec.name}-{suffix}"
                body["metadata"]["annotations"][kwok.METRICS_PATH_ANNOTATION] = \
                    f"/metrics/nodes/{spec.name}-{suffix}/metrics/resource"
            out.append(_as_group_node(body, spec.group))
    return out


def install_provider(api: Api, nodes: Sequence[NodeSpec], boot_wall_s: float) -> None:
    """The kwok provider's ConfigMaps, replacing any from an earlier run."""
    for body in provider_configmaps(nodes, boot_wall_s):
        path = f"/api/v1/namespaces/{PROVIDER_NAMESPACE}/configmaps"
        name = body["metadata"]["name"]
        try:
            api.request("DELETE", f"{path}/{name}")
        except ApiError as exc:
            if exc.status != 404:
                raise
        api.request("POST", path, body)


def place_groups(api: Api, nodes: Sequence[NodeSpec], boot_wall_s: float, suffix: str = "",
                 timeout: float = NODES_READY_TIMEOUT_S) -> list[str]:
    """The groups as cluster-autoscaler's kwok provider sees them: its ConfigMaps
    (`install_provider`) and the nodes on at t = 0 (`initial_nodes`), schedulable on return;
    their names."""
    install_provider(api, nodes, boot_wall_s)
    initial = initial_nodes(nodes, suffix)
    for body in initial:
        api.request("POST", "/api/v1/nodes", body)
    names = [b["metadata"]["name"] for b in initial]
    wait_nodes_ready(api, names, timeout)
    return names


def start_autoscaler(cluster: Cluster, argv: Sequence[str], name: str) -> Process:
    """cluster-autoscaler from `argv` (ca_argv: `--address` names its port), ready when its
    /health-check answers. ComponentError when it exits first or is not ready in time (its last
    log lines; it is stopped then)."""
    port = int(next(a for a in argv if a.startswith("--address=")).rsplit(":", 1)[1])
    env = {**os.environ, "KWOK_PROVIDER_MODE": "local", "POD_NAMESPACE": PROVIDER_NAMESPACE,
           "KUBECONFIG": str(cluster.kubeconfig)}
    process = start(name, argv, cluster.directory / "logs", env=env)
    try:
        wait_ready(process, lambda: probe_http("127.0.0.1", port, "/health-check"), READY_TIMEOUT_S)
    except ComponentError:
        stop(process)
        raise
    return process


@dataclass(frozen=True)
class ExpanderEndpoint:
    url: str
    cert: Path  # what cluster-autoscaler verifies the expander with (the cluster's CA)


def expander_files(cluster: Cluster, nodes: Sequence[NodeSpec], name: str) -> tuple[Path, Path, Path]:
    """Our expander's TLS pair (from the cluster's authority, for 127.0.0.1) and its config (each
    group's curve)."""
    pair = Authority.load(cluster.pki).issue(name, "kubejoule-expander", server=True, hosts=("127.0.0.1", "localhost"))
    config = cluster.directory / f"{name}.yaml"
    config.write_text(yaml.safe_dump({
        "node_groups": {g: {"points": list(specs[0].curve.as_points())} for g, specs in groups_of(nodes).items()},
    }))
    return pair.cert, pair.key, config


def start_expander(cluster: Cluster, nodes: Sequence[NodeSpec], name: str) -> tuple[Process, ExpanderEndpoint]:
    """`kubejoule-scheduler autoscaler-expander` (as `python -m scheduler.cmd.cli`: started, never
    imported), ready when its /readyz answers."""
    cert, key, config = expander_files(cluster, nodes, name)
    port, metrics = free_port(), free_port()
    process = start(name, [sys.executable, "-m", "scheduler.cmd.cli", "autoscaler-expander", "--listen", f"127.0.0.1:{port}",
                           "--tls-cert", str(cert), "--tls-key", str(key), "--config", str(config),
                           "--metrics-listen", f"127.0.0.1:{metrics}"],
                    cluster.directory / "logs", env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    wait_ready(process, lambda: probe_http("127.0.0.1", metrics, "/readyz"), READY_TIMEOUT_S)
    return process, ExpanderEndpoint(f"127.0.0.1:{port}", cluster.pki / "ca.crt")


# core/scaleup/orchestrator/orchestrator.go: logged once per loop that scales up.
SCALE_UP_LINE = "Final scale-up plan:"


def scale_ups_in_log(text: str) -> int:
    """cluster-autoscaler's scale-up decisions in its log: one per loop that scaled up, as the
    simulator counts them."""
    return sum(1 for line in text.splitlines() if SCALE_UP_LINE in line)
