"""The simulated power backend, for tests and benchmarks on the real control plane: "powering
on" a machine creates its Node, played by KWOK (annotation `kwok.x-k8s.io/node: fake`), once
`boot_seconds` have passed; "powering off" deletes the Node. A machine's Node carries its
capacity, labels, group label and power curve from the provider configuration, and its
providerID `kubejoule://NODE`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler.autoscaler.provider.backend import (
    OFF,
    ON,
    POWERING_ON,
    RESET_FORCE,
    RESET_GRACEFUL,
    RESET_ON,
    BackendError,
)
from scheduler.autoscaler.provider.settings import GROUP_LABEL, Machine

if TYPE_CHECKING:
    from scheduler.autoscaler.provider.kubeside import KubeSide

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
CURVE_ANNOTATION = "kubejoule.io/power-curve"


def kwok_node(machine: Machine) -> dict[str, object]:
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110", **machine.capacity}
    annotations = {KWOK_ANNOTATION: "fake"}
    if machine.curve is not None:
        annotations[CURVE_ANNOTATION] = json.dumps(list(machine.curve.as_points()))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": machine.node,
            "labels": {
                "kubernetes.io/hostname": machine.node, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "type": "kwok", GROUP_LABEL: machine.group,
                **machine.labels,
            },
            "annotations": annotations,
        },
        "spec": {"providerID": machine.provider_id},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


class SimulatedBackend:
    """`create_node`/`delete_node`/`node_exists`: the API calls (KubeSide's)."""

    def __init__(
        self,
        create_node: Callable[[dict[str, object]], None],
        delete_node: Callable[[str], None],
        node_exists: Callable[[str], bool],
        boot_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._create, self._delete, self._exists = create_node, delete_node, node_exists
        self.boot_seconds = boot_seconds
        self._clock = clock
        self._booting: dict[str, float] = {}  # node → when it was powered on
        self._lock = threading.Lock()

    def power_state(self, machine: Machine) -> str:
        with self._lock:
            started = self._booting.get(machine.node)
            if started is not None:
                if self._clock() - started < self.boot_seconds:
                    return POWERING_ON
                self._create(kwok_node(machine))
                del self._booting[machine.node]
                return ON
        return ON if self._exists(machine.node) else OFF

    def reset(self, machine: Machine, reset_type: str) -> None:
        with self._lock:
            if reset_type == RESET_ON:
                if machine.node not in self._booting and not self._exists(machine.node):
                    self._booting[machine.node] = self._clock()
            elif reset_type in (RESET_GRACEFUL, RESET_FORCE):
                self._booting.pop(machine.node, None)
                self._delete(machine.node)
            else:
                raise BackendError(f"simulated BMC: ResetType {reset_type} not supported", refused=True)


def on_the_api(side: KubeSide, boot_seconds: float) -> SimulatedBackend:
    """The simulated backend on a loopback control plane (`kubejoule-rl cluster`): KWOK Nodes
    created through the API with the credentials the command was given. Never the shipped
    ServiceAccount's: its role has no `nodes create` (tests/helpers/rbac_calls.py leaves this
    module out of the account's calls)."""
    from scheduler.cluster import kube

    def create(node: dict[str, object]) -> None:
        kube.create_node_object(side.api, node, side.timeout)

    return SimulatedBackend(create, side.delete_node, lambda name: side.node(name) is not None, boot_seconds)
