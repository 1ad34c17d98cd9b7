"""Every dashboard query returns data from a real Prometheus.

The stack, all real processes on 127.0.0.1:
- two `kubejoule-agent run` on fixture host trees whose counters the test advances: one with
  RAPL (source rapl) and one without powercap but with a calibration curve (source estimated),
  both with a calibration profile, VMs (qemu processes in the tree) and the process top-N, and a
  Kubernetes API emulator (kmock) serving the pods' names and Metrics Server data;
- `kubejoule-scheduler extender` scraping both agents (and a dead target, for telemetry errors),
  with a power cap that /filter applies, and /prioritize and /filter requests sent to it;
- `kubejoule-scheduler run` (standalone, shadow mode, leader election) against a Kubernetes API
  emulator (kmock) holding the two nodes, binding pods created during the run, one binding
  failed on purpose (binding errors) and one pod that fits nowhere (unschedulable);
- Debian's `prometheus` scraping the agents, the extender and the scheduler (honor_labels, as
  the ServiceMonitor sets it), every second.

Then each panel's queries, with the template variables substituted as Grafana would, are run as
instant queries; each must return at least one series. Variable queries (label_values) too.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.prometheus import (
    PrometheusProcess,
    free_port,
    prometheus_binary,
    prometheus_server,
)

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "grafana" / "dashboards"
WORKLOAD_TREE = ROOT / "tests" / "fixtures" / "workloads" / "v2-systemd-containerd" / "before"
RAPL_NODE = "node-rapl"
ESTIMATED_NODE = "node-est"
AGENT_INTERVAL_SECONDS = 0.5
NAMESPACES = ("shop", "analytics")  # given to the fixture's pods through the API
RANGE = "1m"  # $__range: the data is seconds old, any range covering it will do
RATE_INTERVAL = "5s"  # $__rate_interval: 5 scrapes at 1 s

PROFILE = {
    "schema": "kubejoule.calibration/v1",
    "idle_watts": 12.0,
    "max_watts": 60.0,
    "model": "points",
    "points": [12.0, 17.0, 22.0, 26.5, 31.0, 35.0, 39.5, 44.0, 49.0, 54.5, 60.0],
    "wall_correction": {"intercept_watts": 20.0, "slope": 1.08},
}


def subcommands(parser: argparse.ArgumentParser) -> set[str]:
    """The subcommand names an argparse parser accepts."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel: str
    expr: str
    panel_interval: str | None

    @property
    def id(self) -> str:
        return f"{self.dashboard}:{self.panel}:{self.expr[:40]}"


def panel_queries() -> list[Query]:
    queries = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                queries.append(
                    Query(dashboard["uid"], panel["title"], target["expr"], panel.get("interval"))
                )
    return queries


def variable_queries() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        dashboard = json.loads(path.read_text())
        for variable in dashboard["templating"]["list"]:
            if variable["type"] == "query":
                match = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["query"]["query"])
                assert match, variable
                found.append((dashboard["uid"], match.group(1), match.group(2)))
    return found


