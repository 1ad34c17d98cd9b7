"""docs/reference/contracts.md: the extender's HTTP routes, read from its FastAPI app (each route's
method, path and docstring) with request and answer examples made by calling that app; the
gRPC services of the expander and the cloud provider (and the kubelet API the agent calls), read
from their .proto files by protoc (tools/docs/protos.py)."""

from __future__ import annotations

import json
import warnings
from typing import Any

from tools.docs.markdown import code, header, table
from tools.docs.protos import Contract, section

POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web-7d9f-x2k4q", "namespace": "shop", "uid": "0f2b8c1e-5d1a-4c47-9a0e-3f5b2d7c9e01"},
       "spec": {"containers": [{"name": "web", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}}


def _extender() -> Any:
    from scheduler.extender.app import create_app
    from scheduler.extender.core import Extender
    from scheduler.plugins.defaults import served_profile
    from scheduler.plugins.energy import EnergyPlugin
    from scheduler.telemetry.store import TelemetryStore

    return create_app(Extender(served_profile(EnergyPlugin()), TelemetryStore([])), manage_store=False)


def routes() -> list[tuple[str, str, str]]:
    """(methods, path, docstring) of every route the extender's app serves."""
    from fastapi.routing import APIRoute

    found = []
    for route in _extender().routes:
        if isinstance(route, APIRoute):
            doc = " ".join((route.endpoint.__doc__ or "").split())
            if not doc:
                raise ValueError(f"the extender's route {route.path} has no docstring (scheduler/extender/app.py)")
            found.append((", ".join(sorted(route.methods or ())), route.path, doc))
    return found


def exchanges() -> list[tuple[str, dict[str, Any], int, Any]]:
    """(path, request, status, answer) of a few calls to a shadow-mode extender with no telemetry yet."""
    with warnings.catch_warnings():  # starlette's note about httpx: not the page's business
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    calls = [
        ("/prioritize", {"Pod": POD, "NodeNames": ["node-1", "node-2"]}),
        ("/filter", {"Pod": POD, "NodeNames": ["node-1", "node-2"]}),
        ("/prioritize", {"Pod": POD, "NodeNames": "node-1"}),
    ]
    found = []
    with TestClient(_extender()) as client:
        for path, body in calls:
            response = client.post(path, json=body)
            found.append((path, body, response.status_code, response.json()))
    return found


def _provider_answers(name: str) -> bool:
    from scheduler.autoscaler.provider.service import CloudProviderService

    return hasattr(CloudProviderService, name)


def _expander_answers(name: str) -> bool:
    from scheduler.autoscaler import server

    return name == server.METHOD


CONTRACTS = (
    Contract("scheduler/autoscaler/protos/expander.proto",
             "Served by [`kubejoule-scheduler autoscaler-expander`](commands.md#kubejoule-scheduler-autoscaler-expander) "
             "over TLS; cluster-autoscaler calls it with `--expander=grpc` "
             "([The cluster-autoscaler expander](../autoscaler-expander.md)).", _expander_answers),
    Contract("scheduler/autoscaler/protos/externalgrpc.proto",
             "Served by [`kubejoule-scheduler cloud-provider`](commands.md#kubejoule-scheduler-cloud-provider) over "
             "TLS with a client certificate; cluster-autoscaler calls it with `--cloud-provider=externalgrpc` "
             "([Bare metal, switched off and on](../bare-metal.md)).", _provider_answers),
    Contract("agent/protos/podresources.proto",
             "The kubelet's API the agent calls (it serves nothing over gRPC): which pod holds which GPU "
             "(`--pod-resources-socket`).", None),
)


def render() -> tuple[str, dict[str, int]]:
    lines = header("Extender and expander contracts", "the extender's FastAPI app and the .proto files")
    lines += [
        "## The extender's HTTP routes",
        "",
        "[`kubejoule-scheduler extender`](commands.md#kubejoule-scheduler-extender) speaks kube-scheduler's "
        "extender protocol (`k8s.io/kube-scheduler/extender/v1`): JSON whose keys are PascalCase, as the "
        "Go structs have no JSON tags. `ExtenderArgs` is `{\"Pod\": v1.Pod, \"Nodes\": v1.NodeList or null, "
        "\"NodeNames\": [string] or null}`: `NodeNames` when kube-scheduler's extender configuration says "
        "`nodeCacheCapable: true`, else `Nodes`. A request the extender cannot read is a 400 with "
        "`{\"Error\": …}`; a body over its size limit a 413; one that would take the bodies held at once "
        "past their budget a 503 with `Retry-After` (the `extender` keys of [the configuration](config.md)). "
        "Setting it up: [The extender beside kube-scheduler](../scheduler.md).",
        "",
    ]
    found = routes()
    lines += table(("method", "path", "what it does"), ((m, code(p), d) for m, p, d in found))
    lines += ["Calls to an extender in shadow mode with no telemetry yet, and its answers, made by the "
              "app itself:", ""]
    for path, body, status, answer in exchanges():
        lines += [f"`POST {path}` with", "", "```json", json.dumps(body), "```", "",
                  f"answers {status}:", "", "```json", json.dumps(answer), "```", ""]
    lines += ["## gRPC services", "",
              "The messages as the `.proto` files in the repository declare them (the same package, "
              "service, method, message and field names and numbers as the upstream files they follow). "
              "`k8s.io.api.*` messages are Kubernetes objects in their protobuf encoding.", ""]
    methods = messages = 0
    for contract in CONTRACTS:
        more, count, kinds = section(contract)
        lines += more
        methods += count
        messages += kinds
    return "\n".join(lines).rstrip() + "\n", {"routes": len(found), "gRPC methods": methods, "messages": messages}
