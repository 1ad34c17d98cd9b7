"""The extender scores a scheduling profile (scheduler/extender/core.py): its answer is the
profile's weighted total, the energy plugin's entry given its scores once per request; the
profile it serves (`served_profile`) answers what the energy plugin alone answers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.harness.sched_sources import FixedSource
from scheduler.domain.model import PodInfo
from scheduler.extender.core import Extender
from scheduler.extender.wire import ExtenderArgs, parse_args
from scheduler.framework.batch import CandidateBatch
from scheduler.framework.interface import extender_priority
from scheduler.framework.scheduling_profile import SchedulingProfile
from scheduler.plugins.defaults import default_filters, served_profile
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.store import TelemetryStore
from tests.helpers.sched_extender import NOW, POD, answer, node_object, telemetry

NAMES = ["hungry", "frugal", "stale", "nocurve", "unknown"]


class Favours:
    """A Score plugin that gives one node `score` and every other 0."""

    name = "favours"

    def __init__(self, node: str, score: int) -> None:
        self.node, self.points = node, score

    def score(self, pod: PodInfo, batch: CandidateBatch) -> np.ndarray:
        return np.array([self.points if n == self.node else 0 for n in batch.names], dtype=np.int64)


def extender_with(profile: SchedulingProfile) -> Extender:
    store = TelemetryStore([FixedSource(telemetry())], node_cores=lambda: {}, clock=lambda: NOW)
    extender = Extender(profile, store, mode="active", clock=lambda: NOW)
    store.refresh_once()
    return extender


def request(extender: Extender, names: list[str]) -> ExtenderArgs:
    """A Nodes.items request (the Node objects give the nodes' cores)."""
    body = {"Pod": POD, "Nodes": {"items": [node_object(n) for n in names]}}
    return parse_args(json.dumps(body).encode(), extender.states.node_info)


def scores(extender: Extender, names: list[str]) -> dict[str, int]:
    args = request(extender, names)
    return {entry["Host"]: entry["Score"] for entry in answer(extender, args)}


def test_the_served_profile_answers_the_energy_plugins_scores() -> None:
    energy = EnergyPlugin(delta_p_ref_watts=50.0)
    extender = extender_with(served_profile(energy))
    assert extender.energy is energy
    args = request(extender, NAMES)
    batch, rows = extender.candidates(args, NOW)
    alone = extender_priority(energy.evaluate(args.pod, batch, rows=rows).score)
    assert scores(extender, NAMES) == dict(zip(NAMES, alone.tolist(), strict=True))
    assert scores(extender, NAMES) == {"hungry": 2, "frugal": 6, "stale": 6, "nocurve": 0, "unknown": 0}


def test_the_answer_is_the_profiles_weighted_total() -> None:
    """Energy (hungry 20, frugal 60, stale 60, nocurve 0) plus 40 for `hungry` alone: hungry's
    total is 60 — kube-scheduler reads 6, where the energy plugin alone says 2."""
    energy = EnergyPlugin(delta_p_ref_watts=50.0)
    profile = SchedulingProfile("energy+favours", (), [(energy, 1), (Favours("hungry", 40), 1)])
    got = scores(extender_with(profile), NAMES)
    assert got == {"hungry": 6, "frugal": 6, "stale": 6, "nocurve": 0, "unknown": 0}
    # The NodeNames form, scored on the prepared batch's rows (the Node objects above taught
    # it the cores): the other plugin sees the request's nodes, in the request's order.
    extender = extender_with(profile)
    scores(extender, NAMES)
    args = parse_args(json.dumps({"Pod": POD, "NodeNames": ["nocurve", "hungry"]}).encode(),
                      extender.states.node_info)
    assert extender.candidates(args, NOW)[1] is not None  # rows of the prepared batch
    assert {e["Host"]: e["Score"] for e in answer(extender, args)} == {"nocurve": 0, "hungry": 6}


def test_a_profile_without_the_energy_plugin_or_with_filters_is_refused() -> None:
    store = TelemetryStore([FixedSource(telemetry())], clock=lambda: NOW)
    with pytest.raises(ValueError, match="no energy plugin"):
        Extender(SchedulingProfile("none", (), [(Favours("a", 1), 1)]), store)
    with pytest.raises(ValueError, match="filters"):
        Extender(SchedulingProfile("filters", default_filters(), [(EnergyPlugin(), 1)]), store)
