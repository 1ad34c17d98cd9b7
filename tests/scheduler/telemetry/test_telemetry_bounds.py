"""Telemetry the scheduler reads is bounded: answers past a size are errors read no further, and
readings outside physical bounds are refused (unknown, priced at the node's worst), since the
agents are not authenticated to the scheduler and telemetry drives placement and evictions."""

from __future__ import annotations

import json
import time

import pytest

from scheduler.telemetry import sources
from scheduler.telemetry.discovery import StaticTargets
from scheduler.telemetry.exposition import SeriesFolder
from scheduler.telemetry.sources import AgentScrapeSource, PrometheusSource
from tests.helpers.sched_http import agent_exposition, text_server


def test_an_agent_answer_past_the_limit_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    page = agent_exposition("n1", time.time())
    monkeypatch.setattr(sources, "MAX_AGENT_ANSWER_BYTES", len(page.encode()) - 1)
    with text_server({"/metrics": page}) as server:
        source = AgentScrapeSource(StaticTargets({"n1": server.url("/metrics")}))
        result = source.fetch()
        source.close()
    assert result.samples == {}
    assert "larger than" in result.errors[0][1] or "more than" in result.errors[0][1]
    monkeypatch.setattr(sources, "MAX_AGENT_ANSWER_BYTES", len(page.encode()))
    with text_server({"/metrics": page}) as server:
        source = AgentScrapeSource(StaticTargets({"n1": server.url("/metrics")}))
        assert set(source.fetch().samples) == {"n1"}
        source.close()


def test_a_prometheus_answer_past_the_limit_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    answer = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"node": f"n{i}", "source": "rapl"}, "value": [time.time(), "150"]} for i in range(2000)
    ]}}
    monkeypatch.setattr(sources, "MAX_PROMETHEUS_ANSWER_BYTES", 10_000)
    with text_server({"/api/v1/query": json.dumps(answer)}) as server:
        source = PrometheusSource(server.url())
        result = source.fetch()
    assert result.samples == {}
    assert result.errors and all(kind == "prometheus" for kind, _ in result.errors)
    assert any("bytes" in text for _, text in result.errors)


@pytest.mark.parametrize("watts", [-5.0, 25_000.0, 1e300, float("inf")])
def test_power_outside_physical_bounds_is_refused(watts: float) -> None:
    folder = SeriesFolder()
    labels = {"node": "n1", "source": "rapl"}
    folder.add("kubejoule_node_power_watts", labels, watts)
    folder.add("kubejoule_node_cpu_utilization_ratio", labels, 0.5)
    folder.add("kubejoule_node_power_model_watts", {"node": "n1", "utilization": "0.5"}, watts)
    folder.add("kubejoule_gpu_power_watts", {"node": "n1", "gpu_uuid": "GPU-1"}, watts)
    part = folder.nodes["n1"]
    assert part.watts is None and part.curve == {} and part.gpu_unknown


def test_readings_inside_the_bounds_are_kept_and_utilization_is_bounded() -> None:
    folder = SeriesFolder()
    labels = {"node": "n1", "source": "rapl"}
    folder.add("kubejoule_node_power_watts", labels, 350.0)
    folder.add("kubejoule_node_cpu_utilization_ratio", labels, 40.0)  # 4,000 %: not a node's
    folder.add("kubejoule_gpu_power_watts", {"node": "n1", "gpu_uuid": "GPU-1"}, 700.0)
    part = folder.nodes["n1"]
    assert part.watts == 350.0 and part.utilization is None and part.gpu_watts == {"GPU-1": 700.0}
