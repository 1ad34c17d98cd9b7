"""The simulated pods as the Kubernetes API would show them.

A trace row or a DaemonSet entry becomes a v1.Pod (JSON) with one container requesting the
CPU and memory given — a zero request is an absent key, as a pod that sets none, and no limits
(a trace gives none) — and its controlling owner. The simulator reads these objects with the
scheduler's own parser (`pod_info_from_k8s`), so a simulated pod's requests, kube-scheduler's
non-zero stand-ins for the requests it leaves out (100 m CPU, 200 MiB), its containers, owner
and priority are what the scheduler would compute for the real pod.
"""

from __future__ import annotations

from typing import Any

NAMESPACE = "sim"
CONTAINER = "main"
GIB_BYTES = 2**30
# cluster-autoscaler's annotation: "false" keeps the node from being scaled down.
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def requests_object(cpu_cores: float, memory_gib: float) -> dict[str, str]:
    """`resources.requests` of a container: CPU in millicores, memory in bytes; zero: absent."""
    requests = {}
    cpu = round(cpu_cores * 1000)
    memory = round(memory_gib * GIB_BYTES)
    if cpu:
        requests["cpu"] = f"{cpu}m"
    if memory:
        requests["memory"] = str(memory)
    return requests


def pod_object(
    name: str,
    uid: str,
    cpu_cores: float,
    memory_gib: float,
    owner_kind: str | None = None,
    owner_name: str | None = None,
    priority: int = 0,
    node_name: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A v1.Pod with one container (module docstring); `owner_kind` None: a bare pod."""
    metadata: dict[str, Any] = {"namespace": NAMESPACE, "name": name, "uid": uid}
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner_kind:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "batch/v1" if owner_kind == "Job" else "apps/v1",
                "kind": owner_kind,
                "name": owner_name or name,
                "uid": f"{uid}-owner",
                "controller": True,
            }
        ]
    container = {"name": CONTAINER, "resources": {"requests": requests_object(cpu_cores, memory_gib)}}
    spec: dict[str, Any] = {"containers": [container]}
    if priority:
        spec["priority"] = priority
    if node_name is not None:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
