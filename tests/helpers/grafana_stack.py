"""The live stack of tests/deploy/test_grafana_live.py (see its docstring): agents on fixture host
trees, the extender, the standalone scheduler and Prometheus scraping them as our ServiceMonitors
describe, all real processes on 127.0.0.1."""

from __future__ import annotations

import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.harness.processes import free_port, wait_http
from tests.helpers.deploy_kustomize import build, user_kustomization
from tests.helpers.grafana_queries import (
    ESTIMATED_NODE,
    GPU_NODE,
    NAMESPACES,
    RAPL_NODE,
    ROOT,
    panel_queries,
    substitute,
)
from tests.helpers.prometheus import (
    PrometheusProcess,
    prometheus_server,
)

WORKLOAD_TREE = ROOT / "tests" / "fixtures" / "workloads" / "v2-systemd-containerd" / "before"
GPU_POD_UID = "9a9a9a9a-0000-4000-8000-000000000001"
AGENT_INTERVAL_SECONDS = 0.5
TRAFFIC_PERIOD_SECONDS = 0.5  # a /prioritize and a /filter this often; a pod every other time
MAX_TRAFFIC_PODS = 60  # 50m each: far from filling the two 4-CPU nodes
DATA_TIMEOUT_SECONDS = 60.0

PROFILE = {
    "schema": "kubejoule.calibration/v1",
    "idle_watts": 12.0,
    "max_watts": 60.0,
    "model": "points",
    "points": [12.0, 17.0, 22.0, 26.5, 31.0, 35.0, 39.5, 44.0, 49.0, 54.5, 60.0],
    "wall_correction": {"intercept_watts": 20.0, "slope": 1.08},
}




@dataclass
class Stack:
    prometheus: PrometheusProcess
    at: float  # the instant (Unix seconds) every query is evaluated at
    # host:port of the running process behind each workload of daemonset/ (one agent for the
    # DaemonSet)
    workloads: dict[str, str] = field(default_factory=dict)

    def query(self, promql: str) -> list[dict[str, Any]]:
        data = self.prometheus.api("/api/v1/query", {"query": promql, "time": f"{self.at:.3f}"})
        return list(data.get("result") or [])


def has_data(result: Sequence[Mapping[str, Any]]) -> bool:
    return any(not math.isnan(float(series["value"][1])) for series in result)


def _relabel(rule: Mapping[str, Any]) -> dict[str, Any]:
    """A ServiceMonitor RelabelConfig (camelCase) as Prometheus' relabel_config."""
    names = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    return {names.get(k, k): v for k, v in rule.items()}


