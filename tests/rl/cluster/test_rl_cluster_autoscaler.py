"""cluster-autoscaler on the harness (rl/cluster/autoscaler.py), everything that needs no binary:
its command line from the autoscaler model and the speedup, the kwok provider's ConfigMaps and
templates, the nodes on at t = 0, and its scale-ups read from its log."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from rl.cluster import autoscaler as ca
from rl.cluster import kwok
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.traces.scenario import parse_node_groups

NODES = parse_node_groups([
    {"name": "lean", "count": 3, "cpu_cores": 4, "memory_gib": 8, "power": {"idle_watts": 40, "max_watts": 110}},
    {"name": "hot", "count": 2, "cpu_cores": 16, "memory_gib": 32, "min_count": 1,
     "power": {"idle_watts": 150, "max_watts": 400}},
])


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)


def test_every_timer_is_the_models_value_divided_by_the_speedup() -> None:
    model = replace(AutoscalerModel(), scale_down_unneeded_s=300.0, expander="least-waste")
    flags = _flags(ca.ca_argv(Path("/ca"), model, 30.0, Path("/kc"), 8085))
    assert flags["scan-interval"] == "333ms"  # 10 s ÷ 30
    assert flags["scale-down-unneeded-time"] == "10000ms"  # the model's 300 s, not CA's 600 s
    assert flags["scale-down-delay-after-add"] == "20000ms"
    assert flags["scale-down-delay-after-failure"] == "6000ms"
    assert flags["max-pod-eviction-time"] == "4000ms"
    assert flags["max-node-provision-time"] == "30000ms"  # CA's own 15 min default, scaled too
    assert flags["node-delete-delay-after-taint"] == "167ms"
    assert flags["max-graceful-termination-sec"] == "20"  # whole seconds
    assert flags["expander"] == "least-waste"
    assert flags["cloud-provider"] == "kwok" and flags["address"] == "127.0.0.1:8085"
    assert flags["scale-down-utilization-threshold"] == "0.5"
    assert {t.flag for t in ca.SCALED_TIMERS} <= set(flags)
    assert "grpc-expander-url" not in flags
    assert flags["frequent-loops-enabled"] == "true"  # the model's, as cluster-autoscaler ships
    off = _flags(ca.ca_argv(Path("/ca"), replace(model, frequent_loops_enabled=False), 30.0, Path("/kc"), 8085))
    assert off["frequent-loops-enabled"] == "false"


def test_the_kubejoule_expander_is_grpc_to_ours_and_the_rest_is_refused() -> None:
    model = replace(AutoscalerModel(), expander="kubejoule")
    flags = _flags(ca.ca_argv(Path("/ca"), model, 60.0, Path("/kc"), 1, "127.0.0.1:9443", Path("/pki/ca.crt")))
    assert flags["expander"] == "grpc"  # alone: CA's chain ends in a random pick, as the simulator's ties
    assert flags["grpc-expander-url"] == "127.0.0.1:9443" and flags["grpc-expander-cert"] == "/pki/ca.crt"
    with pytest.raises(ValueError, match="URL and certificate"):
        ca.ca_argv(Path("/ca"), model, 60.0, Path("/kc"), 1)
    with pytest.raises(ValueError, match="not run on the cluster"):
        ca.ca_argv(Path("/ca"), replace(model, expander="priority"), 60.0, Path("/kc"), 1)
    with pytest.raises(ValueError, match="no cluster-autoscaler flag"):
        ca.ca_argv(Path("/ca"), replace(AutoscalerModel(), utilization_threshold=None), 60.0, Path("/kc"), 1)
    with pytest.raises(ValueError, match="speedup"):
        ca.ca_argv(Path("/ca"), AutoscalerModel(), 0.0, Path("/kc"), 1)


def test_the_provider_reads_one_template_per_group_with_its_sizes_curve_and_boot() -> None:
    config_map, templates_map = ca.provider_configmaps(NODES, 4.0)
    config = yaml.safe_load(config_map["data"]["config"])
    assert config_map["metadata"] == {"name": "kwok-provider-config", "namespace": "kube-system"}
    assert config["readNodesFrom"] == "configmap" and config["configmap"]["name"] == templates_map["metadata"]["name"]
    assert config["nodegroups"] == {"fromNodeLabelKey": kwok.GROUP_LABEL}
    assert config["nodes"]["skipTaint"] is True  # pods need no toleration, as on the static nodes
    items = yaml.safe_load(templates_map["data"]["templates"])["items"]
    assert [t["metadata"]["name"] for t in items] == ["lean", "hot"]
    lean, hot = ({**t["metadata"]["annotations"], **t["metadata"]["labels"]} for t in items)
    assert (lean[ca.NG_MIN_ANNOTATION], lean[ca.NG_MAX_ANNOTATION], lean[ca.NG_DESIRED_ANNOTATION]) == ("0", "3", "0")
    assert (hot[ca.NG_MIN_ANNOTATION], hot[ca.NG_MAX_ANNOTATION], hot[ca.NG_DESIRED_ANNOTATION]) == ("1", "2", "1")
    assert lean[kwok.GROUP_LABEL] == "lean" and lean[kwok.NODE_ANNOTATION] == "fake"
    assert lean[kwok.BOOT_ANNOTATION] == "4000ms"
    assert yaml.safe_load(lean[kwok.CURVE_ANNOTATION]) == list(NODES[0].curve.as_points())
    assert "kubernetes.io/hostname" not in lean
    assert items[1]["status"]["capacity"] == {"cpu": "16000m", "memory": "32768Mi", "pods": "110"}
    # Not Ready: the node lifecycle controller keeps the API's not-ready taint until KWOK boots it.
    assert items[0]["status"]["conditions"] == [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                                 "message": items[0]["status"]["conditions"][0]["message"]}]


def test_the_nodes_on_at_the_start_are_the_groups_minimum_counted_by_the_provider() -> None:
    initial = ca.initial_nodes(NODES, "run1")
    assert [n["metadata"]["name"] for n in initial] == ["hot-0-run1"]
    node = initial[0]
    assert node["metadata"]["annotations"][ca.NG_NAME_ANNOTATION] == "hot"
    assert node["spec"]["providerID"] == "kwok:hot-0-run1"
    assert kwok.BOOT_ANNOTATION not in node["metadata"]["annotations"]  # Ready at once, as initially_on
    assert node["metadata"]["annotations"][kwok.METRICS_PATH_ANNOTATION] == "/metrics/nodes/hot-0-run1/metrics/resource"
    more = parse_node_groups([{"name": "g", "count": 3, "cpu_cores": 1, "memory_gib": 1, "min_count": 1,
                               "initial_count": 2, "power": {"idle_watts": 1, "max_watts": 2}}])
    assert [n["metadata"]["name"] for n in ca.initial_nodes(more)] == ["g-0", "g-1"]


def test_scale_ups_are_the_loops_that_logged_a_final_plan() -> None:
    log = "\n".join([
        "I1205 08:44:24.268953 968 orchestrator.go:177] Final scale-up plan: [{eff 1->2 (max: 3)}]",
        "I1205 08:44:24.269417 968 executor.go:166] Scale-up: setting group eff size to 2",
        "I1205 08:44:34.322127 968 orchestrator.go:177] Final scale-up plan: [{ineff 0->1 (max: 3)}]",
        "I1205 08:45:00.000000 968 actuator.go:176] Scale-down: removing empty node \"eff-abcde\"",
    ])
    assert ca.scale_ups_in_log(log) == 2
    assert ca.scale_ups_in_log("") == 0
