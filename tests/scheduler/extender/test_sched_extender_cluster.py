"""The extender with a cluster view: pods placed since the sample count in u and in the caps."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.harness.sched_sources import FixedSource
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, Resources
from scheduler.extender.core import Extender
from scheduler.extender.wire import ExtenderArgs, parse_args
from scheduler.plugins.defaults import served_profile
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.samples import NodeSample
from scheduler.telemetry.store import TelemetryStore
from tests.helpers.sched_extender import (
    LINE_100_260,
    NOW,
    POD,
    answer,
)


class OneNodeCluster:
    """A cluster view of one 8-core node "n", with `since` cores placed since its sample."""

    since = 0.0

    def node_states(self, telemetry: Any = None) -> list[NodeState]:
        info = NodeInfo("n", Resources(cpu_millicores=8000))
        return [NodeState(info, telemetry=telemetry("n"), cpu_since_sample_cores=self.since, pod_count=2)]

    def place_since_sample(self, extender: Extender, cores: float) -> None:
        self.since = cores


def one_node_extender(
    watts: float, utilization: float, curve: tuple[float, ...], energy: EnergyPlugin, **kwargs: Any
) -> tuple[Extender, OneNodeCluster, ExtenderArgs]:
    """An active extender over OneNodeCluster, its node sampled a second ago, and the args of
    the 2-core POD for it."""
    sample = NodeTelemetry("n", NOW - 1, watts, "rapl", utilization, 8.0, curve)
    store = TelemetryStore([FixedSource({"n": NodeSample(sample)})], clock=lambda: NOW)
    store.refresh_once()
    cluster = OneNodeCluster()
    extender = Extender(
        served_profile(energy), store, mode="active", clock=lambda: NOW, cluster=cluster, **kwargs
    )
    return extender, cluster, parse_args(json.dumps({"Pod": POD, "NodeNames": ["n"]}).encode())


def test_cluster_view_supplies_pods_placed_since_the_sample() -> None:
    """With a cluster view (pods from watches), pods bound since the sample raise u."""
    steep = (100.0,) * 6 + (100.0, 300.0, 500.0, 700.0, 900.0)  # flat to 60 %, then 2000 W/unit
    extender, cluster, args = one_node_extender(
        100.0, 0.4, steep, energy=EnergyPlugin(delta_p_ref_watts=1000.0)
    )
    # u 0.4 → 0.65 with the 2-core pod: 0.05 into the steep part → ΔP = 100 W → score 90 → 9.
    assert answer(extender, args) == [{"Host": "n", "Score": 9}]
    cluster.place_since_sample(extender, 2.0)  # u 0.65 → 0.9, ΔP = 500 W → 50 → 5
    assert answer(extender, args) == [{"Host": "n", "Score": 5}]


def test_power_caps_count_the_pods_placed_since_the_sample() -> None:
    """150 W measured at u = 0.5 on a 100 → 260 W line (8 cores). A 2-core pod adds 40 W: 190 W,
    under a 200 W cap. With 2 cores bound since the sample the node already draws about 190 W,
    so the pod would take it to 230 W: over the cap."""
    extender, cluster, args = one_node_extender(
        150.0, 0.5, LINE_100_260, energy=EnergyPlugin(delta_p_ref_watts=50.0),
        power_caps_watts={"n": 200.0},
    )
    assert extender.filter(args)["NodeNames"] == ["n"]
    cluster.place_since_sample(extender, 2.0)
    result = extender.filter(args)
    assert result["NodeNames"] == [] and "230 W" in result["FailedNodes"]["n"]
