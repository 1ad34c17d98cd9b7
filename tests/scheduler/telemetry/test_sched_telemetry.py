"""TelemetryStore and its sources, against real HTTP servers and kmock's Kubernetes emulator.

kmock's emulated API server stays here because these are fast unit tests and need faults on
demand (dropped watches, errors, slow answers); the same paths run against the real
kube-apiserver in tests/e2e/."""

from __future__ import annotations

import time

import pytest

from benchmarks.harness.sched_sources import FixedSource
from common.curves import PowerCurve
from scheduler.cluster import kube
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.config.build import build_store
from scheduler.config.parse import config_from_dict
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, Resources
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.discovery import (
    EndpointSliceTargets,
    StaticTargets,
    metrics_url,
    parse_static_targets,
    targets_from_endpoint_slices,
)
from scheduler.telemetry.exposition import parse_agent_metrics
from scheduler.telemetry.samples import FetchResult, NodeSample
from scheduler.telemetry.sources import AgentScrapeSource, MetricsServerSource
from scheduler.telemetry.store import TelemetryStore, merge_samples
from tests.helpers.energy_results import results
from tests.helpers.sched_http import agent_exposition, text_server
from tests.helpers.sched_kube import kube_emulator

CURVE = PowerCurve.fan(90.0, 310.0, 1.4).as_points()
CURVE_LINE = PowerCurve.linear(100.0, 200.0)
POD_1CPU = pod_info_from_k8s({"metadata": {"name": "p"}, "spec": {"containers": [
    {"resources": {"requests": {"cpu": "1"}}}]}})


def test_parse_agent_metrics_reads_every_field() -> None:
    text = agent_exposition("n1", 1700.5, watts=123.4, utilization=0.37, curve=CURVE)
    result = parse_agent_metrics(text)
    sample = result.samples["n1"]
    assert sample.telemetry == NodeTelemetry(
        node="n1", sample_time=1700.5, watts=123.4, source="rapl", utilization=0.37,
        curve_points=pytest.approx(CURVE),  # type: ignore[arg-type]
    )
    assert sample.pod_count == 2
    assert result.errors == []


def test_parse_prefers_measured_power_and_needs_a_timestamp() -> None:
    text = (
        agent_exposition("n1", 10.0, watts=99.0, source="estimated", pods=())
        + 'kubejoule_node_power_watts{node="n1",source="rapl"} 120.0\n'
        + agent_exposition("n2", None)
    )
    result = parse_agent_metrics(text)
    assert result.samples["n1"].telemetry.watts == 120.0
    assert result.samples["n1"].telemetry.source == "rapl"
    assert "n2" not in result.samples  # age unknown → unusable
    assert ("no_timestamp", "n2") in result.errors


def test_a_vm_nodes_host_measured_power_ranks_as_measured() -> None:
    text = (
        agent_exposition("vm1", 10.0, watts=99.0, source="estimated", pods=())
        + 'kubejoule_node_power_watts{node="vm1",source="host"} 31.5\n'
        + agent_exposition("vm2", 10.0, watts=31.5, source="host", pods=())
        + 'kubejoule_node_power_watts{node="vm2",source="estimated"} 99.0\n'
    )
    result = parse_agent_metrics(text)
    for node in ("vm1", "vm2"):  # whichever comes first, the host's measurement wins over an estimate
        assert (result.samples[node].telemetry.watts, result.samples[node].telemetry.source) == (31.5, "host")


def test_missing_power_is_none_and_pod_count_unknown() -> None:
    result = parse_agent_metrics(agent_exposition("n1", 10.0, watts=None, utilization=0.2))
    telemetry = result.samples["n1"].telemetry
    assert telemetry.watts is None and telemetry.source == "none"
    assert telemetry.utilization == 0.2
    assert result.samples["n1"].pod_count is None