def service_monitor_jobs(
    work: Path, targets: Mapping[str, Sequence[str]], nodes: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """One scrape job per ServiceMonitor we ship (named after it), with its endpoint's path,
    honorLabels and relabelings, scraping `targets[monitor name]` (host:port) and labelling them
    as the operator does (NODES: host:port → the node its pod runs on)."""
    directory = work / "monitors"
    directory.mkdir()
    objects = build(user_kustomization(directory, "base", ("servicemonitor", "extender")))
    jobs = []
    for monitor in (o for o in objects if o["kind"] == "ServiceMonitor"):
        name = monitor["metadata"]["name"]
        (endpoint,) = monitor["spec"]["endpoints"]
        jobs.append(
            {
                "job_name": name,
                "metrics_path": endpoint.get("path", "/metrics"),
                "honor_labels": endpoint.get("honorLabels", False),
                "relabel_configs": [_relabel(r) for r in endpoint.get("relabelings", [])],
                "metric_relabel_configs": [_relabel(r) for r in endpoint.get("metricRelabelings", [])],
                # The target labels the Prometheus Operator attaches, which honorLabels must
                # not let override the workloads' own namespace and pod labels.
                "static_configs": [
                    {
                        "targets": [target],
                        "labels": {
                            "namespace": "kubejoule-system",
                            "pod": f"{name}-x1",
                            "service": name,
                            # what Kubernetes service discovery gives the relabelings
                            "__meta_kubernetes_pod_node_name": (nodes or {}).get(target, ""),
                        },
                    }
                    for target in targets[name]
                ],
            }
        )
    assert {job["job_name"] for job in jobs} == set(targets)
    return jobs


def write_network_counters(procfs: Path) -> None:
    """The node's interfaces (<procfs>/1/net/dev) and each fixture pod's own, as the agent reads
    them (agent/device/network.py): a fake tree has no network of its own."""
    header = "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes\n"

    def row(name: str, rx: int, tx: int) -> str:
        return f"{name:>6}: {rx} 10 0 0 0 0 0 0 {tx} 10 0 0 0 0 0 0\n"

    host = procfs / "1" / "net"
    host.mkdir(parents=True, exist_ok=True)
    (host / "dev").write_text(header + row("lo", 100, 100) + row("eth0", 5_000_000, 2_000_000))
    workload = json.loads((WORKLOAD_TREE.parent / "workload.json").read_text())
    for index, fixture_pod in enumerate(workload["pods"]):
        for container in fixture_pod["containers"]:
            for pid in container["pids"]:
                if (procfs / str(pid)).is_dir():
                    (procfs / str(pid) / "net").mkdir(exist_ok=True)
                    (procfs / str(pid) / "net" / "dev").write_text(
                        header + row("lo", 1, 1) + row("eth0", 1000 * (index + 1), 500 * (index + 1))
                    )


@contextmanager
def gpu_and_bmc(work: Path) -> Iterator[tuple[list[str], dict[str, str]]]:
    """Two GPUs drawing 150 W and 60 W (one allocated to the first fixture pod, one shared by its
    process) and a BMC reading 500 W: the agent's arguments and environment."""
    from benchmarks.harness import nvml_standin, redfish_mockup
    from benchmarks.harness.podresources_server import GPU, serving

    workload = json.loads((WORKLOAD_TREE.parent / "workload.json").read_text())
    first = workload["pods"][0]
    state = nvml_standin.NvmlState.with_gpus(work / "nvml.state", 2)
    for gpu, watts in zip(state.gpus, (150, 60), strict=True):
        gpu.energy_rate_mw = gpu.power_mw = watts * 1000
    state.gpus[1].processes = [(first["containers"][1]["pids"][0], 40, 0)]
    state.write()
    credentials = work / "bmc"
    credentials.mkdir()
    (credentials / "username").write_text(redfish_mockup.USERNAME)
    (credentials / "password").write_text(redfish_mockup.PASSWORD)
    socket = work / "kubelet.sock"
    with serving(socket, [(NAMESPACES[0], "trainer-0", "app", GPU, [state.gpus[0].uuid])]), \
            redfish_mockup.serve(redfish_mockup.environment(500.0)) as bmc:
        yield [
            "--nvml-library", str(nvml_standin.build()), "--pod-resources-socket", str(socket),
            "--bmc-url", bmc.url, "--bmc-credentials", str(credentials), "--bmc-interval", "0.5",
            "--bmc-insecure-http",  # the mockup speaks plain http
        ], {**os.environ, nvml_standin.STATE_ENV: str(state.path)}


def _tick_driver(agent: Any, stop: threading.Event, **changes: Any) -> None:
    """After every sample, advance the given counters once more."""
    while not stop.is_set():
        try:
            agent.advance(**changes, wait=False, sync=True)
        except Exception:  # noqa: BLE001 - the agent is stopping
            return


def _node_object(name: str) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": resources, "allocatable": resources},
    }


def _post(url: str, payload: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        body: dict[str, Any] = json.loads(response.read())
    return body


def _extender_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "app:1",
                    "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                }
            ]
        },
    }


