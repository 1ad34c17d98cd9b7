"""The simulator's `kubejoule` expander (rl/simulation/autoscaler/scan.py) and the gRPC expander server choose the
same node group for the same state: the simulator's own scale-up options (its binpacking of
random Pending pods onto the bundled heterogeneous-autoscaler groups' templates, each group with
a random number of nodes still off) are sent to the
server over TLS as cluster-autoscaler would send them, with the groups' curves configured by group
id, in each protocol form."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from benchmarks.harness.expander_grpc import FORMS, best_options_request, ca_client, self_signed
from rl.simulation.autoscaler.scan import ScaleUpOption, binpack, kubejoule_expander
from rl.simulation.traces.scenario import load_node_groups, scenario_path
from scheduler.autoscaler.protos import k8s_core_v1_pb2
from scheduler.autoscaler.server import Expander, start_server
from scheduler.domain.model import NodeInfo, PodInfo, Resources

GIB = 1024**3


def node_message(info: NodeInfo) -> k8s_core_v1_pb2.Node:
    node = k8s_core_v1_pb2.Node()
    node.metadata.name = info.name
    node.metadata.labels.update(dict(info.labels))
    alloc = info.allocatable
    for resources in (node.status.capacity, node.status.allocatable):
        resources["cpu"].string = f"{alloc.cpu_millicores}m"
        resources["memory"].string = str(alloc.memory_bytes)
        resources["pods"].string = str(alloc.pods)
    return node


def pod_message(info: PodInfo) -> k8s_core_v1_pb2.Pod:
    pod = k8s_core_v1_pb2.Pod()
    pod.metadata.name, pod.metadata.namespace, pod.metadata.uid = info.name, info.namespace, info.uid
    requests = pod.spec.containers.add(name="app").resources.requests
    requests["cpu"].string = f"{info.requests.cpu_millicores}m"
    requests["memory"].string = str(info.requests.memory_bytes)
    return pod


def random_pending(rng: random.Random) -> list[tuple[int, PodInfo]]:
    pods = []
    for i in range(rng.randint(1, 40)):
        cpu = rng.choice([100, 250, 500, 1000, 2000, 4000])
        memory = rng.choice([0.25, 0.5, 1, 2, 4]) * GIB
        requests = Resources(cpu_millicores=cpu, memory_bytes=round(memory), pods=1)
        pods.append((i, PodInfo("sim", f"pod-{i}", f"uid-{i}", requests)))
    return pods


@pytest.fixture(scope="module")
def groups() -> dict[str, tuple[NodeInfo, int]]:
    specs = load_node_groups(scenario_path("heterogeneous-autoscaler.yaml"))
    out: dict[str, tuple[NodeInfo, int]] = {}
    for spec in specs:
        template, count = out.get(spec.group, (spec.node_info(), 0))
        out[spec.group] = (template, count + 1)
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[bytes, str, dict]]:
    specs = load_node_groups(scenario_path("heterogeneous-autoscaler.yaml"))
    curves = {spec.group: spec.curve for spec in specs}
    tls = self_signed(Path(tmp_path_factory.mktemp("tls")))
    server, port = start_server(Expander(node_groups=curves), "127.0.0.1", 0, tls.cert_pem, tls.key_pem)
    try:
        yield tls.cert_pem, f"localhost:{port}", curves
    finally:
        server.stop(grace=None)


def test_simulator_and_server_choose_the_same_group(
    groups: dict[str, tuple[NodeInfo, int]], served: tuple[bytes, str, dict]
) -> None:
    cert, target, curves = served
    winners = set()
    with ca_client(cert, target) as best_options:
        for seed in range(40):
            rng = random.Random(seed)
            pending = random_pending(rng)
            infos = dict(pending)
            options = []
            for group, (template, count) in groups.items():
                off = rng.randint(0, count)  # the group's nodes still powered off
                nodes, placed = binpack(pending, template, Resources(), 0, off)
                if nodes:
                    options.append(ScaleUpOption(group, nodes, placed, template))
            if len(options) < 2:
                continue
            simulated = kubejoule_expander(curves, infos.__getitem__)(options, rng).group
            request = best_options_request(
                [(o.group, o.node_count, [pod_message(infos[i]) for i in o.pods]) for o in options],
                {o.group: node_message(o.template) for o in options},
                FORMS[seed % len(FORMS)],
            )
            try:
                answer = best_options(request, timeout=30)
            except grpc.RpcError as exc:  # pragma: no cover - a failure message, not a branch
                raise AssertionError(f"seed {seed}: {exc.code()} {exc.details()}") from exc
            assert [o.nodeGroupId for o in answer.options] == [simulated], f"seed {seed}"
            winners.add(simulated)
    # The states differ enough that more than one group wins (the test compares choices, not a
    # constant).
    assert len(winners) >= 2, winners