def substitute(query: Query) -> str:
    """The query as Grafana sends it: variables replaced by the values a user would pick."""
    values = {
        "__range": RANGE,
        "__rate_interval": RATE_INTERVAL,
        "__interval": query.panel_interval or "2s",
        # Node detail has a single-value node variable; the others are multi-value, which
        # Grafana renders as a regex alternation for =~.
        "node": RAPL_NODE
        if query.dashboard == "kubejoule-node"
        else f"({RAPL_NODE}|{ESTIMATED_NODE})",
        "namespace": "(" + "|".join(NAMESPACES) + ")",  # both selected
    }

    def replace(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return re.sub(r"\$\{?(\w+)\}?", replace, query.expr)


# -- the stack -------------------------------------------------------------------------------


def _tick_driver(agent: Any, stop: threading.Event, **changes: Any) -> None:
    """After every sample, advance the given counters (CPU ticks, process ticks) once more."""
    while not stop.is_set():
        try:
            agent.advance(**changes, wait=False, sync=True)
        except Exception:  # noqa: BLE001 - the agent is stopping
            return


def _node(name: str) -> dict[str, Any]:
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


def _pod(name: str) -> dict[str, Any]:
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
class Stack:
    prometheus: PrometheusProcess
    extender_url: str


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", *args, "--log-level", "warning"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_http(url: str, process: subprocess.Popen[str], timeout_seconds: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            error = process.stderr.read() if process.stderr is not None else ""
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}: {error}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout_seconds} s")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if prometheus_binary() is None:
        pytest.skip("Debian's `prometheus` binary is not installed (run `make system-deps`)")
    from agent import cli as agent_cli

    if "run" not in subcommands(agent_cli.build_parser()):
        pytest.skip("`kubejoule-agent run` is not implemented yet")
    from tests.helpers.agent_proc import AgentProcess

    work = tmp_path_factory.mktemp("grafana-live")
    profile = work / "profile.yaml"
    profile.write_text(yaml.safe_dump(PROFILE))
    from tests.helpers.agent_kube_emulator import EmulatedCluster as AgentApi

    api = AgentApi()
    api.start()
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
    kubeconfig = api.write_kubeconfig(work / "kubeconfig")
    agent_args = [
        "--process-top", "5", "--calibration", str(profile),
        "--kubeconfig", str(kubeconfig), "--metrics-server-interval", "1",
    ]  # fmt: skip

    rapl = AgentProcess(
        WORKLOAD_TREE, interval=AGENT_INTERVAL_SECONDS, args=agent_args, node=RAPL_NODE
    )
    estimated = AgentProcess(
        WORKLOAD_TREE, interval=AGENT_INTERVAL_SECONDS, args=agent_args, node=ESTIMATED_NODE
    )
    shutil.rmtree(estimated.sysfs / "class" / "powercap")
    shutil.rmtree(estimated.sysfs / "devices" / "virtual" / "powercap")
    stop_driver = threading.Event()
    processes: list[subprocess.Popen[str]] = []
    from tests.helpers.standalone_kmock import EmulatedCluster
    from tests.helpers.standalone_objects import node as node_object
    from tests.helpers.standalone_objects import pod as pod_object

    try:
        with rapl, estimated, EmulatedCluster() as cluster:
            for name in (RAPL_NODE, ESTIMATED_NODE):
                cluster.create_node(node_object(name))
            rapl.drive(40.0, utilization=0.5)
            drivers = [
                # Host processes using CPU, for the process top-N (pids of the fixture's host processes).
                threading.Thread(
                    target=_tick_driver,
                    args=(rapl, stop_driver),
                    kwargs={"process_ticks": {900: 20, 901: 10}},
                ),
                # The RAPL-less node, busy at about 50 %.
                threading.Thread(
                    target=_tick_driver,
                    args=(estimated, stop_driver),
                    kwargs={"cpu_ticks": {"user": 100, "idle": 100}},
                ),
            ]
            for driver in drivers:
                driver.daemon = True
                driver.start()
            try:
                port = free_port()
                config = {
                    "mode": "shadow",
                    "listen": f"127.0.0.1:{port}",
                    "refresh_seconds": 0.5,
                    "power_caps_watts": {
                        RAPL_NODE: 1.0
                    },  # /filter excludes it: the filtered-nodes panel
                    "telemetry": {
                        "agents": {
                            "static": {
                                RAPL_NODE: rapl.url,
                                ESTIMATED_NODE: estimated.url,
                                "node-dead": "http://127.0.0.1:9/",  # nothing listens: telemetry errors
                            },
                            "timeout_seconds": 1,
                        }
                    },
                }
                (work / "scheduler.yaml").write_text(yaml.safe_dump(config))
                extender = _start(["extender", "--config", str(work / "scheduler.yaml")])
                processes.append(extender)
                extender_url = f"http://127.0.0.1:{port}"
                _wait_http(extender_url + "/healthz", extender)

                standalone_port = free_port()
                standalone_config = {k: v for k, v in config.items() if k != "listen"}
                standalone_config["kubernetes"] = {"host": cluster.url}
                (work / "standalone.yaml").write_text(yaml.safe_dump(standalone_config))
                cluster.create_pod(pod_object("batch-0", requests={"cpu": "500m"}))
                cluster.create_pod(pod_object("too-big", requests={"cpu": "64"}))  # fits nowhere
                cluster.fail_next_bindings(
                    1
                )  # the first binding fails: a binding error, then a retry
                standalone = _start(
                    [
                        "run", "--config", str(work / "standalone.yaml"),
                        "--listen", f"127.0.0.1:{standalone_port}",
                        "--collector", str(work / "decisions.jsonl"), "--identity", "replica-a",
                        "--lease-namespace", "kubejoule-system", "--lease-duration", "2",
                        "--renew-deadline", "1.5", "--retry-period", "0.2", "--seed", "1",
                    ]
                )  # fmt: skip
                processes.append(standalone)
                standalone_url = f"http://127.0.0.1:{standalone_port}"
                _wait_http(standalone_url + "/healthz", standalone)
                scrape = [
                    {
                        "job_name": "kubejoule-agent",
                        "honor_labels": True,  # as the ServiceMonitor: keep the workload's namespace/pod
                        "static_configs": [{"targets": [rapl.url[7:], estimated.url[7:]]}],
                    },
                    {
                        "job_name": "kubejoule-extender",
                        "honor_labels": True,
                        "static_configs": [{"targets": [extender_url[7:]]}],
                    },
                    {
                        "job_name": "kubejoule-scheduler",
                        "honor_labels": True,
                        "static_configs": [{"targets": [standalone_url[7:]]}],
                    },
                ]
                with prometheus_server(scrape_configs=scrape, scrape_interval="1s") as prom:
                    prom.wait_for_series(f'kubejoule_node_power_watts{{node="{RAPL_NODE}"}}')
                    prom.wait_for_series(
                        f'kubejoule_node_power_model_watts{{node="{ESTIMATED_NODE}"}}'
                    )
                    prom.wait_for_series("kubejoule_scheduler_telemetry_age_seconds", count=2)
                    # Scheduling traffic: a prioritize and a filter per second for a few seconds, with
                    # a node the extender has never heard of (a fallback).
                    nodes = [RAPL_NODE, ESTIMATED_NODE, "node-unknown"]
                    for i in range(4):
                        cluster.create_pod(pod_object(f"batch-{i + 1}", requests={"cpu": "200m"}))
                        _post(
                            extender_url + "/prioritize",
                            {"Pod": _pod(f"web-{i}"), "NodeNames": nodes},
                        )
                        # The Nodes.items form carries the nodes' CPUs, which a power-cap prediction needs.
                        items = {
                            "apiVersion": "v1",
                            "kind": "NodeList",
                            "items": [_node(n) for n in nodes],
                        }
                        answer = _post(
                            extender_url + "/filter", {"Pod": _pod(f"web-{i}"), "Nodes": items}
                        )
                        assert answer["Error"] == "", answer
                        time.sleep(0.75)
                    prom.wait_for_series("kubejoule_extender_requests_total", count=2)
                    prom.wait_for_series(
                        'kubejoule_scheduler_schedule_attempts_total{result="scheduled"} > 0'
                    )
                    prom.wait_for_series("kubejoule_scheduler_binding_errors_total")
                    time.sleep(2.0)  # a couple more scrapes so every rate() has two points
                    yield Stack(prom, extender_url)
            finally:
                stop_driver.set()
                for process in processes:
                    process.terminate()
                    try:
                        process.wait(10)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait(5)
    finally:
        api.close()  # after the scheduler's emulator: kmock's DNS patches unwind in order


