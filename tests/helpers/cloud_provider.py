"""Fakes for the cloud provider's unit tests: a power backend whose machines do what they are
told (or not), a Kubernetes side of plain dicts, a clock moved by hand, and settings."""

from __future__ import annotations

from typing import Any

from scheduler.autoscaler.provider.backend import OFF, ON, RESET_ON, BackendError
from scheduler.autoscaler.provider.settings import Machine, ProviderSettings, parse_settings


class FakeBackend:
    def __init__(self, on: tuple[str, ...] = ()) -> None:
        self.power = {}  # node → PowerState; missing: Off
        for node in on:
            self.power[node] = ON
        self.resets: list[tuple[str, str]] = []
        self.ignore: set[str] = set()  # accept Resets, perform none
        self.silent: set[str] = set()  # no answer
        self.refuse: set[str] = set()  # refuse every Reset

    def power_state(self, machine: Machine) -> str:
        if machine.node in self.silent:
            raise BackendError(f"BMC of {machine.node}: no answer within 10 s")
        return self.power.get(machine.node, OFF)

    def reset(self, machine: Machine, reset_type: str) -> None:
        if machine.node in self.silent:
            raise BackendError(f"BMC of {machine.node}: no answer within 10 s")
        if machine.node in self.refuse:
            raise BackendError("Reset refused: HTTP 400", refused=True)
        self.resets.append((machine.node, reset_type))
        if machine.node not in self.ignore:
            self.power[machine.node] = ON if reset_type == RESET_ON else OFF


def node(name: str, cordoned: bool = False, ready: bool = True, taint: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"providerID": f"kubejoule://{name}"}
    if cordoned:
        spec["unschedulable"] = True
    if taint:
        spec["taints"] = [{"key": taint, "effect": "NoSchedule"}]
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubejoule.io/node-group": "rack"}},
        "spec": spec,
        "status": {"capacity": {"cpu": "32", "memory": "128Gi"}, "allocatable": {"cpu": "31", "memory": "120Gi"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod(name: str, on: str, owner: str = "ReplicaSet", mirror: bool = False, phase: str = "Running") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "ownerReferences": [{"kind": owner, "name": "x"}]}
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    return {"metadata": meta, "spec": {"nodeName": on}, "status": {"phase": phase}}


class FakeKube:
    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: list[dict[str, Any]] = []
        self.events: list[tuple[str, str, str, bool]] = []
        self.annotations: dict[str, dict[str, str]] = {}
        self.deleted: list[str] = []

    def node(self, name: str) -> dict[str, Any] | None:
        return self.nodes.get(name)

    def pods_on(self, name: str) -> list[dict[str, Any]]:
        return [p for p in self.pods if p["spec"]["nodeName"] == name]

    def delete_node(self, name: str) -> None:
        self.deleted.append(name)
        self.nodes.pop(name, None)

    def annotate(self, name: str, annotations: dict[str, str]) -> None:
        self.annotations.setdefault(name, {}).update(annotations)

    def event(self, node: str, uid: str, reason: str, message: str, warning: bool = False) -> None:
        self.events.append((node, reason, message, warning))

    def reasons(self, node: str) -> list[str]:
        return [r for n, r, _, _ in self.events if n == node]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def settings(**overrides: Any) -> ProviderSettings:
    """Group `rack`: min 1, max 4; machines m0 (least efficient) … m3, m3 not on the allow-list."""
    curves = {
        "m0": [200, 300, 340, 380, 420, 460, 500, 540, 580, 620, 660],
        "m1": [90, 120, 140, 160, 180, 200, 220, 240, 260, 280, 300],
        "m2": [100, 150, 170, 190, 210, 230, 250, 270, 290, 310, 330],
        "m3": [50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150],
    }
    raw: dict[str, Any] = {
        "backend": "simulated",
        "allow": ["m0", "m1", "m2"],
        "power_state_deadline_seconds": 60,
        "boot_deadline_seconds": 600,
        "graceful_shutdown_seconds": 120,
        "groups": [{"id": "rack", "min": 1, "max": 4, "cores": 32,
                    "machines": [{"node": n, "curve": c} for n, c in curves.items()]}],
    }
    raw.update(overrides)
    return parse_settings(raw)


class CloudProviderClient:
    """A client of the CloudProvider service built from the same .proto's descriptor, dialled as
    cluster-autoscaler dials it (TLS, the server's CA as the only root, its own certificate):
    `client.call("NodeGroups", pb.NodeGroupsRequest())`."""

    def __init__(self, target: str, server_ca_pem: bytes, client_pair: tuple[bytes, bytes] | None = None) -> None:
        import grpc

        from scheduler.autoscaler.protos import externalgrpc_pb2 as pb

        key, cert = client_pair if client_pair else (None, None)
        credentials = grpc.ssl_channel_credentials(root_certificates=server_ca_pem, private_key=key,
                                                   certificate_chain=cert)
        self.channel = grpc.secure_channel(target, credentials)
        service = pb.DESCRIPTOR.services_by_name["CloudProvider"]
        self.methods = {
            m.name: self.channel.unary_unary(
                f"/{service.full_name}/{m.name}",
                request_serializer=lambda message: message.SerializeToString(),
                response_deserializer=getattr(pb, m.output_type.name).FromString,
            )
            for m in service.methods
        }

    def call(self, method: str, request: Any, timeout: float = 10.0) -> Any:
        return self.methods[method](request, timeout=timeout)

    def close(self) -> None:
        self.channel.close()
