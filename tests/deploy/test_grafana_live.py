"""Every dashboard query returns data from a real Prometheus.

The stack, all real processes on 127.0.0.1:
- three `kubejoule-agent run` on fixture host trees whose counters the test advances: one with
  RAPL (source rapl), one without powercap but with a calibration curve (source estimated), and
  one with RAPL, two GPUs (the stand-in libnvidia-ml.so.1 through nvidia-ml-py, one allocated
  through a PodResources gRPC socket) and a Redfish BMC (source platform), all with a
  power profile, VMs (qemu processes in the tree) and the process top-N, and a
  Kubernetes API emulator (kmock) serving the pods' names and Metrics Server data;
- `kubejoule-scheduler extender` scraping both agents (and a dead target, for telemetry errors),
  with a power cap that /filter applies, answering a /prioritize and a /filter every half second;
- `kubejoule-scheduler run` (standalone, shadow mode, leader election) against a Kubernetes API
  emulator (kmock) holding the two nodes, binding a pod created every second, one binding
  failed on purpose (binding errors) and one pod that fits nowhere (unschedulable);
- Debian's `prometheus` scraping the agents, the extender and the scheduler every second, with
  the jobs our ServiceMonitors describe (daemonset/components/servicemonitor: one per Service,
  its path and honorLabels).

The fixture waits until the panels' queries return data (a condition, not a fixed sleep: on a
loaded machine it simply takes longer), then fixes that instant; every test evaluates its query
at it, so how long the other tests take cannot age the rate() windows out. Each panel's
queries, with the template variables substituted as Grafana would, must return at least one
series that is not NaN. Variable queries (label_values) too.


kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.deploy_kustomize import build, user_kustomization
from tests.helpers.grafana_queries import (
    ESTIMATED_NODE,
    GPU_NODE,
    NAMESPACES,
    RAPL_NODE,
    Query,
    panel_queries,
    substitute,
    variable_queries,
)
from tests.helpers.grafana_stack import PROFILE, Stack, has_data, running_stack
from tests.helpers.prometheus import require_prometheus


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    require_prometheus()
    with running_stack(tmp_path_factory.mktemp("grafana-live")) as running:
        yield running


# -- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("query", panel_queries(), ids=lambda q: q.id)
def test_panel_query_returns_data(stack: Stack, query: Query) -> None:
    promql = substitute(query)
    result = stack.query(promql)
    assert result, f"{query.dashboard} / {query.panel}: no data for {promql}"
    assert has_data(result), f"{query.panel}: only NaN for {promql}"


@pytest.mark.parametrize(("dashboard", "metric", "label"), variable_queries())
def test_variable_query_offers_values(
    stack: Stack, dashboard: str, metric: str, label: str
) -> None:
    values = stack.prometheus.api(f"/api/v1/label/{label}/values", {"match[]": metric})
    assert values, f"{dashboard}: label_values({metric}, {label}) is empty"
    if label == "node":
        assert {RAPL_NODE, ESTIMATED_NODE, GPU_NODE} <= set(values)
    if label == "namespace":
        assert set(NAMESPACES) <= set(values)


def test_measured_and_estimated_nodes_are_told_apart(stack: Stack) -> None:
    sources = {
        s["metric"]["node"]: s["metric"]["source"]
        for s in stack.query("kubejoule_node_power_watts")
    }
    assert sources == {RAPL_NODE: "rapl", ESTIMATED_NODE: "estimated", GPU_NODE: "platform"}


def test_the_workloads_namespaces_survive_the_scrape(stack: Stack) -> None:
    """honorLabels as the ServiceMonitor sets it: pod series keep the workload's namespace and
    pod, not the agent pod's own target labels (which would push them to exported_*)."""
    series = stack.query(f'kubejoule_pod_power_watts{{node="{RAPL_NODE}"}}')  # named by the API
    assert {s["metric"]["namespace"] for s in series} == set(NAMESPACES)
    assert not any(s["metric"]["pod"].startswith("kubejoule-") for s in series)
    assert not any("exported_namespace" in s["metric"] for s in series)
    # Series without such labels of their own get the target's, as in a cluster.
    (node,) = stack.query(f'kubejoule_node_power_watts{{node="{RAPL_NODE}"}}')
    assert node["metric"]["namespace"] == "kubejoule-system"


