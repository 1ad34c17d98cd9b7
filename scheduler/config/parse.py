"""The scheduler's YAML configuration (`--config FILE`). Every key is optional.

```yaml
mode: shadow                  # shadow (recommend and record only) | active
listen: "0.0.0.0:8888"        # the extender's HOST:PORT
max_staleness_seconds: 30     # older telemetry is stale → neutral score 50
refresh_seconds: 5            # background telemetry refresh period
scorer:
  name: heuristic
  delta_p_ref_watts: 20       # ΔP that scores 0; see docs/scheduler.md for choosing it
  consolidation: false        # true where empty nodes are powered off or scaled down
  consolidation_utilization: 0.5  # load a consolidated node runs at (amortizes opening costs)
curves:                       # power curves for nodes whose agent exports none
  node-a: {model: linear, idle_watts: 80, max_watts: 250}
  node-b: {points: [60, 80, 95, 108, 120, 133, 147, 162, 180, 200, 222]}
  node-c: {instance_type: "aws:m5.xlarge"}  # a cloud type's published coefficients (estimated)
node_groups:                  # cluster-autoscaler node groups (autoscaler-expander): by group id,
  ng-big: {model: fan, idle_watts: 58, max_watts: 222, r: 1.4}   # or by a node_group_labels value
  m5.2xlarge: {points: [60, 80, 95, 108, 120, 133, 147, 162, 180, 200, 222]}
  ng-calibrated: {power_profile: /etc/kubejoule/profiles/big.yaml}  # a power profile file
  m5.4xlarge: {instance_type: "aws:m5.4xlarge"}   # Cloud Carbon Footprint's coefficients
node_group_labels: [node.kubernetes.io/instance-type, beta.kubernetes.io/instance-type,
                    kubejoule.io/node-group]  # template-node labels whose value names a curve
power_caps_watts:             # /filter drops a node only if the pod would push it past its cap
  node-a: 400
default_power_cap_watts: null # a cap for every node not listed above
telemetry:
  agents:                     # scrape the agents' /metrics directly (the default source)
    static: {node-1: "http://10.0.0.1:9102"}    # or a list of "node=url"
    endpoint_slices: {namespace: kubejoule-node, service: kubejoule-agent, port: metrics}
    timeout_seconds: 2
    max_parallel: 16
  prometheus: {url: "http://prometheus.monitoring:9090", timeout_seconds: 5}
  metrics_server: false       # metrics.k8s.io node usage (utilization only, no watts)
  node_capacity_from_kubernetes: true           # node cores from the Node objects
  node_cores: {node-1: 32}    # or give them here (setups without Kubernetes API access)
kubernetes:                   # how to reach the API (in-cluster credentials by default)
  host: null                  # e.g. "http://127.0.0.1:8001" for `kubectl proxy`
  kubeconfig: null
profile:                      # the standalone scheduler's Score plugins (docs/standalone.md);
  - {name: KubejouleEnergy, weight: 1}        # default: kubejoule's energy plugin alone
percentage_of_nodes_to_score: null  # standalone: kube-scheduler's rule (0: adaptive); null: all
rebalancer:                   # the energy rebalancer (docs/rebalancer.md has every key)
  mode: shadow                # shadow: annotate and record | active: taint and evict
extender:
  max_body_bytes: auto        # larger requests get 413; auto: 16 KiB per known node, ≥ 16 MiB
  inflight_body_bytes: 67108864  # bodies held at once, all requests; beyond: 503 + Retry-After
  shadow_log_size: 1000       # recommendations kept in memory in shadow mode
  watch_cluster: auto         # watch Nodes and Pods to count pods bound since each sample:
                              # auto (on when a Kubernetes configuration is found) | true | false
```

This module parses and checks; the objects built from a `Config` (energy plugin, profile, API
client, TelemetryStore) are `scheduler.config.build`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from common.cloud_estimates import CloudEstimateError, lookup, parse_instance_type
from common.curves import PowerCurve
from common.power_profile import PowerProfileError, load_power_profile
from scheduler.config.basics import ConfigError, parse_listen  # re-exported: the commands use them
from scheduler.config.fields import (  # the sections' types and checkers, re-exported here
    TelemetryConfig,
    _bool,
    _keys,
    _number,
    _opt_str,
    _section,
    _str,
    _telemetry,
)
from scheduler.config.rebalancer import RebalancerConfig, rebalancer_config
from scheduler.decisions.expansion import DEFAULT_GROUP_LABELS  # `node_group_labels:`'s default
from scheduler.framework.decision import MODES
from scheduler.framework.nodes_to_score import num_feasible_nodes_to_find
from scheduler.plugins.energy import DEFAULT_CONSOLIDATION_UTILIZATION, EnergyPlugin

log = logging.getLogger("kubejoule.scheduler.config")

# A node group's power profile file (`node_groups: {NAME: {power_profile: FILE}}`); `profile`
# is its old name, still read with a warning (docs/DESIGN.md, "Glossary").
POWER_PROFILE_KEY = "power_profile"
OLD_POWER_PROFILE_KEY = "profile"
# A cloud instance type whose published coefficients give the curve (`{instance_type: aws:m5.xlarge}`;
# common/cloud_estimates.py): an estimate, as the agent's `--instance-type` curve is.
INSTANCE_TYPE_KEY = "instance_type"


@dataclass(frozen=True)
class KubernetesConfig:
    host: str | None = None  # the API's URL, e.g. "http://127.0.0.1:8001" for `kubectl proxy`
    kubeconfig: str | None = None  # a kubeconfig file (default: in-cluster credentials)


@dataclass(frozen=True)
class ScorerConfig:
    name: str = "heuristic"  # the extender's scorer (the only one it has)
    delta_p_ref_watts: float = 20.0  # the power increase ΔP that scores 0 (docs/scheduler.md: choosing it)
    consolidation: bool = False  # true where empty nodes are powered off or scaled down
    # the load a consolidated node runs at: a node's opening costs are spread over it
    consolidation_utilization: float = DEFAULT_CONSOLIDATION_UTILIZATION


@dataclass(frozen=True)
class ExtenderConfig:
    # larger requests get 413; null or auto: from the cluster's size, 16 KiB per known node and at
    # least 16 MiB (extender/body.py)
    max_body_bytes: int | None = None
    # request bodies held at once, all requests together; beyond it 503 with Retry-After (null: 64 MiB)
    inflight_body_bytes: int | None = None
    shadow_log_size: int = 1000  # recommendations kept in memory in shadow mode
    # watch Nodes and Pods to count the pods bound since each node's sample; null or auto: on when a
    # Kubernetes configuration is found (kubernetes_configured())
    watch_cluster: bool | None = None


@dataclass(frozen=True)
class Config:
    mode: str = "shadow"  # shadow: recommend and record only; active: place pods by energy
    listen: str = "0.0.0.0:8888"  # the extender's HOST:PORT
    max_staleness_seconds: float = 30.0  # older telemetry is stale: the node is priced at its worst
    refresh_seconds: float = 5.0  # the background telemetry refresh period
    scorer: ScorerConfig = field(default_factory=ScorerConfig)  # how the extender scores nodes
    # power curves of nodes whose agent exports none, by node name: {model: linear|fan, idle_watts,
    # max_watts[, r]}, {points: [11 watts at 0 %, 10 %, … 100 %]} or {instance_type: PROVIDER:TYPE}
    curves: dict[str, PowerCurve] = field(default_factory=dict)
    # cluster-autoscaler node groups' curves (the expander), by group id or node_group_labels value:
    # a curve as in `curves`, {power_profile: FILE} or a bare FILE (a power profile with a curve)
    node_groups: dict[str, PowerCurve] = field(default_factory=dict)
    node_group_labels: tuple[str, ...] = DEFAULT_GROUP_LABELS  # template-node labels whose value names a curve
    power_caps_watts: dict[str, float] = field(default_factory=dict)  # /filter drops a node only if the pod would push it past its cap
    default_power_cap_watts: float | None = None  # a cap for every node not in power_caps_watts
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)  # where node telemetry comes from
    kubernetes: KubernetesConfig = field(default_factory=KubernetesConfig)  # how to reach the API
    extender: ExtenderConfig = field(default_factory=ExtenderConfig)  # the extender's HTTP limits and cluster watch
    # the standalone scheduler's Score plugins, a list of {name, weight, args} checked when parsed
    # (scheduler/config/registry.py; docs/standalone.md); null: kubejoule's energy plugin alone
    profile: tuple[Mapping[str, object], ...] | None = None
    # the standalone scheduler scores only the feasible nodes kube-scheduler's rule finds (0: its
    # adaptive default); null: all
    percentage_of_nodes_to_score: int | None = None
    rebalancer: RebalancerConfig = field(default_factory=RebalancerConfig)  # the energy rebalancer (docs/rebalancer.md)

    def power_cap(self, node: str) -> float | None:
        return self.power_caps_watts.get(node, self.default_power_cap_watts)

    @property
    def needs_kubernetes(self) -> bool:
        t = self.telemetry
        return bool(
            t.agents.endpoint_slices or t.metrics_server or t.node_capacity_from_kubernetes
        )


# -- parsing -------------------------------------------------------------------------------------


# -- parsing -------------------------------------------------------------------------------------


def _curves(data: object, where: str = "curves", profiles: bool = False) -> dict[str, PowerCurve]:
    """Curves by name; with `profiles`, a value may also be `{power_profile: FILE}` or a bare
    FILE (a power profile with a curve). The old key `profile` still works, with a warning."""
    curves = {}
    for name, spec in _section(data, where, _keys(data)).items():
        if profiles and isinstance(spec, str):
            spec = {POWER_PROFILE_KEY: spec}
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{where}.{name}: expected a mapping")
        if profiles and OLD_POWER_PROFILE_KEY in spec and POWER_PROFILE_KEY not in spec:
            log.warning("%s.%s: the key %r is deprecated, use %r", where, name, OLD_POWER_PROFILE_KEY,
                        POWER_PROFILE_KEY)
            spec = {POWER_PROFILE_KEY if k == OLD_POWER_PROFILE_KEY else k: v for k, v in spec.items()}
        if profiles and POWER_PROFILE_KEY in spec:
            curves[str(name)] = _profile_curve(spec, f"{where}.{name}")
            continue
        if INSTANCE_TYPE_KEY in spec:
            curves[str(name)] = _instance_curve(spec, f"{where}.{name}")
            continue
        try:
            curves[str(name)] = PowerCurve.from_mapping(spec)
        except (KeyError, ValueError, TypeError) as exc:
            raise ConfigError(f"{where}.{name}: {exc!r}") from exc
    return curves


def _profile_curve(spec: Mapping[str, object], where: str) -> PowerCurve:
    _section(spec, where, {POWER_PROFILE_KEY})
    try:
        profile = load_power_profile(_str(spec[POWER_PROFILE_KEY], f"{where}.{POWER_PROFILE_KEY}"))
    except PowerProfileError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    if profile.curve is None:
        raise ConfigError(f"{where}: the power profile {spec[POWER_PROFILE_KEY]} has no power curve")
    return profile.curve


def _instance_curve(spec: Mapping[str, object], where: str) -> PowerCurve:
    """An unknown or malformed type is a ConfigError naming it, never a similar type's curve."""
    _section(spec, where, {INSTANCE_TYPE_KEY})
    try:
        return lookup(*parse_instance_type(_str(spec[INSTANCE_TYPE_KEY], f"{where}.{INSTANCE_TYPE_KEY}"))).curve()
    except CloudEstimateError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _labels(value: object) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_GROUP_LABELS
    if not isinstance(value, list):
        raise ConfigError(f"node_group_labels: expected a list of label keys, got {value!r}")
    return tuple(_str(v, "node_group_labels[]") for v in value)


