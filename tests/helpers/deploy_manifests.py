"""Shared by the tests of daemonset/ (tests/deploy/test_deploy_*.py): the kustomize targets
they build, and small lookups over the built objects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tests.helpers.deploy_kustomize import DAEMONSET, Obj, build, user_kustomization

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_VERSION = "1.33"
NAMESPACE = "kubejoule-system"
AGENT_NAMESPACE = "kubejoule-node"  # the agent's own, the only privileged one
COMPONENTS = (
    "servicemonitor", "extender", "calibration", "autoscaler-expander", "gpu", "bmc",
    "rebalancer", "cloud-provider", "carbon", "host-energy",
)
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
# Host paths the agent mounts (read-only, recursively where the kubelet can): /proc and the parts
# of /sys it reads — never /sys as a whole, whose submounts (bpf, debugfs, efivars) stay writable.
AGENT_HOST_PATHS = {
    "host-proc": ("/proc", "/host/proc"),
    "host-sys-class": ("/sys/class", "/host/sys/class"),
    "host-sys-devices-virtual": ("/sys/devices/virtual", "/host/sys/devices/virtual"),
    "host-sys-cgroup": ("/sys/fs/cgroup", "/host/sys/fs/cgroup"),
}


TARGETS = ["base", "overlays/intel", "overlays/amd", "intel+all-components"]


def by_kind(objects: list[Obj], kind: str) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def built(name: str, tmp_path: Path) -> list[Obj]:
    if name == "intel+all-components":
        return build(user_kustomization(tmp_path, "overlays/intel", COMPONENTS))
    return build(DAEMONSET / name)


def agent_of(objects: list[Obj]) -> Obj:
    return by_kind(objects, "DaemonSet")["kubejoule-agent"]


def containers(workload: Obj) -> Iterator[Obj]:
    yield from workload["spec"]["template"]["spec"]["containers"]
