"""The scheduler of one benchmark policy on a running control plane (rl/evaluation/on_cluster.py):
a real kube-scheduler with the policy's profile under a `schedulerName` of its own, beside the
cluster's default one, or kubejoule's processes (the extender behind such a kube-scheduler, the
standalone scheduler) started as `python -m scheduler.cmd.cli` — never imported (rl.cluster sits
below the scheduler in no layer; it only starts it).

| policy | what runs |
|---|---|
| `default` | kube-scheduler, its default profile |
| `mostallocated` | kube-scheduler, NodeResourcesFit's scoringStrategy MostAllocated (cpu 1, memory 1) |
| `default+extender:W` | kube-scheduler's default profile and kubejoule's extender at weight W (active mode; docs/scheduler.md's settings: `nodeCacheCapable`, `ignorable`, `httpTimeout: 1s`) |
| `kubejoule` | `kubejoule-scheduler run --mode active`, its decision log beside its log (`logs/kj-TAG-decisions.jsonl`) |
| `profile:FILE` | the same process with the profile file's `profile:` (and its `scorer:`, `percentage_of_nodes_to_score`) in its configuration: the file is the standalone configuration's section (rl/policies/scheduling_profiles.py); a file with an `extender: true` entry is kube-scheduler with the extender, refused here |
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from common.jsonvalue import JsonObject
from rl.cluster.api import probe_http, probe_https_anonymous
from rl.cluster.controlplane import Cluster
from rl.cluster.processes import Process, free_port, start, stop, wait_ready
from rl.policies.scheduling_profiles import PROFILE_POLICY, profile_file_path
from rl.simulation.traces.scenario import NodeSpec

EXTENDER_PREFIX = "default+extender:"
ON_CLUSTER_POLICIES = ("default", "mostallocated", f"{EXTENDER_PREFIX}W", "kubejoule", f"{PROFILE_POLICY}FILE")
READY_TIMEOUT_S = 120.0
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class PolicyScheduler:
    """The processes serving one policy; pods name `scheduler_name`."""

    policy: str
    scheduler_name: str
    processes: list[Process] = field(default_factory=list)

    def dead(self) -> list[str]:
        return [p.name for p in self.processes if not p.alive()]

    def stop(self) -> None:
        for process in reversed(self.processes):
            stop(process)


def check_policy(policy: str) -> None:
    """ValueError for a policy the cluster cannot run (its message lists those it can)."""
    if policy in ("default", "mostallocated", "kubejoule"):
        return
    if policy.startswith(PROFILE_POLICY):
        profile_section(policy)
        return
    if policy.startswith(EXTENDER_PREFIX):
        try:
            if float(policy[len(EXTENDER_PREFIX):]) > 0:
                return
        except ValueError:
            pass
    raise ValueError(f"--on-cluster: policy {policy!r} has no real scheduler here; known: {', '.join(ON_CLUSTER_POLICIES)}")


def kube_scheduler_config(cluster: Cluster, policy: str, name: str, extender_port: int | None) -> JsonObject:
    """The KubeSchedulerConfiguration of `policy` (module docstring) under schedulerName `name`."""
    profile: dict[str, object] = {"schedulerName": name}
    if policy == "mostallocated":
        profile["pluginConfig"] = [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
            "type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}}]
    config: dict[str, object] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(cluster.directory / "scheduler.kubeconfig"), "qps": 500, "burst": 500},
        "leaderElection": {"leaderElect": False}, "profiles": [profile],
        # A pod that found no room is retried when a pod ends (the scheduler's pod informer sees
        # only non-terminal pods, so Succeeded is a delete: cmd/kube-scheduler/app/server.go,
        # newPodInformer), but not before its backoff (1 s doubling to 10 s by default) is over:
        # wall seconds that a compressed trace multiplies by its speedup. 1 s is the least the
        # field takes (whole seconds); the simulator retries at once, as a real cluster does after
        # minutes of waiting.
        "podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 1,
    }
    if extender_port is not None:
        config["extenders"] = [{
            "urlPrefix": f"http://127.0.0.1:{extender_port}", "filterVerb": "filter", "prioritizeVerb": "prioritize",
            "weight": int(float(policy[len(EXTENDER_PREFIX):])), "httpTimeout": "1s", "nodeCacheCapable": True,
            "ignorable": True,
        }]
    return config


def profile_section(policy: str) -> dict[str, object]:
    """The standalone configuration's keys a `profile:FILE` policy sets (module docstring).
    ValueError for a file that cannot be read, is not a list or mapping, or goes through the
    extender; the plugins themselves are checked by the simulator's plan and the process."""
    path = profile_file_path(policy[len(PROFILE_POLICY):])
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"--on-cluster: {policy}: {exc}") from exc
    section: dict[str, object] = dict(data) if isinstance(data, dict) else {"profile": data}
    entries = section.get("profile")
    if not isinstance(entries, list):
        raise ValueError(f"--on-cluster: {policy}: expected a list of score plugins")
    if any(isinstance(e, dict) and e.get("extender") for e in entries):
        raise ValueError(f"--on-cluster: {policy}: an `extender: true` entry runs kube-scheduler with the "
                         f"extender; give {EXTENDER_PREFIX}W")
    return section