def config_from_dict(data: Mapping[str, object] | None) -> Config:
    top = _section(
        data,
        "config",
        {
            "mode", "listen", "max_staleness_seconds", "refresh_seconds", "scorer", "curves",
            "node_groups", "node_group_labels", "power_caps_watts", "default_power_cap_watts", "telemetry", "kubernetes", "extender",
            "profile", "percentage_of_nodes_to_score", "rebalancer",
        },
    )
    mode = top.get("mode", "shadow")
    if not isinstance(mode, str) or mode not in MODES:
        raise ConfigError(f"mode: expected one of {list(MODES)}, got {mode!r}")
    listen = str(top.get("listen", "0.0.0.0:8888"))
    parse_listen(listen)
    s = _section(
        top.get("scorer"),
        "scorer",
        {"name", "delta_p_ref_watts", "consolidation", "consolidation_utilization"},
    )
    reference_load = _number(
        s.get("consolidation_utilization", DEFAULT_CONSOLIDATION_UTILIZATION),
        "scorer.consolidation_utilization",
    )
    if reference_load > 1.0:
        raise ConfigError(f"scorer.consolidation_utilization: must be at most 1, got {reference_load!r}")
    scorer = ScorerConfig(
        name=_str(s.get("name", "heuristic"), "scorer.name"),
        delta_p_ref_watts=_number(s.get("delta_p_ref_watts", 20.0), "scorer.delta_p_ref_watts"),
        consolidation=_bool(s.get("consolidation", False), "scorer.consolidation"),
        consolidation_utilization=reference_load,
    )
    if scorer.name != "heuristic":
        raise ConfigError(f"scorer.name: only 'heuristic' is available here, got {scorer.name!r}")
    caps_raw = top.get("power_caps_watts") or {}
    caps = {
        str(node): _number(cap, f"power_caps_watts.{node}")
        for node, cap in _section(caps_raw, "power_caps_watts", _keys(caps_raw)).items()
    }
    default_cap = top.get("default_power_cap_watts")
    k = _section(top.get("kubernetes"), "kubernetes", {"host", "kubeconfig"})
    e = _section(top.get("extender"), "extender", {"max_body_bytes", "inflight_body_bytes", "shadow_log_size", "watch_cluster"})
    watch = e.get("watch_cluster", "auto")
    curves = _curves(top.get("curves"))
    return Config(
        mode=mode,
        listen=listen,
        max_staleness_seconds=_number(top.get("max_staleness_seconds", 30.0), "max_staleness_seconds"),
        refresh_seconds=_number(top.get("refresh_seconds", 5.0), "refresh_seconds"),
        scorer=scorer,
        curves=curves,
        node_groups=_curves(top.get("node_groups"), "node_groups", profiles=True),
        node_group_labels=_labels(top.get("node_group_labels")),
        power_caps_watts=caps,
        default_power_cap_watts=(
            None if default_cap is None else _number(default_cap, "default_power_cap_watts")
        ),
        telemetry=_telemetry(top.get("telemetry")),
        kubernetes=KubernetesConfig(
            host=_opt_str(k.get("host"), "kubernetes.host"),
            kubeconfig=_opt_str(k.get("kubeconfig"), "kubernetes.kubeconfig"),
        ),
        extender=ExtenderConfig(
            max_body_bytes=(
                None
                if e.get("max_body_bytes") in (None, "auto")
                else int(_number(e["max_body_bytes"], "extender.max_body_bytes"))
            ),
            inflight_body_bytes=(
                None
                if e.get("inflight_body_bytes") is None
                else int(_number(e["inflight_body_bytes"], "extender.inflight_body_bytes"))
            ),
            shadow_log_size=int(_number(e.get("shadow_log_size", 1000), "extender.shadow_log_size")),
            watch_cluster=None if watch in ("auto", None) else _bool(watch, "extender.watch_cluster"),
        ),
        profile=_profile(top.get("profile"), curves),
        percentage_of_nodes_to_score=_percentage(top.get("percentage_of_nodes_to_score")),
        rebalancer=rebalancer_config(top.get("rebalancer")),
    )


def _profile(data: object, curves: Mapping[str, PowerCurve]) -> tuple[Mapping[str, object], ...] | None:
    """The profile entries, checked by building them once (with a stand-in energy plugin)."""
    if data is None:
        return None
    from scheduler.config.registry import PluginContext, score_entries

    try:
        score_entries(data, PluginContext(EnergyPlugin(), curves))
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    # score_entries took it: a list of mappings
    return tuple(entry for entry in data if isinstance(entry, Mapping)) if isinstance(data, list) else ()


def _percentage(value: object) -> int | None:
    if value is None:
        return None
    try:
        if not isinstance(value, int):  # as num_feasible_nodes_to_find says of it
            raise ValueError(f"percentageOfNodesToScore must be an integer, got {value!r}")
        num_feasible_nodes_to_find(value, 0)
    except ValueError as exc:
        raise ConfigError(f"percentage_of_nodes_to_score: {exc}") from exc
    return int(value)


def load_config(path: str | Path | None) -> Config:
    """The configuration from a YAML file; defaults when `path` is None."""
    if path is None:
        return Config()
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from exc
    try:
        return config_from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
