"""PrometheusSource against a real Prometheus (Debian's binary) scraping agent expositions."""

from __future__ import annotations

import time

import pytest

from agent.curves import PowerCurve
from scheduler.telemetry.sources import PrometheusSource
from scheduler.telemetry.store import TelemetryStore
from tests.helpers.prometheus import prometheus_server
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
