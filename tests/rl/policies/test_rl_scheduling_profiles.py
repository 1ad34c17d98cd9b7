"""Profiles as simulator policies: `default+extender:W` is kube-scheduler's weighted sum with the
extender's rounded 0–10 answer × W × 10 (computed by hand), the named profiles are the
scheduler's own builders, and profile files give the same profiles as the names."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from common.curves import PowerCurve
from rl.policies.catalog import make_policy
from rl.policies.profile_policy import ProfilePolicy
from rl.policies.scheduling_profiles import DEPLOYED_DELTA_P_REF_WATTS, ProfileFileError
from rl.simulation.traces.scenario import NodeSpec
from scheduler.domain.model import NodeInfo, NodeState, NodeTelemetry, PodInfo, Resources
from scheduler.framework import CandidateBatch
from scheduler.plugins.defaults import default_profile, shipped_kubejoule_profile

GIB = 2**30


def state(name: str, requested_mc: int, requested_gib: int, u: float, curve: PowerCurve) -> NodeState:
    info = NodeInfo(name, Resources(4000, 8 * GIB, 110))
    telemetry = NodeTelemetry(
        name, 0.0, watts=curve.watts(u), source="estimated", utilization=u, cores=4,
        curve_points=tuple(curve.watts(i / 10) for i in range(11)),
    )
    return NodeState(
        info, Resources(requested_mc, requested_gib * GIB, 1), telemetry,
        pod_count=1 if requested_mc else 0,
    )


# Pod: 1 core, 1 GiB. Two 4-core, 8-GiB nodes:
#   a: 2 cores + 2 GiB requested, at 50 %, curve 50 → 74 W (24 W per unit of load);
#   b: nothing requested, at 0 %, curve 50 → 110 W (60 W per unit).
# kube-scheduler's default profile (no taints, no affinity):
#   TaintToleration: no intolerable taint anywhere → normalized (reverse) 100, × 3 = 300 each;
#   NodeAffinity: no preferred terms → 0;
#   NodeResourcesFit LeastAllocated: a: cpu (4000 − 3000)·100 // 4000 = 25, memory
#     (8 − 3)·100 // 8 = 62 → (25 + 62) // 2 = 43;  b: 75 and 87 → 81;
#   BalancedAllocation (1.36: the change in balance): a: before |0.5 − 0.25| / 2 → 87, with
#     the pod |0.75 − 0.375| / 2 = 0.1875 → int(81.25) = 81, so 50 + (50 + 81 − 87) // 2 = 72;
#     b: before 100, with the pod |0.25 − 0.125| / 2 → 93, so 50 + (50 + 93 − 100) // 2 = 71.
#   Default totals: a 300 + 43 + 72 = 415, b 300 + 81 + 71 = 452 (kube-scheduler picks b).
# The energy plugin without consolidation, ΔP_ref 20 W: a ΔP = 0.25 × 24 = 6 W → 100·(1 − 6/20)
#   = 70 → extender 7; b ΔP = 0.25 × 60 = 15 W → 25 → 2.5, rounded half up → 3.
# default+extender:W adds 7·W·10 to a and 3·W·10 to b:
DEFAULT_TOTALS = {"a": 415, "b": 452}
EXTENDER_SCORES = {"a": 7, "b": 3}
A = state("a", 2000, 2, 0.5, PowerCurve.linear(50, 74))
B = state("b", 0, 0, 0.0, PowerCurve.linear(50, 110))
POD = PodInfo("ns", "p", "uid", Resources(1000, GIB, 1))
SPECS = [NodeSpec(n, "g", 4, 8, PowerCurve.linear(50, 100)) for n in ("a", "b")]


def totals(name: str) -> dict[str, int]:
    policy = make_policy(name, SPECS)
    assert isinstance(policy, ProfilePolicy)
    scored = policy.profile.score(POD, CandidateBatch.of([A, B], 0.0))
    return dict(zip(("a", "b"), scored.total.tolist(), strict=True))


def choice(name: str) -> str:
    policy = make_policy(name, SPECS)
    policy.reset(SPECS, random.Random(0))
    return policy.choose(POD, [A, B], 0.0)


def test_the_extender_weight_enters_as_kube_scheduler_adds_it():
    assert DEPLOYED_DELTA_P_REF_WATTS == 20.0  # the hand computation above assumes it
    assert totals("default") == DEFAULT_TOTALS
    assert choice("default") == "b"
    for weight, winner in ((1, "a"), (2, "a"), (5, "a"), (12, "a")):
        want = {n: DEFAULT_TOTALS[n] + EXTENDER_SCORES[n] * weight * 10 for n in "ab"}
        assert totals(f"default+extender:{weight}") == want  # e.g. W = 1: a 485, b 482 (the extender at weight 1 already tips it)
        assert choice(f"default+extender:{weight}") == winner


def test_named_profiles_are_the_schedulers_builders():
    def layout(profile):
        return [(type(p).__name__, getattr(p, "strategy", None), w) for p, w in profile.scores]

    for name, strategy in (("default", "LeastAllocated"), ("mostallocated", "MostAllocated")):
        policy = make_policy(name, SPECS)
        assert isinstance(policy, ProfilePolicy)
        assert layout(policy.profile) == layout(default_profile(strategy=strategy))
    kubejoule = make_policy("kubejoule", SPECS)
    assert isinstance(kubejoule, ProfilePolicy)
    standalone = shipped_kubejoule_profile(kubejoule.profile.scores[0][0])
    assert layout(kubejoule.profile) == layout(standalone)
    assert layout(standalone) == [("EnergyPlugin", None, 3), ("NodeResourcesFit", "MostAllocated", 1)]


def test_a_profile_file_gives_the_named_profiles_totals(tmp_path: Path):
    path = tmp_path / "extender5.yaml"
    path.write_text(
        "- {name: TaintToleration, weight: 3}\n"
        "- {name: NodeAffinity, weight: 2}\n"
        "- {name: NodeResourcesFit, weight: 1}\n"
        "- {name: NodeResourcesBalancedAllocation, weight: 1}\n"
        "- {name: KubejouleEnergy, weight: 5, extender: true}\n"
    )
    assert totals(f"profile:{path}") == totals("default+extender:5")
    # With the configuration's scorer: section beside it, ΔP_ref 10 W: a 100·(1 − 6/10) = 40 → 4,
    # b 15 W → 0.
    config = tmp_path / "config.yaml"
    config.write_text("scorer: {delta_p_ref_watts: 10}\nprofile:\n" + "".join(
        "  " + line + "\n" for line in path.read_text().splitlines()
    ))
    assert totals(f"profile:{config}") == {"a": 415 + 4 * 5 * 10, "b": 452}
    packing = tmp_path / "packing.yaml"
    packing.write_text(
        "- name: NodeResourcesFit\n"
        "  args: {scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 1}]}}\n"
    )
    # MostAllocated on cpu alone: a 3000·100 // 4000 = 75, b 1000·100 // 4000 = 25.
    assert totals(f"profile:{packing}") == {"a": 75, "b": 25}
    assert choice(f"profile:{packing}") == "a"


def test_profiles_score_the_nodes_their_scheduler_scores(tmp_path: Path):
    """kube-scheduler's profiles score its adaptive percentageOfNodesToScore sample, kubejoule's
    scheduler every feasible node as it ships, a profile file what it configures."""
    for name in ("default", "mostallocated", "default+extender:5", "peaks", "trimaran"):
        policy = make_policy(name, SPECS)
        assert isinstance(policy, ProfilePolicy) and policy.profile.filters
        assert policy.percentage_of_nodes_to_score == 0, name
    for name in ("kubejoule", "heuristic"):
        policy = make_policy(name, SPECS)
        assert isinstance(policy, ProfilePolicy) and policy.profile.filters
        assert policy.percentage_of_nodes_to_score is None, name
    path = tmp_path / "sampled.yaml"
    path.write_text("percentage_of_nodes_to_score: 30\nprofile: [{name: NodeResourcesFit}]\n")
    policy = make_policy(f"profile:{path}", SPECS)
    assert isinstance(policy, ProfilePolicy) and policy.percentage_of_nodes_to_score == 30
    assert [type(f).__name__ for f in policy.profile.filters] == [
        "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit",
    ]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{}", "list"),
        ("- {name: Nope}", "Nope"),
        ("- {name: NodeResourcesFit, weight: -1}", "weight"),
        ("- {name: NodeResourcesFit, colour: red}", "colour"),
        ("- {name: TaintToleration, args: {x: 1}}", "TaintToleration"),
        ("- {name: NodeResourcesFit}\n- {name: NodeResourcesFit}", "twice"),
        ("- [", "YAML"),
        ("scorer: {colour: red}\nprofile: [{name: NodeResourcesFit}]", "colour"),
        ("scorer: {delta_p_ref_watts: -1}\nprofile: [{name: KubejouleEnergy}]", "delta_p_ref_watts"),
        ("profiles: []", "profiles"),
        ("percentage_of_nodes_to_score: 130\nprofile: [{name: NodeResourcesFit}]", "0..100"),
        ("percentage_of_nodes_to_score: half\nprofile: [{name: NodeResourcesFit}]", "percentage"),
    ],
)
def test_bad_profile_files_are_refused_with_the_reason(tmp_path: Path, text: str, reason: str):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ProfileFileError, match=reason):
        make_policy(f"profile:{path}", SPECS)


def test_bad_policy_names_are_refused():
    for name in ("default+extender:0", "default+extender:x", "default+extender:", "default+extender:05"):
        with pytest.raises(ValueError, match="extender weight"):
            make_policy(name, SPECS)
    with pytest.raises(ValueError, match="cannot read"):
        make_policy("profile:/nonexistent/p.yaml", SPECS)


def test_profile_policies_break_ties_at_random_with_the_seed():
    twin = state("b2", 0, 0, 0.0, PowerCurve.linear(50, 110))
    picks = set()
    for seed in range(20):
        policy = make_policy("default+extender:5", SPECS)
        policy.reset(SPECS, random.Random(seed))
        picks.add(policy.choose(POD, [B, twin], 0.0))
    assert picks == {"b", "b2"}
    assert np.array_equal(
        make_policy("default", SPECS).profile.score(POD, CandidateBatch.of([B, twin], 0.0)).total,  # type: ignore[attr-defined]
        np.array([452, 452]),
    )
