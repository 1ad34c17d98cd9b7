"""The DQN with credit on the action (rl/learning/dqn/credit_train.py): labels from forked simulations,
the better gate baseline at credit 0, the same weights for every --jobs, and a checkpoint the
scheduler serves."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from rl.cmd.cli import main
from rl.learning.dqn.credit import fork_cost
from rl.learning.dqn.credit_train import (
    BASELINES,
    CreditConfig,
    RolloutTask,
    credit_episode,
    train_credit,
)
from rl.learning.dqn.episodes import (
    Episode,
    RewardConfig,
    build_episode,
    draw_episode,
    training_cluster,
)
from rl.policies.catalog import make_policy
from scheduler.learning.features_v3 import FEATURE_SCHEMA_V3
from scheduler.learning.numpy_model import load_numpy_model

TINY = CreditConfig(sizes=(4, 6), labels_per_episode=6, steps=200, episodes_per_round=2)


def test_labels_are_fork_cost_differences_against_the_better_baseline():
    task = RolloutTask(TINY, 5, 0.5, None, None, None)  # type: ignore[arg-type]
    result = credit_episode(None, task)
    assert result.labelled, "a rollout labels some decisions"
    for s in result.labelled:
        assert len(set(s.actions)) == len(s.actions) and max(s.credits) >= 0.0
        assert all(0 <= a < len(s.rows) for a in s.actions)
        assert s.rows.shape[1] == FEATURE_SCHEMA_V3.width
    # Replay the rollout's first labelled decision by hand: the same draws, the same forks.
    rng = random.Random(5)
    draw = draw_episode(rng, TINY.episode_hours, TINY.sizes)
    assert result.draw["seed"] == draw.seed
    nodes, pods = build_episode(draw)
    cluster = training_cluster()
    episode = Episode(nodes, pods, RewardConfig(), cluster, rng.randrange(2**31))
    power_off = cluster.policy_power_off()
    baselines = [make_policy(n, nodes, power_off) for n in BASELINES]
    for p in baselines:
        p.reset(nodes, random.Random(rng.randrange(2**31)))
    fork_seed = rng.randrange(2**31)
    positions = set(rng.sample(range(len(pods)), min(TINY.labels_per_episode, len(pods))))
    decisions = 0
    while True:
        d = episode.decision
        names = episode.names()
        label = len(names) > 1 and decisions in positions
        explore = rng.random() < 0.5
        if label or not explore:
            picks = [
                names.index(p.choose(d.info, d.feasible, d.now, d.candidates)) for p in baselines
            ]
        action = rng.randrange(len(names)) if explore else picks[0]
        if label:
            break
        episode.step(action)
        decisions += 1
    first = result.labelled[0]
    np.testing.assert_array_equal(first.rows, episode.rows())
    assert first.actions[: len(set(picks))] == tuple(dict.fromkeys(picks))
    costs = [
        fork_cost(episode.sim, names[a], make_policy(TINY.continuation, nodes, power_off),
                  TINY.horizon_s, TINY.cost, fork_seed)
        for a in first.actions
    ]
    better = min(costs[first.actions.index(p)] for p in picks)
    assert list(first.credits) == [better - c for c in costs]
    assert max(first.credits[first.actions.index(p)] for p in picks) == 0.0


@pytest.mark.slow
def test_the_same_weights_for_any_number_of_jobs():
    one, log_one = train_credit(TINY, jobs=1)
    two, log_two = train_credit(TINY, jobs=2)
    assert log_one.steps == log_two.steps >= TINY.steps and log_one.labelled > 0
    for (w1, b1), (w2, b2) in zip(one.numpy_layers(), two.numpy_layers(), strict=True):
        np.testing.assert_array_equal(w1, w2)
        np.testing.assert_array_equal(b1, b2)
    assert log_one.rounds == log_two.rounds


def test_the_credit_command_writes_a_servable_v3_checkpoint(tmp_path):
    out = tmp_path / "dqn.pt"
    argv = ["train", "--algo", "dqn", "--steps", "150", "--seed", "3", "--max-nodes", "5",
            "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    model = load_numpy_model(out.with_suffix(".npz"))
    assert model.kind == "dqn" and model.schema == FEATURE_SCHEMA_V3
    training = model.meta["training"]
    assert training["reward"] == "credit" and training["steps"] >= 150
    assert training["rounds"] and all(4 <= e["size"] <= 5 for e in training["episodes"])
    json.dumps(model.meta)
    assert out.with_suffix(".png").stat().st_size > 1000
    assert main([*argv[:-3], "--jobs", "0", "--out", str(out)]) == 2