# -- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("query", panel_queries(), ids=lambda q: q.id)
def test_panel_query_returns_data(stack: Stack, query: Query) -> None:
    promql = substitute(query)
    result = stack.prometheus.query(promql)
    assert result, f"{query.dashboard} / {query.panel}: no data for {promql}"
    values = [float(series["value"][1]) for series in result]
    assert not all(v != v for v in values), f"{query.panel}: only NaN for {promql}"


@pytest.mark.parametrize(("dashboard", "metric", "label"), variable_queries())
def test_variable_query_offers_values(
    stack: Stack, dashboard: str, metric: str, label: str
) -> None:
    values = stack.prometheus.api(f"/api/v1/label/{label}/values", {"match[]": metric})
    assert values, f"{dashboard}: label_values({metric}, {label}) is empty"
    if label == "node":
        assert {RAPL_NODE, ESTIMATED_NODE} <= set(values)
    if label == "namespace":
        assert set(NAMESPACES) <= set(values)


def test_measured_and_estimated_nodes_are_told_apart(stack: Stack) -> None:
    sources = {
        s["metric"]["node"]: s["metric"]["source"]
        for s in stack.prometheus.query("kubejoule_node_power_watts")
    }
    assert sources == {RAPL_NODE: "rapl", ESTIMATED_NODE: "estimated"}