def test_incomplete_curve_is_dropped() -> None:
    text = agent_exposition("n1", 10.0, curve=CURVE)
    text = "\n".join(line for line in text.splitlines() if 'utilization="0.5"' not in line) + "\n"
    assert parse_agent_metrics(text).samples["n1"].telemetry.curve_points is None


def test_static_targets() -> None:
    assert parse_static_targets(["a=http://10.0.0.1:9102", "b=10.0.0.2:9102"]) == {
        "a": "http://10.0.0.1:9102/metrics",
        "b": "http://10.0.0.2:9102/metrics",
    }
    assert metrics_url("http://h:1/custom/path") == "http://h:1/custom/path"
    with pytest.raises(ValueError, match="node=url"):
        parse_static_targets(["nonode"])


def endpoint_slice(
    name: str, endpoints: list[dict], port_name: str = "metrics", ipv6: bool = False, port: int = 9102
) -> dict:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": "kubejoule-system",
            "labels": {"kubernetes.io/service-name": "kubejoule-agent"},
        },
        "addressType": "IPv6" if ipv6 else "IPv4",
        "ports": [{"name": "other", "port": 1}, {"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": endpoints,
    }


def test_targets_from_endpoint_slices() -> None:
    slices = [
        endpoint_slice(
            "a",
            [
                {"addresses": ["10.0.0.1"], "nodeName": "n1", "conditions": {"ready": True}},
                {"addresses": ["10.0.0.2"], "nodeName": "n2", "conditions": {"ready": False}},
                {"addresses": ["10.0.0.3"]},  # no node name: cannot tell whose data it is
            ],
        ),
        endpoint_slice("b", [{"addresses": ["fd00::4"], "nodeName": "n4"}], ipv6=True),
    ]
    assert targets_from_endpoint_slices(slices, "metrics") == {
        "n1": "http://10.0.0.1:9102/metrics",
        "n4": "http://[fd00::4]:9102/metrics",
    }


def test_endpoint_slice_targets_through_the_kubernetes_api() -> None:
    with kube_emulator() as k8s:
        k8s.put(
            "discovery.k8s.io/v1/endpointslices", "kubejoule-system", "agent-x",
            endpoint_slice("agent-x", [{"addresses": ["10.1.0.7"], "nodeName": "worker-7"}]),
        )
        other = endpoint_slice("web-y", [{"addresses": ["10.1.0.9"], "nodeName": "worker-9"}])
        other["metadata"]["labels"] = {"kubernetes.io/service-name": "web"}
        k8s.put("discovery.k8s.io/v1/endpointslices", "kubejoule-system", "web-y", other)
        api = kube.make_api_client(host=k8s.url)
        targets = EndpointSliceTargets(api, "kubejoule-system", "kubejoule-agent", "metrics")
        assert targets() == {"worker-7": "http://10.1.0.7:9102/metrics"}


def test_store_scrapes_the_agents_its_endpoint_slices_list() -> None:
    """The in-cluster default: the store built from the configuration (`endpoint_slices`, as
    the DaemonSet's config sets it) finds the agents through the API and scrapes them; when
    the Service's endpoints change, the next refresh follows."""
    page = agent_exposition("worker-1", time.time(), curve=CURVE)
    with text_server({"/metrics": page}) as old, text_server({"/metrics": page}) as new, \
            kube_emulator() as k8s:
        def publish(port: int, endpoints: list[dict]) -> None:
            k8s.put("discovery.k8s.io/v1/endpointslices", "kubejoule-node", "agent-a",  # the default
                    endpoint_slice("agent-a", endpoints, port=port))

        publish(old.port, [
            {"addresses": ["127.0.0.1"], "nodeName": "worker-1", "conditions": {"ready": True}},
            {"addresses": ["127.0.0.1"], "nodeName": "worker-2", "conditions": {"ready": False}},
        ])
        config = config_from_dict({
            "kubernetes": {"host": k8s.url},
            "telemetry": {"agents": {"endpoint_slices": {}}},  # defaults: kubejoule-node, kubejoule-agent, metrics
        })
        store = build_store(config)
        assert [s.name for s in store.sources] == ["agents-k8s"]
        store.refresh_once()
        assert set(store.snapshot()) == {"worker-1"}  # worker-2's endpoint is not ready
        sample = store.get("worker-1")
        assert sample is not None and sample.source_name == "agents-k8s"
        assert sample.telemetry.curve_points == pytest.approx(CURVE)
        assert old.hits == {"/metrics": 1}
        # The agent moves (a new pod, a new port): the next refresh scrapes the new one only.
        publish(new.port, [{"addresses": ["127.0.0.1"], "nodeName": "worker-1"}])
        store.refresh_once()
        store.stop()
        assert (old.hits, new.hits) == ({"/metrics": 1}, {"/metrics": 1})
    assert store.errors.get(("agents-k8s", "scrape"), 0) == 0


def test_metrics_server_source_through_the_kubernetes_api() -> None:
    stamp = "2024-05-01T12:00:00Z"
    with kube_emulator() as k8s:
        k8s.put("v1/nodes", None, "n1", {"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "8"}}})
        k8s.put("v1/nodes", None, "n2", {"metadata": {"name": "n2"}, "status": {}})
        for name, usage in (("n1", "2000m"), ("n2", "1")):
            k8s.put(
                "metrics.k8s.io/v1beta1/nodes", None, name,
                {"metadata": {"name": name}, "timestamp": stamp, "window": "10s", "usage": {"cpu": usage}},
            )
        result = MetricsServerSource(kube.make_api_client(host=k8s.url)).fetch()
    telemetry = result.samples["n1"].telemetry
    assert telemetry.utilization == pytest.approx(0.25)
    assert telemetry.cores == 8.0
    assert telemetry.watts is None and telemetry.source == "none"
    assert telemetry.sample_time == pytest.approx(1714564800.0)
    assert "n2" not in result.samples and ("no_capacity", "n2") in result.errors


def test_store_scrapes_agents_and_ages_their_data() -> None:
    clock = [1000.0]
    with text_server() as server:
        server.pages["/a/metrics"] = agent_exposition("a", 995.0, curve=CURVE)
        server.pages["/b/metrics"] = agent_exposition("b", 999.0, watts=None)
        targets = StaticTargets({"a": server.url("/a/metrics"), "b": server.url("/b/metrics"),
                                 "c": server.url("/c/metrics")})  # c: 404
        store = TelemetryStore(
            [AgentScrapeSource(targets, timeout_seconds=2)],
            max_staleness_seconds=30,
            node_cores=lambda: {"a": 16.0},
            clock=lambda: clock[0],
        )
        seen: list[int] = []
        store.add_listener(lambda view: seen.append(len(view)))
        assert not store.ready
        store.refresh_once()
        assert store.ready and seen == [2]
        a = store.telemetry("a")
        assert a is not None and a.cores == 16.0 and a.curve_points is not None
        assert store.ages() == {"a": 5.0, "b": 1.0}
        assert store.get("c") is None
        assert store.errors[("agents", "scrape")] == 1
        # Agent a goes away: its last sample stays, ageing, until the scorer calls it stale.
        server.status["/a/metrics"] = 503
        clock[0] = 1040.0
        store.refresh_once()
        assert store.ages()["a"] == 45.0
        store.stop()


def test_agent_cannot_speak_for_another_node() -> None:
    with text_server({"/metrics": agent_exposition("impostor", 10.0)}) as server:
        source = AgentScrapeSource(StaticTargets({"real": server.url()}))
        result = source.fetch()
        source.close()
    assert result.samples == {}
    assert result.errors[0][0] == "node_mismatch"


def test_background_refresh_runs_until_stopped() -> None:
    with text_server({"/metrics": agent_exposition("n1", time.time())}) as server:
        store = TelemetryStore(
            [AgentScrapeSource(StaticTargets({"n1": server.url()}))], refresh_seconds=0.05
        )
        store.start()
        deadline = time.monotonic() + 5
        while server.hits.get("/metrics", 0) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        store.stop()
        hits = server.hits["/metrics"]
        time.sleep(0.15)
        assert hits >= 3 and server.hits["/metrics"] == hits
        assert store.telemetry("n1") is not None


class BrokenSource:
    name = "broken"

    def fetch(self) -> FetchResult:
        raise ConnectionError("down")


def sample(node: str, t: float, u: float | None = 0.5, **kw: object) -> NodeSample:
    return NodeSample(NodeTelemetry(node, t, utilization=u, **kw))  # type: ignore[arg-type]


def test_a_broken_source_does_not_stop_the_others() -> None:
    store = TelemetryStore(
        [BrokenSource(), FixedSource({"n1": sample("n1", 100.0)}, name="ok")], clock=lambda: 101.0
    )
    store.refresh_once()
    assert store.telemetry("n1") is not None
    assert store.errors[("broken", "fetch")] == 1


def test_an_agent_whose_clock_runs_ahead_still_ages() -> None:
    """Its sample times are in the future: taken as the time the store first fetched each
    sample, so a stuck agent 100 s ahead goes stale 30 s later, not 130 s later."""
    clock = [1000.0]
    source = FixedSource({"n1": sample("n1", 1100.0)})
    store = TelemetryStore([source], max_staleness_seconds=30, clock=lambda: clock[0])
    store.refresh_once()
    assert store.ages() == {"n1": 0.0}
    clock[0] = 1040.0
    store.refresh_once()  # the same sample again: the agent is stuck
    assert store.ages() == {"n1": 40.0}
    [result] = results(
        EnergyPlugin(curves={"n1": CURVE_LINE}), POD_1CPU, [NodeState(NodeInfo("n1", Resources(4000)), telemetry=store.telemetry("n1"))], clock[0]
    )
    # Stale: priced at its worst (a line's 25 W for 1 of 4 cores, over the 20 W reference → 0).
    assert (result.reason, result.score) == ("stale", 0.0)
    assert store.errors[("fixed", "clock_ahead")] == 2
    # A new sample (still ahead) is fresh again, from when it was fetched.
    source.samples = {"n1": sample("n1", 1141.0)}
    clock[0] = 1041.0
    store.refresh_once()
    assert store.ages(now=1046.0) == {"n1": 5.0}
    # Times in the past are the agent's own: untouched.
    source.samples = {"n1": sample("n1", 1030.0)}
    store.refresh_once()
    assert store.ages() == {"n1": 11.0}


def test_merge_prefers_the_first_fresh_source_and_fills_static_facts() -> None:
    agents = {"n1": sample("n1", 50.0, watts=100.0, source="rapl"), "n2": sample("n2", 95.0)}
    metrics = {
        "n1": sample("n1", 99.0, u=0.9, cores=4.0),
        "n2": sample("n2", 90.0, cores=8.0, curve_points=CURVE),
    }
    merged = merge_samples([agents, metrics], now=100.0, max_staleness_seconds=30, cores={})
    # n1: the agents' sample is stale (50 s), metrics-server's is fresh → metrics-server's.
    assert merged["n1"].telemetry.utilization == 0.9
    # n2: agents fresh and first → theirs, with cores and curve filled from the other source.
    assert merged["n2"].telemetry.sample_time == 95.0
    assert merged["n2"].telemetry.cores == 8.0 and merged["n2"].telemetry.curve_points == CURVE
    # Nothing fresh: the freshest wins, so its age is honest.
    merged = merge_samples([agents, metrics], now=500.0, max_staleness_seconds=30, cores={"n1": 2.0})
    assert merged["n1"].telemetry.sample_time == 99.0