@dataclass
class Traffic:
    """Scheduling traffic until stopped: the extender's two verbs every period (with a node
    it has never heard of: a fallback), and a pod for the standalone scheduler every other."""

    extender_url: str
    create_pod: Callable[[int], None]
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)

    def run(self) -> None:
        names = [RAPL_NODE, ESTIMATED_NODE, "node-unknown"]
        # The Nodes.items form carries the nodes' CPUs, which a power-cap prediction needs.
        items = {"apiVersion": "v1", "kind": "NodeList", "items": [_node_object(n) for n in names]}
        tick = 0
        while not self.stop.wait(TRAFFIC_PERIOD_SECONDS):
            pod = _extender_pod(f"web-{tick}")
            try:
                _post(self.extender_url + "/prioritize", {"Pod": pod, "NodeNames": names})
                answer = _post(self.extender_url + "/filter", {"Pod": pod, "Nodes": items})
                if answer["Error"]:
                    self.errors.append(f"/filter: {answer}")
                if tick % 2 == 0 and tick // 2 < MAX_TRAFFIC_PODS:
                    self.create_pod(tick // 2)
            except Exception as exc:  # noqa: BLE001 - reported by the fixture
                self.errors.append(repr(exc))
            tick += 1


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "scheduler.cmd.cli", *args, "--log-level", "warning"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(processes: Sequence[subprocess.Popen[str]]) -> None:
    """SIGTERM to all at once, then wait for each (kill after 10 s)."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _in_parallel(calls: Sequence[Callable[[], Any]]) -> None:
    """Run the calls in threads, wait for all, and raise the first error."""
    errors: list[BaseException] = []

    def run(call: Callable[[], Any]) -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _wait_for_data(prometheus: PrometheusProcess, timeout_seconds: float) -> float:
    """The first instant at which every panel query returns data (or the last one tried)."""
    queries = [substitute(q) for q in panel_queries()]
    deadline = time.monotonic() + timeout_seconds
    while True:
        at = Stack(prometheus, time.time())
        if all(has_data(at.query(q)) for q in queries) or time.monotonic() > deadline:
            return at.at
        time.sleep(0.5)



@contextmanager
def running_stack(work: Path) -> Iterator[Stack]:
    """Start the stack in `work`, wait until every panel query returns data, yield it at that
    instant; stop it on exit."""
    from benchmarks.harness.agent_kube_emulator import EmulatedCluster as AgentApi
    from benchmarks.harness.standalone_kmock import EmulatedCluster
    from benchmarks.harness.standalone_objects import node as node_object
    from benchmarks.harness.standalone_objects import pod as pod_object
    from tests.helpers.agent_proc import AgentProcess

    profile = work / "profile.yaml"
    profile.write_text(yaml.safe_dump(PROFILE))
    # Every address is chosen up front, so Prometheus starts first: it scrapes nothing for its
    # first ~5 s (its discovery manager's update period), and everything else starts meanwhile.
    port = {name: free_port() for name in ("rapl", "estimated", "gpu", "extender", "standalone")}
    address = {name: f"127.0.0.1:{p}" for name, p in port.items()}
    extender_url = f"http://{address['extender']}"
    jobs = service_monitor_jobs(
        work,
        {
            "kubejoule-agent": [address["rapl"], address["estimated"], address["gpu"]],
            "kubejoule-extender": [address["extender"]],
            "kubejoule-scheduler": [address["standalone"]],
        },
        {address["rapl"]: RAPL_NODE, address["estimated"]: ESTIMATED_NODE, address["gpu"]: GPU_NODE},
    )

    with ExitStack() as cleanup:
        api = AgentApi()
        cleanup.callback(api.close)  # last: kmock's DNS patches unwind in order
        api.start()
        prom = cleanup.enter_context(prometheus_server(scrape_configs=jobs, scrape_interval="1s"))

        now = datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        workload = json.loads((WORKLOAD_TREE.parent / "workload.json").read_text())
        for index, fixture_pod in enumerate(workload["pods"]):
            namespace = NAMESPACES[index % len(NAMESPACES)]
            api.add_pod(namespace, fixture_pod["name"], RAPL_NODE, uid=fixture_pod["uid"])
            containers = {
                c["name"]: ("250m", "64Mi") for c in fixture_pod["containers"] if c["name"] != "POD"
            }
            api.set_pod_metrics(namespace, fixture_pod["name"], containers, now)
        api.set_node_metrics(RAPL_NODE, "1500m", "3Gi", now)
        api.set_node_metrics(GPU_NODE, "2", "8Gi", now)
        kubeconfig = api.write_kubeconfig(work / "kubeconfig")
        agent_args = [
            "--process-top", "5", "--power-profile", str(profile),
            "--kubeconfig", str(kubeconfig), "--metrics-server-interval", "1",
            "--carbon-intensity", "350",  # the carbon row's counters and gauge
        ]  # fmt: skip
        rapl, estimated = (
            AgentProcess(
                WORKLOAD_TREE,
                interval=AGENT_INTERVAL_SECONDS,
                args=[*agent_args, "--listen", address[name]],  # the last --listen wins
                node=node,
            )
            for name, node in (("rapl", RAPL_NODE), ("estimated", ESTIMATED_NODE))
        )
        for agent in (rapl, estimated):
            write_network_counters(agent.procfs)
        shutil.rmtree(estimated.sysfs / "class" / "powercap")
        shutil.rmtree(estimated.sysfs / "devices" / "virtual" / "powercap")
        cleanup.push(rapl)  # stopped (and their copies removed) on the way out
        cleanup.push(estimated)
        gpu_args, gpu_env = cleanup.enter_context(gpu_and_bmc(work))
        gpu = AgentProcess(WORKLOAD_TREE, interval=AGENT_INTERVAL_SECONDS, node=GPU_NODE, env=gpu_env,
                           args=[*agent_args, *gpu_args, "--listen", address["gpu"]])
        # the GPU node's copy of the first pod is another pod (its own UID), named by the API
        first = workload["pods"][0]
        cgroup = first["cgroup"].replace(first["uid"].replace("-", "_"), GPU_POD_UID.replace("-", "_"))
        (gpu.sysfs / "fs/cgroup" / first["cgroup"]).rename(gpu.sysfs / "fs/cgroup" / cgroup)
        api.add_pod(NAMESPACES[0], "trainer-0", GPU_NODE, uid=GPU_POD_UID)
        container = first["containers"][1]  # its process uses GPU 1
        (gpu.procfs / str(container["pids"][0]) / "cgroup").write_text(f"0::/{cgroup}/{container['cgroup']}\n")
        write_network_counters(gpu.procfs)
        cleanup.push(gpu)

        cluster = cleanup.enter_context(EmulatedCluster())
        for name in (RAPL_NODE, ESTIMATED_NODE):
            cluster.create_node(node_object(name))
        cluster.create_pod(pod_object("batch-first", requests={"cpu": "500m"}))
        cluster.create_pod(pod_object("too-big", requests={"cpu": "64"}))  # fits nowhere
        cluster.fail_next_bindings(1)  # the first binding fails: a binding error, then a retry

        config = {
            "mode": "shadow",
            "listen": address["extender"],
            "refresh_seconds": 0.5,
            # /filter excludes the RAPL node: the filtered-nodes panel.
            "power_caps_watts": {RAPL_NODE: 1.0},
            "telemetry": {
                "agents": {
                    "static": {
                        RAPL_NODE: f"http://{address['rapl']}",
                        ESTIMATED_NODE: f"http://{address['estimated']}",
                        "node-dead": "http://127.0.0.1:9/",  # nothing listens: telemetry errors
                    },
                    "timeout_seconds": 1,
                }
            },
        }
        (work / "scheduler.yaml").write_text(yaml.safe_dump(config))
        standalone_config = {k: v for k, v in config.items() if k != "listen"}
        standalone_config["kubernetes"] = {"host": cluster.url}
        (work / "standalone.yaml").write_text(yaml.safe_dump(standalone_config))
        processes = [
            _start(["extender", "--config", str(work / "scheduler.yaml")]),
            _start(
                [
                    "run", "--config", str(work / "standalone.yaml"),
                    "--listen", address["standalone"],
                    "--decision-log", str(work / "decisions.jsonl"), "--identity", "replica-a",
                    "--lease-namespace", "kubejoule-system", "--lease-duration", "2",
                    "--renew-deadline", "1.5", "--retry-period", "0.2", "--seed", "1",
                ]
            ),
        ]  # fmt: skip
        cleanup.callback(_stop, processes)
        _in_parallel([rapl.start, estimated.start, gpu.start])
        cleanup.callback(_in_parallel, [rapl.stop, estimated.stop, gpu.stop])  # before their __exit__

        # The RAPL node at 40 W, half busy, with host processes using CPU (the process top-N);
        # the RAPL-less node busy at about 50 %.
        rapl.drive(40.0, utilization=0.5, process_share={900: 0.2, 901: 0.1})
        gpu.drive(40.0, utilization=0.5, process_share={900: 0.2, 901: 0.1})
        stop_ticks = threading.Event()
        ticks = threading.Thread(
            target=_tick_driver,
            args=(estimated, stop_ticks),
            kwargs={"cpu_ticks": {"user": 100, "idle": 100}},
            daemon=True,
        )
        ticks.start()
        cleanup.callback(ticks.join, 10)
        cleanup.callback(stop_ticks.set)

        wait_http(extender_url + "/healthz", processes[0])
        wait_http(f"http://{address['standalone']}/healthz", processes[1])
        traffic = Traffic(
            extender_url,
            lambda i: cluster.create_pod(pod_object(f"batch-{i}", requests={"cpu": "50m"})),
        )
        sender = threading.Thread(target=traffic.run, daemon=True)
        sender.start()
        cleanup.callback(sender.join, 10)
        cleanup.callback(traffic.stop.set)

        at = _wait_for_data(prom, DATA_TIMEOUT_SECONDS)
        assert not traffic.errors, traffic.errors[:5]
        yield Stack(
            prom,
            at,
            {
                "kubejoule-agent": address["rapl"],
                "kubejoule-extender": address["extender"],
                "kubejoule-scheduler": address["standalone"],
            },
        )