def _kubejoule_config(cluster: Cluster, nodes: Sequence[NodeSpec], path: Path,
                      profile: dict[str, object] | None = None) -> Path:
    """Our processes' configuration: the nodes' curves, their cores, the admin kubeconfig, and a
    `profile:FILE` policy's section."""
    path.write_text(yaml.safe_dump({
        "kubernetes": {"kubeconfig": str(cluster.kubeconfig)},
        "curves": {n.name: {"points": list(n.curve.as_points())} for n in nodes},
        "telemetry": {"node_cores": {n.name: n.cpu_cores for n in nodes}},
        **(profile or {}),
    }))
    return path


def _python(args: Sequence[str], name: str, cluster: Cluster) -> Process:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KUBECONFIG": str(cluster.kubeconfig)}
    return start(name, [sys.executable, "-m", "scheduler.cmd.cli", *args], cluster.directory / "logs", env=env)


def start_policy(cluster: Cluster, bin_dir: Path, policy: str, nodes: Sequence[NodeSpec], tag: str) -> PolicyScheduler:
    """Start what serves `policy` (module docstring), each process ready on return; `tag` makes
    the scheduler's name and logs unique per run. ComponentError when one does not start."""
    check_policy(policy)
    name = f"kj-{tag}"
    served = PolicyScheduler(policy, name)
    try:
        if policy == "kubejoule" or policy.startswith(PROFILE_POLICY):
            port = free_port()
            section = profile_section(policy) if policy.startswith(PROFILE_POLICY) else None
            config = _kubejoule_config(cluster, nodes, cluster.directory / f"{name}.yaml", section)
            # The same retry backoff as the policies' kube-scheduler (kube_scheduler_config).
            process = _python(["run", "--mode", "active", "--scheduler-name", name, "--no-leader-elect",
                               "--pod-initial-backoff-seconds", "1", "--pod-max-backoff-seconds", "1",
                               "--listen", f"127.0.0.1:{port}", "--config", str(config),
                               # its decisions kept beside its log, to compare with the simulator's
                               "--decision-log", str(cluster.directory / "logs" / f"{name}-decisions.jsonl")],
                              name, cluster)
            served.processes.append(process)
            wait_ready(process, lambda: probe_http("127.0.0.1", port, "/readyz"), READY_TIMEOUT_S)
            return served
        extender_port = None
        if policy.startswith(EXTENDER_PREFIX):
            extender_port = free_port()
            config = _kubejoule_config(cluster, nodes, cluster.directory / f"{name}-extender.yaml")
            ext = _python(["extender", "--listen", f"127.0.0.1:{extender_port}", "--mode", "active",
                           "--config", str(config)], f"{name}-extender", cluster)
            served.processes.append(ext)
            wait_ready(ext, lambda: probe_http("127.0.0.1", extender_port, "/readyz"), READY_TIMEOUT_S)
        path = cluster.directory / f"{name}-kube-scheduler.yaml"
        path.write_text(yaml.safe_dump(kube_scheduler_config(cluster, policy, name, extender_port)))
        port = free_port()
        process = start(f"{name}-kube-scheduler", [
            str(bin_dir / "kube-scheduler"), f"--config={path}", "--bind-address=127.0.0.1",
            f"--secure-port={port}", "--v=1"], cluster.directory / "logs")
        served.processes.append(process)
        wait_ready(process, lambda: probe_https_anonymous("127.0.0.1", port, "/healthz"), READY_TIMEOUT_S)
        return served
    except BaseException:
        served.stop()
        raise
