"""The rules a machine is switched off by, on plain Node and Pod dicts: its Node cordoned (as
`kubectl cordon` does, or cluster-autoscaler's ToBeDeletedByClusterAutoscaler taint, the way CA
marks a node it drains), and no pod left on it but DaemonSet pods, mirror pods and finished
pods."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from common.curves import PowerCurve
from common.jsonvalue import subobject, subobjects
from scheduler.autoscaler.provider.settings import Machine

CA_DELETION_TAINT = "ToBeDeletedByClusterAutoscaler"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def cordoned(node: Mapping[str, object]) -> bool:
    spec = subobject(node, "spec")
    if spec.get("unschedulable"):
        return True
    return any(t.get("key") == CA_DELETION_TAINT for t in subobjects(spec, "taints"))


def ready(node: Mapping[str, object]) -> bool:
    conditions = subobjects(subobject(node, "status"), "conditions")
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def blocking_pods(pods: Iterable[Mapping[str, object]]) -> list[str]:
    """namespace/name of the pods that forbid switching their node off: every pod that is not a
    DaemonSet's, not a mirror (static) pod, and not finished."""
    found = []
    for pod in pods:
        meta = subobject(pod, "metadata")
        if subobject(pod, "status").get("phase") in ("Succeeded", "Failed"):
            continue
        if MIRROR_ANNOTATION in subobject(meta, "annotations"):
            continue
        if any(o.get("kind") == "DaemonSet" for o in subobjects(meta, "ownerReferences")):
            continue
        found.append(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
    return sorted(found)


def _cores(machine: Machine) -> float:
    if machine.cores:
        return machine.cores
    cpu = str(machine.capacity.get("cpu", ""))
    try:
        return float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)
    except ValueError:
        return 0.0


def efficiency_key(machine: Machine, utilization: float) -> tuple[bool, float, str]:
    """Sort key, most efficient first: watts per core at `utilization` on the measured curve
    (watts alone when the core count is unknown); machines without a curve last, by name."""
    curve: PowerCurve | None = machine.curve
    if curve is None:
        return (True, 0.0, machine.node)
    watts = curve.watts(utilization)
    cores = _cores(machine)
    return (False, watts / cores if cores > 0 else watts, machine.node)


def most_efficient(machines: Sequence[Machine], utilization: float) -> list[Machine]:
    return sorted(machines, key=lambda m: efficiency_key(m, utilization))
