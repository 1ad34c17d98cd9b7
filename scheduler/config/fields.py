"""The scheduler configuration's building blocks (`scheduler/config/parse.py` documents the keys): the
error every bad key or value raises, the value checkers each section uses, `listen`, and the
`telemetry:` section."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.config.basics import ConfigError  # the sections' error (config/basics: the leaf)
from scheduler.telemetry.discovery import parse_static_targets


@dataclass(frozen=True)
class EndpointSliceConfig:
    namespace: str = "kubejoule-node"  # the agents' namespace (daemonset/base)
    service: str = "kubejoule-agent"  # the agents' Service, whose EndpointSlices list them
    port: str | None = "metrics"  # the name of the port their /metrics is on


@dataclass(frozen=True)
class AgentsConfig:
    static: dict[str, str] = field(default_factory=dict)  # node → its agent's URL (or a list of "node=url")
    endpoint_slices: EndpointSliceConfig | None = None  # find the agents from their Service's EndpointSlices
    timeout_seconds: float = 2.0  # deadline of one scrape
    max_parallel: int = 16  # agents scraped at once


@dataclass(frozen=True)
class PrometheusConfig:
    url: str  # the Prometheus server's URL (its HTTP API)
    timeout_seconds: float = 5.0  # deadline of one query


@dataclass(frozen=True)
class TelemetryConfig:
    agents: AgentsConfig = field(default_factory=AgentsConfig)  # scrape the agents' /metrics directly
    prometheus: PrometheusConfig | None = None  # or read the agents' series from a Prometheus
    metrics_server: bool = False  # metrics.k8s.io node usage (utilization only, no watts)
    node_capacity_from_kubernetes: bool = False  # node cores from the Node objects
    node_cores: dict[str, float] = field(default_factory=dict)  # or node cores given here, by node name


def _section(data: object, where: str, allowed: set[str]) -> dict[str, object]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    unknown = sorted(set(map(str, data)) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    return dict(data)


def _keys(data: object) -> set[str]:
    """The keys of a mapping whose keys are names (node names, curve names), as text; else none."""
    return set(map(str, data)) if isinstance(data, Mapping) else set()


def _number(value: object, where: str, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    if positive and value <= 0:
        raise ConfigError(f"{where}: must be positive, got {value!r}")
    return float(value)


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


def _str(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def _opt_str(value: object, where: str) -> str | None:
    return None if value is None else _str(value, where)


def _agents(data: object) -> AgentsConfig:
    d = _section(data, "telemetry.agents", {"static", "endpoint_slices", "timeout_seconds", "max_parallel"})
    static_raw = d.get("static") or {}
    try:
        if isinstance(static_raw, Mapping):
            static = parse_static_targets(f"{k}={v}" for k, v in static_raw.items())
        elif isinstance(static_raw, list):
            static = parse_static_targets(str(item) for item in static_raw)
        else:
            raise ConfigError("telemetry.agents.static: expected a mapping or a list of node=url")
    except ValueError as exc:
        raise ConfigError(f"telemetry.agents.static: {exc}") from exc
    slices = None
    if d.get("endpoint_slices") is not None:
        e = _section(d["endpoint_slices"], "telemetry.agents.endpoint_slices", {"namespace", "service", "port"})
        slices = EndpointSliceConfig(
            namespace=_str(e.get("namespace", "kubejoule-node"), "endpoint_slices.namespace"),
            service=_str(e.get("service", "kubejoule-agent"), "endpoint_slices.service"),
            port=_opt_str(e.get("port", "metrics"), "endpoint_slices.port"),
        )
    return AgentsConfig(
        static=static,
        endpoint_slices=slices,
        timeout_seconds=_number(d.get("timeout_seconds", 2.0), "telemetry.agents.timeout_seconds"),
        max_parallel=int(_number(d.get("max_parallel", 16), "telemetry.agents.max_parallel")),
    )


def _telemetry(data: object) -> TelemetryConfig:
    d = _section(
        data,
        "telemetry",
        {"agents", "prometheus", "metrics_server", "node_capacity_from_kubernetes", "node_cores"},
    )
    cores_raw = d.get("node_cores") or {}
    node_cores = {
        str(node): _number(value, f"telemetry.node_cores.{node}")
        for node, value in _section(cores_raw, "telemetry.node_cores", _keys(cores_raw)).items()
    }
    prometheus = None
    if d.get("prometheus") is not None:
        p = _section(d["prometheus"], "telemetry.prometheus", {"url", "timeout_seconds"})
        prometheus = PrometheusConfig(
            url=_str(p.get("url"), "telemetry.prometheus.url"),
            timeout_seconds=_number(p.get("timeout_seconds", 5.0), "telemetry.prometheus.timeout_seconds"),
        )
    return TelemetryConfig(
        agents=_agents(d.get("agents")),
        prometheus=prometheus,
        metrics_server=_bool(d.get("metrics_server", False), "telemetry.metrics_server"),
        node_capacity_from_kubernetes=_bool(
            d.get("node_capacity_from_kubernetes", False), "telemetry.node_capacity_from_kubernetes"
        ),
        node_cores=node_cores,
    )
