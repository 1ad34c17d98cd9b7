"""A real-shaped kube-scheduler extender request (extender v1 JSON) and extenders over fixed
telemetry, shared by tests/scheduler/extender/test_sched_extender*.py and test_extender_*.py."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from benchmarks.harness.sched_sources import FixedSource
from common.curves import PowerCurve
from scheduler.domain.model import NodeTelemetry
from scheduler.extender.calls import ExtenderCall
from scheduler.extender.core import Extender
from scheduler.extender.wire import ExtenderArgs, json_response
from scheduler.plugins.defaults import served_profile
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.samples import NodeSample
from scheduler.telemetry.store import TelemetryStore

NOW = 1_700_000_000.0
GIB = 2**30

# A Pending pod as kube-scheduler sends it: defaulted fields, requests, limits, tolerations.
POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "checkout-6c9f7b5d4-x2x7q",
        "generateName": "checkout-6c9f7b5d4-",
        "namespace": "shop",
        "uid": "5f0c6f7e-3c1a-4f0e-9d55-2b8e8f6c1a11",
        "resourceVersion": "184467",
        "creationTimestamp": "2024-05-01T10:00:00Z",
        "labels": {"app": "checkout", "pod-template-hash": "6c9f7b5d4"},
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "checkout-6c9f7b5d4",
             "uid": "0d7a2c9e-8d0b-4c55-b8f3-7c1e6a0b9f21", "controller": True, "blockOwnerDeletion": True}
        ],
    },
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "registry.example/checkout:1.4.2",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "1500m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            },
            {
                "name": "proxy",
                "image": "registry.example/proxy:2.0",
                "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}},
            },
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": "default-scheduler",
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
    },
    "status": {"phase": "Pending", "qosClass": "Burstable"},
}



def answer(extender: Extender, args: ExtenderArgs) -> Any:
    """/prioritize's answer as kube-scheduler reads it (the JSON the app sends)."""
    return json.loads(bytes(json_response(extender.prioritize(args)).body))


def node_object(name: str, cpu: str = "8") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {
            "capacity": {"cpu": cpu, "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": cpu, "memory": "31Gi", "pods": "110", "ephemeral-storage": "95Gi"},
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "lastHeartbeatTime": "2024-05-01T09:59:50Z", "lastTransitionTime": "2024-04-01T00:00:00Z"}
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"architecture": "amd64", "kubeletVersion": "v1.33.1", "operatingSystem": "linux"},
        },
    }


# 2 cores requested on 8-core nodes: Δu = 0.25.
LINE_100_260 = PowerCurve.linear(100, 260).as_points()  # 160 W/unit → ΔP 40 W
LINE_50_130 = PowerCurve.linear(50, 130).as_points()  # 80 W/unit → ΔP 20 W


def telemetry() -> dict[str, NodeSample]:
    def sample(node: str, age: float, curve: tuple[float, ...] | None, watts: float | None = 150.0) -> NodeSample:
        return NodeSample(
            NodeTelemetry(node, NOW - age, watts=watts, source="rapl" if watts else "none",
                          utilization=0.5, curve_points=curve),
            pod_count=3,
        )

    return {
        "hungry": sample("hungry", 2.0, LINE_100_260),  # ΔP 40 W → score 100(1 − 40/50) = 20 → 2
        "frugal": sample("frugal", 2.0, LINE_50_130, watts=90.0),  # ΔP 20 W → 60 → 6
        # Without fresh telemetry (docs/scheduler.md, "Missing telemetry never wins"): the
        # node's curve at its worst utilization (a line: ΔP 20 W → 6), no curve → the floor, 0.
        "stale": sample("stale", 300.0, LINE_50_130),
        "nocurve": sample("nocurve", 1.0, None),
    }


class Recorder:
    def __init__(self) -> None:
        self.decisions: list[ExtenderCall] = []

    def record(self, decision: ExtenderCall) -> None:
        self.decisions.append(decision)


def make_extender(mode: str = "active", caps: dict[str, float] | None = None, refresh: bool = True,
                  recorder: Any = None, max_body_bytes: int = 1 << 20) -> Extender:
    store = TelemetryStore([FixedSource(telemetry())], node_cores=lambda: {}, clock=lambda: NOW)
    extender = Extender(
        served_profile(EnergyPlugin(delta_p_ref_watts=50.0)),
        store,
        mode=mode,
        power_caps_watts=caps,
        recorder=recorder if recorder is not None else Recorder(),
        max_body_bytes=max_body_bytes,
        clock=lambda: NOW,
    )
    if refresh:
        store.refresh_once()
    return extender


def with_value(doc: Any, path: Sequence[str | int], value: Any) -> Any:
    """A deep copy of `doc` with the value at `path` replaced (created if missing)."""
    doc = copy.deepcopy(doc)
    here = doc
    for key in path[:-1]:
        here = here[key] if isinstance(key, int) else here.setdefault(key, {})
    here[path[-1]] = value
    return doc
