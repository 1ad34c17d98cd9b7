"""PrometheusSource against a real Prometheus (Debian's binary) scraping agent expositions."""

from __future__ import annotations

import time

import pytest

from common.curves import PowerCurve
from scheduler.telemetry.sources import PrometheusSource
from scheduler.telemetry.store import TelemetryStore
from tests.helpers.prometheus import prometheus_server, scrape_configs_for
from tests.helpers.sched_http import agent_exposition, text_server

CURVE = PowerCurve.linear(80.0, 260.0).as_points()


def test_store_reads_two_agents_through_prometheus() -> None:
    stamp = time.time()
    with text_server() as agents:
        agents.pages["/n1/metrics"] = agent_exposition("n1", stamp, watts=140.0, utilization=0.3, curve=CURVE)
        agents.pages["/n2/metrics"] = agent_exposition(
            "n2", stamp - 3, watts=95.0, source="estimated", utilization=0.1, pods=("x",)
        )
        with prometheus_server([agents.url("/n1/metrics"), agents.url("/n2/metrics")]) as prom:
            prom.wait_for_series("kubejoule_sample_timestamp_seconds", count=2)
            prom.wait_for_series("kubejoule_node_power_model_watts", count=11)
            store = TelemetryStore([PrometheusSource(prom.url)])
            store.refresh_once()
            store.stop()
            bad = PrometheusSource(prom.url)
            bad.QUERIES = ("kubejoule_node_power_watts[1m]",)  # a range vector is not usable
            bad_result = bad.fetch()
            bad.close()
    n1, n2 = store.get("n1"), store.get("n2")
    assert n1 is not None and n2 is not None
    assert n1.telemetry.watts == 140.0 and n1.telemetry.source == "rapl"
    assert n1.telemetry.utilization == pytest.approx(0.3)
    assert n1.telemetry.sample_time == pytest.approx(stamp)
    assert n1.telemetry.curve_points == pytest.approx(CURVE)
    assert n1.pod_count == 2
    assert n2.telemetry.source == "estimated" and n2.telemetry.curve_points is None
    assert n2.pod_count == 1
    assert store.ages(now=stamp + 10) == {"n1": pytest.approx(10.0), "n2": pytest.approx(13.0)}
    assert bad_result.samples == {} and bad_result.errors[0][0] == "prometheus"


def test_prometheus_down_is_an_error_not_data() -> None:
    source = PrometheusSource("http://127.0.0.1:9", timeout_seconds=0.5)
    result = source.fetch()
    source.close()
    assert result.samples == {}
    assert {kind for kind, _ in result.errors} == {"prometheus"}


def test_pods_are_counted_per_node_by_prometheus_once_each_and_curves_are_read_again_only_when_due() -> None:
    """PrometheusSource asks for per-node pod counts (not every pod's series): a pod two jobs
    scrape counts once, DaemonSet and static pods are the node's daemons; curves are re-read
    every curve_refresh_seconds and kept through a failed read."""
    stamp = time.time()
    text = agent_exposition("n1", stamp, curve=CURVE, pods=("a", "b", "c"))
    text = text.replace('pod_uid="a"}', 'pod_uid="a",owner_kind="DaemonSet"}')
    text = text.replace('pod_uid="b"}', 'pod_uid="b",owner_kind="Node"}')
    now = [0.0]
    with text_server() as agents:
        agents.pages["/n1/metrics"] = text
        url = agents.url("/n1/metrics")
        second_job = {**scrape_configs_for([url], job="duplicate")[0]}
        with prometheus_server([url], scrape_configs=[second_job]) as prom:
            prom.wait_for_series("kubejoule_pod_power_watts", count=6)  # 3 pods × 2 jobs
            prom.wait_for_series("kubejoule_node_power_model_watts", count=22)
            source = PrometheusSource(prom.url, curve_refresh_seconds=60.0, clock=lambda: now[0])
            first = source.fetch().samples["n1"]
            source.CURVE_QUERY = "kubejoule_node_power_model_watts[1m]"  # reads fail from now on
            now[0] = 30.0
            cached = source.fetch()  # not due: the curves read before, no query
            now[0] = 61.0
            failed = source.fetch()  # due, and the read fails: the last curves stay
            source.close()
    assert (first.pod_count, first.daemon_pod_count) == (3, 2)
    assert first.telemetry.curve_points == pytest.approx(CURVE)
    assert cached.errors == [] and cached.samples["n1"].telemetry.curve_points == pytest.approx(CURVE)
    assert [kind for kind, _ in failed.errors] == ["prometheus"]
    assert failed.samples["n1"].telemetry.curve_points == pytest.approx(CURVE)
