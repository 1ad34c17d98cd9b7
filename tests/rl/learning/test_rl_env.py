"""The gymnasium environment: API conformance, rewards that add up to the run's energy."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from common.curves import PowerCurve
from rl.learning.env import ClusterSchedulingEnv, EnvConfig
from rl.simulation.engine.simulator import PowerOffModel
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from rl.simulation.traces.tracegen import TraceConfig, generate_trace
from scheduler.learning.features import FEATURE_SCHEMA


def small_cluster() -> list[NodeSpec]:
    return [
        NodeSpec("big-0", "big", 8, 16, PowerCurve.linear(60, 200)),
        NodeSpec(
            "small-0",
            "small",
            2,
            4,
            PowerCurve.from_points([86, 89.4, 92.6, 96, 99.5, 102, 106, 108, 112, 114, 117]),
        ),
        NodeSpec("small-1", "small", 2, 4, PowerCurve.fan(40, 90, 1.4)),
    ]


def small_trace() -> list[PodSpec]:
    return generate_trace(TraceConfig(hours=2, arrivals_per_hour=20, duration_max_s=3600), seed=3)


def test_env_passes_gymnasium_checker():
    env = ClusterSchedulingEnv(small_cluster(), small_trace(), PowerOffModel(300, 60))
    check_env(env, skip_render_check=True)


def test_observation_shape_and_mask():
    env = ClusterSchedulingEnv(small_cluster(), [PodSpec(0, 0, 100, 4, 1, 2)])
    obs, _ = env.reset(seed=0)
    assert obs["features"].shape == (3, FEATURE_SCHEMA.width)
    # 4 cores fit only on the 8-core node.
    assert obs["action_mask"].tolist() == [1, 0, 0]


def test_rewards_sum_to_the_run_energy_and_invalid_actions_fall_back():
    config = EnvConfig(reward_joules_scale=1.0, slowdown_weight=0.0, invalid_action_penalty=5.0)
    pods = small_trace()
    env = ClusterSchedulingEnv(small_cluster(), pods, PowerOffModel(300, 60), config)
    obs, _ = env.reset(seed=1)
    total_reward = 0.0
    invalid = 0
    terminated = False
    rng = np.random.default_rng(0)
    steps = 0
    while not terminated:
        action = int(rng.integers(0, 3))
        if not obs["action_mask"][action]:
            invalid += 1
        obs, reward, terminated, truncated, info = env.step(action)
        assert not truncated
        total_reward += reward
        steps += 1
    assert steps == len(pods)
    assert info["pods_done"] == len(pods)
    assert total_reward == pytest.approx(-info["energy_joules_total"] - 5.0 * invalid, rel=1e-9)
    with pytest.raises(RuntimeError):
        env.step(0)


def test_reward_charges_energy_and_slowdown_by_hand():
    # One 2-core node (100 W idle, 200 W full). Two pods arrive at t = 0, each wanting 2 cores for
    # 100 s: together they run at half speed and both finish at 200 s, a slowdown of 1 each.
    # Step 1 places the first pod; the next decision is at once (no energy, nothing finished).
    # Step 2 runs to the end: 200 W × 200 s = 40,000 J and Σ slowdown = 2.
    config = EnvConfig(reward_joules_scale=1e4, slowdown_weight=1.5, invalid_action_penalty=0.0)
    node = NodeSpec("only", "g", 2, 4, PowerCurve.linear(100, 200))
    pods = [PodSpec(i, 0.0, 100.0, 0.5, 0.5, 2.0) for i in range(2)]
    env = ClusterSchedulingEnv([node], pods, None, config)
    env.reset(seed=0)
    _, first, terminated, _, info = env.step(0)
    assert (first, terminated, info["slowdown"]) == (0.0, False, 0.0)
    _, second, terminated, _, info = env.step(0)
    assert terminated
    assert info["energy_joules"] == pytest.approx(40_000.0)
    assert info["slowdown"] == pytest.approx(2.0)
    assert second == pytest.approx(-40_000.0 / 1e4 - 1.5 * 2.0)


def test_observation_is_the_feature_schema_of_the_simulated_cluster():
    # The first pod (2 cores) goes to the 8-core linear node (60 W idle, 200 W full); when the
    # second (1 core) arrives, that node's row shows it running and drawing power.
    pods = [PodSpec(0, 0.0, 100.0, 2.0, 1.0, 2.0), PodSpec(1, 10.0, 100.0, 1.0, 1.0, 1.0)]
    env = ClusterSchedulingEnv(small_cluster(), pods)
    names = [*FEATURE_SCHEMA.node_features, *FEATURE_SCHEMA.pod_features]
    obs, _ = env.reset(seed=0)
    first = dict(zip(names, obs["features"][0].tolist(), strict=True))
    assert (first["pod_count"], first["utilization"], first["cpu_request_cores"]) == (0, 0, 2)
    obs, *_ = env.step(0)
    big = dict(zip(names, obs["features"][0].tolist(), strict=True))
    assert big["pod_count"] == 1 and big["empty"] == 0
    assert big["utilization"] == pytest.approx(0.25)
    assert big["watts"] == pytest.approx(60 + 140 * 0.25)
    assert (big["idle_watts"], big["max_watts"], big["cpu_cores"]) == (60, 200, 8)
    assert big["cpu_request_cores"] == 1.0
    small = dict(zip(names, obs["features"][1].tolist(), strict=True))
    assert small["pod_count"] == 0 and small["utilization"] == 0
