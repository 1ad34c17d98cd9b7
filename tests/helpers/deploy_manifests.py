"""Shared by the tests of daemonset/ (tests/deploy/test_deploy_*.py): the kustomize targets
they build, and small lookups over the built objects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tests.helpers.deploy_kustomize import DAEMONSET, Obj, build, user_kustomization

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_VERSION = "1.33"
NAMESPACE = "kubejoule-system"
COMPONENTS = (
    "servicemonitor", "extender", "pod-network", "calibration", "autoscaler-expander", "gpu", "bmc",
    "rebalancer",
)
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
# Capabilities the agent may be granted, each for a reason written in the manifests and docs.
ALLOWED_AGENT_CAPABILITIES = {"SYS_ADMIN", "SYS_PTRACE"}


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