def test_the_manifests_probes_answer_on_the_running_processes(stack: Stack, tmp_path: Path) -> None:
    """Each container's liveness and readiness probe, as daemonset/ declares it, against the
    real process of that workload: the path answers 200 on the declared port's server."""
    objects = build(user_kustomization(tmp_path, "base", ("extender",)))
    probed = set()
    for workload in (o for o in objects if o["kind"] in ("DaemonSet", "Deployment")):
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        name = workload["metadata"]["name"]
        for probe in ("livenessProbe", "readinessProbe"):
            path = container[probe]["httpGet"]["path"]
            with urllib.request.urlopen(f"http://{stack.workloads[name]}{path}", timeout=5) as r:
                assert r.status == 200, (name, probe, path)
        probed.add(name)
    assert probed == set(stack.workloads)


def test_the_scheduler_prices_what_each_node_draws(stack: Stack) -> None:
    """The scheduler's telemetry on this Prometheus (issue 27, item 4): the GPU node's RAPL curve
    gains its GPUs and, its node power being the BMC's, the platform's rest — 500 W less the
    CPU side at the sample — while the other nodes keep the curve their agents export."""
    from scheduler.telemetry.sources import PrometheusSource

    source = PrometheusSource(stack.prometheus.url)
    try:
        result = source.fetch()
    finally:
        source.close()
    curves = {node: sample.telemetry.curve_points for node, sample in result.samples.items()}
    assert curves[RAPL_NODE] == pytest.approx(PROFILE["points"])
    assert curves[ESTIMATED_NODE] == pytest.approx(PROFILE["points"])
    gpu_curve = curves[GPU_NODE]
    assert gpu_curve is not None
    shifts = {round(w - p, 6) for w, p in zip(gpu_curve, PROFILE["points"], strict=True)}
    assert len(shifts) == 1, shifts  # the same watts at every load: the GPUs and the rest
    (shift,) = shifts
    # to the watt; the BMC's 500 W less a CPU side driven at about 40 W: well above the GPUs'
    # 210 W alone (the rest of the platform is in), below the whole reading (the CPU side is not)
    assert shift == round(shift) and 400 <= shift < 500


def test_a_target_cannot_speak_for_another_node(tmp_path: Path) -> None:
    """Without honorLabels, the node a series is about is the one the agent's pod runs on (from
    service discovery), whatever `node` label the target writes: a node, or anything answering
    on its port, cannot report power for another. The workload's namespace still survives."""
    from tests.helpers.grafana_stack import service_monitor_jobs
    from tests.helpers.prometheus import prometheus_server
    from tests.helpers.sched_http import text_server

    lying = (
        'kubejoule_node_power_watts{node="victim",source="rapl"} 9999\n'
        'kubejoule_pod_power_watts{node="victim",namespace="shop",pod="cart",pod_uid="u1",qos="",source="rapl"} 5\n'
    )
    with text_server({"/metrics": lying}) as server:
        address = f"127.0.0.1:{server.port}"
        jobs = service_monitor_jobs(
            tmp_path,
            {"kubejoule-agent": [address], "kubejoule-extender": ["127.0.0.1:9"], "kubejoule-scheduler": ["127.0.0.1:9"]},
            {address: "liar-node"},
        )
        with prometheus_server(scrape_configs=jobs) as prom:
            (node,) = prom.wait_for_series("kubejoule_node_power_watts")
            (pod,) = prom.wait_for_series("kubejoule_pod_power_watts")
    assert node["metric"]["node"] == "liar-node" and "exported_node" not in node["metric"]
    assert pod["metric"]["node"] == "liar-node"
    assert (pod["metric"]["namespace"], pod["metric"]["pod"]) == ("shop", "cart")
