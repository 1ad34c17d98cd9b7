"""The scheduler's telemetry on GPU and platform nodes: a node's curve is the watts the node
draws — the exported CPU-side curve plus its GPUs (and, where node power is the BMC's platform
reading, the platform's rest), a platform-fitted curve as it is — read from agents' expositions,
through a real Prometheus (Debian's binary; two jobs scraping one agent count each GPU once), and
from a real `kubejoule-agent run` with the stand-in libnvidia-ml.so.1; then the energy plugin's
prices on those curves."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.harness import nvml_standin
from common.curves import PowerCurve
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, Resources
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.exposition import parse_agent_metrics
from scheduler.telemetry.sources import GPU_COUNT_QUERY, GPU_WATTS_QUERY, PrometheusSource
from scheduler.telemetry.store import TelemetryStore
from tests.helpers.agent_proc import WORKLOADS, AgentProcess
from tests.helpers.energy_results import results
from tests.helpers.prometheus import prometheus_server, scrape_configs_for
from tests.helpers.sched_http import agent_exposition, text_server
from tests.helpers.standalone_harness import wait_for

CURVE = PowerCurve.linear(40.0, 200.0).as_points()
GPU_UUIDS = ("GPU-00000000-1111-2222-3333-444455556666", "GPU-00000001-1111-2222-3333-444455556666")


def exposition(
    node: str, stamp: float, *, watts: float | None = 300.0, source: str = "rapl", reading: str | None = "rapl",
    gpus: Sequence[float | None] = (), platform_other: float | None = None,
) -> str:
    """An agent's exposition with GPUs (`None`: listed in kubejoule_gpu_info, no power series)
    and a curve whose `reading` label is `reading` (None: an agent from before the label)."""
    text = agent_exposition(node, stamp, watts=watts, source=source, utilization=0.25, curve=CURVE)
    if reading is not None:
        text = text.replace('",utilization="', f'",reading="{reading}",utilization="')
    lines = [text.rstrip("\n")]
    if gpus:
        lines += ["# TYPE kubejoule_gpu_power_watts gauge", "# TYPE kubejoule_gpu_info gauge"]
    for index, gpu_watts in enumerate(gpus):
        labels = f'node="{node}",gpu="{index}",gpu_uuid="{GPU_UUIDS[index]}",gpu_name="NVIDIA H100 80GB HBM3"'
        lines.append(f'kubejoule_gpu_info{{{labels},method="energy",mode="shared"}} 1')
        if gpu_watts is not None:
            lines.append(f"kubejoule_gpu_power_watts{{{labels}}} {gpu_watts}")
    if platform_other is not None:
        lines += ["# TYPE kubejoule_node_platform_other_watts gauge",
                  f'kubejoule_node_platform_other_watts{{node="{node}"}} {platform_other}']
    return "\n".join(lines) + "\n"


def shifted(watts: float) -> list[Any]:
    return pytest.approx([w + watts for w in CURVE])


# (exposition keywords, the curve's shift in watts, None: withheld)
CASES: dict[str, tuple[dict[str, Any], float | None]] = {
    # RAPL's curve on a node with two GPUs (node power = RAPL + GPUs): the GPUs added, to the watt
    "gpus": ({"gpus": (300.0, 100.4)}, 400.0),
    # node power is the BMC's: a RAPL curve gains the GPUs and the platform's rest (fans, PSU, …)
    "platform-rapl-curve": ({"source": "platform", "gpus": (150.0,), "platform_other": 62.3}, 212.0),
    # a curve fitted against the platform already holds everything
    "platform-curve": ({"source": "platform", "reading": "platform", "gpus": (150.0,), "platform_other": 62.3}, 0.0),
    # an agent from before the `reading` label: its curve is RAPL's (the only kind it had)
    "old-agent": ({"reading": None, "gpus": (80.0,)}, 80.0),
    # a GPU that supports no reading is outside node power too (the agent leaves it out)
    "gpu-without-reading": ({"gpus": (120.0, None)}, 120.0),
    # no GPU, no BMC: the curve as exported (what every node without them has always had)
    "cpu-only": ({}, 0.0),
    # node power unknown on a GPU node (a GPU fell off the bus): what the GPUs draw is unknown
    "gpu-node-power-unknown": ({"watts": None, "gpus": (300.0,)}, None),
    # a platform node whose rest is unknown (its CPU side was)
    "platform-without-rest": ({"source": "platform", "gpus": (150.0,)}, None),
    # a GPU's series that is not a number
    "gpu-nan": ({"gpus": (float("nan"),)}, None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_curve_of_a_sample_is_what_the_node_draws(case: str) -> None:
    keywords, shift = CASES[case]
    stamp = time.time()
    result = parse_agent_metrics(exposition("n1", stamp, **keywords))
    telemetry = result.samples["n1"].telemetry
    if shift is None:
        assert telemetry.curve_points is None
        assert ("no_whole_curve", "n1") in result.errors
    else:
        assert telemetry.curve_points == shifted(shift)
        assert not [kind for kind, _ in result.errors if kind == "no_whole_curve"]


def test_through_prometheus_each_gpu_counts_once_and_a_failed_gpu_query_withholds_only_gpu_nodes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    stamp = time.time()
    with text_server() as agents:
        pages = {
            "gpu": exposition("gpu", stamp, gpus=(300.0, 100.0)),
            "platform": exposition("platform", stamp, source="platform", gpus=(150.0,), platform_other=62.3),
            "cpu": exposition("cpu", stamp),
        }
        for name, text in pages.items():
            agents.pages[f"/{name}/metrics"] = text
        urls = [agents.url(f"/{name}/metrics") for name in pages]
        second_jobs = scrape_configs_for(urls, job="duplicate")  # every agent scraped twice
        with prometheus_server(urls, scrape_configs=second_jobs) as prom:
            prom.wait_for_series("kubejoule_gpu_power_watts", count=6)
            prom.wait_for_series("kubejoule_node_power_model_watts", count=66)
            prom.wait_for_series("kubejoule_node_platform_other_watts", count=2)
            source = PrometheusSource(prom.url)
            read = source.fetch()
            real_query = source._query

            def gpu_queries_fail(promql: str) -> Any:
                if promql in (GPU_WATTS_QUERY, GPU_COUNT_QUERY):
                    raise httpx.ConnectError("the GPU query failed")
                return real_query(promql)

            monkeypatch.setattr(source, "_query", gpu_queries_fail)
            without_gpus = source.fetch()
            monkeypatch.setattr(source, "_query", real_query)
            again = source.fetch()
            source.close()
    curves = {node: sample.telemetry.curve_points for node, sample in read.samples.items()}
    assert curves == {"gpu": shifted(400.0), "platform": shifted(212.0), "cpu": pytest.approx(CURVE)}
    assert read.samples["platform"].telemetry.source == "platform"
    assert [kind for kind, _ in without_gpus.errors].count("prometheus") == 2
    assert without_gpus.samples["gpu"].telemetry.curve_points is None  # never priced as CPU-only
    assert without_gpus.samples["platform"].telemetry.curve_points is None
    assert without_gpus.samples["cpu"].telemetry.curve_points == pytest.approx(CURVE)
    assert again.samples["gpu"].telemetry.curve_points == shifted(400.0)


def _node(name: str, telemetry: NodeTelemetry, pods: int) -> NodeState:
    return NodeState(NodeInfo(name, Resources(cpu_millicores=4000)), telemetry=telemetry, pod_count=pods)


def test_the_energy_plugin_prices_idle_gpus_as_a_cost_of_keeping_the_node_on() -> None:
    stamp = time.time()
    samples = parse_agent_metrics(
        exposition("gpu", stamp, gpus=(60.0, 60.0)) + exposition("cpu", stamp)
        + exposition("down", stamp, watts=None, gpus=(60.0, 60.0))).samples
    t = {name: sample.telemetry for name, sample in samples.items()}
    pod = pod_info_from_k8s({"metadata": {"name": "p"}, "spec": {"containers": [
        {"resources": {"requests": {"cpu": "1"}}}]}})
    energy = EnergyPlugin(delta_p_ref_watts=200.0, consolidation=True)
    # empty: opening the GPU node costs the pod its share of the GPUs' 120 W too
    empty = {r.node: r for r in results(energy, pod, [_node("gpu", t["gpu"], 0), _node("cpu", t["cpu"], 0)], stamp)}
    # u_ref 0.5, a = P(0.5)/0.5: 120/0.5 = 240 W per unit on the CPU node, 240/0.5 = 480 with the GPUs
    assert empty["cpu"].delta_watts == pytest.approx(0.25 * 240.0)
    assert empty["gpu"].delta_watts == pytest.approx(0.25 * 480.0)
    assert empty["gpu"].score < empty["cpu"].score
    # running: the GPUs' watts do not change with CPU load, so the marginal is the CPU side's
    running = {r.node: r for r in results(energy, pod, [_node("gpu", t["gpu"], 3), _node("cpu", t["cpu"], 3)], stamp)}
    assert running["gpu"].delta_watts == pytest.approx(running["cpu"].delta_watts) == pytest.approx(40.0)
    # a GPU node whose watts are unknown never outscores the same node measured
    down = results(energy, pod, [_node("down", t["down"], 0)], stamp)[0]
    assert down.reason == "no_curve" and down.score <= empty["gpu"].score


PROFILE = "schema: kubejoule.calibration/v1\nidle_watts: 40.0\nmax_watts: 200.0\nmodel: linear\n"
GPU_WATTS = (300.0, 100.0)


@pytest.fixture(scope="module")
def library() -> Path:
    return nvml_standin.build()


def test_a_real_gpu_agent_through_a_real_prometheus_gives_the_curve_plus_its_gpus(library: Path, tmp_path: Path
                                                                                  ) -> None:
    state = nvml_standin.NvmlState.with_gpus(tmp_path / "nvml.state", 2)
    for gpu, watts in zip(state.gpus, GPU_WATTS, strict=True):  # counters that grow on their own
        gpu.energy_rate_mw = gpu.power_mw = round(watts * 1000)
    state.write()
    profile = tmp_path / "calibration.yaml"
    profile.write_text(PROFILE)
    tree = WORKLOADS / "v2-systemd-containerd" / "before"
    with AgentProcess(tree, interval=0.25, node="gpu-1", hermetic=True, env=state.env(), args=[
            "--power-profile", str(profile), "--nvml-library", str(library), "--process-top", "0"]) as agent:
        agent.drive(node_watts=80.0, utilization=0.25, cpus=4)
        agent.wait_samples(3)
        text = agent.scrape()
        assert {labels["reading"] for labels, _ in agent.samples("kubejoule_node_power_model_watts", text)} == {"rapl"}
        with prometheus_server([agent.url + "/metrics"], scrape_interval="1s") as prom:
            prom.wait_for_series("kubejoule_gpu_power_watts", count=2)
            prom.wait_for_series("kubejoule_node_power_model_watts", count=11)
            store = TelemetryStore([PrometheusSource(prom.url)], node_cores=lambda: {"gpu-1": 4.0})

            def whole_curve() -> NodeTelemetry | None:
                store.refresh_once()
                sample = store.get("gpu-1")
                return sample.telemetry if sample is not None and sample.telemetry.curve_points else None

            telemetry = wait_for(whole_curve, 20, "a sample of the GPU node with its curve")
            store.stop()
        agent.stop_driving()
    assert telemetry.source == "rapl" and telemetry.watts is not None
    # the counters grow at 300 W and 100 W: the curve is the profile's line moved up by what the
    # GPUs drew — the same shift at every point, 400 W within 5 %. The stand-in's counters grow
    # with wall time, so a 0.25 s interval the agent measures a few milliseconds off the stand-in's
    # clock under load reads up to a few percent off (CI saw 394 W); a curve without the GPUs is
    # 400 W off, one that counts them twice 400 W the other way.
    shifts = [got - want for got, want in zip(telemetry.curve_points, CURVE, strict=True)]
    assert shifts == pytest.approx([shifts[0]] * len(CURVE), abs=1e-6)
    assert shifts[0] == pytest.approx(sum(GPU_WATTS), rel=0.05)
    assert telemetry.watts > sum(GPU_WATTS)  # node power: the CPU side and the GPUs
