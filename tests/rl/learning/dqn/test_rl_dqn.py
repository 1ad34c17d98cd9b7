"""The DQN: the shared per-row network, masking, rewards, learning on a tiny scenario,
determinism, the held-out set never opened, and the `kubejoule-rl train` command."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from common.curves import PowerCurve
from rl.cmd.cli import main
from rl.learning.dqn.episodes import Episode, RewardConfig
from rl.learning.dqn.network import RowMLP, masked_argmax, save_checkpoint
from rl.learning.dqn.replay import NStepWriter
from rl.learning.dqn.train import DQNConfig, train
from rl.simulation.cluster import ClusterModel
from rl.simulation.engine.simulator import PowerOffModel
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from rl.simulation.traces.tracegen import TraceConfig, generate_family
from scheduler.framework import CandidateBatch
from scheduler.learning.features_v3 import FEATURE_SCHEMA_V3

WIDTH = FEATURE_SCHEMA_V3.width
GOOD = PowerCurve.from_mapping({"idle_watts": 40, "max_watts": 120})
BAD = PowerCurve.from_mapping({"idle_watts": 250, "max_watts": 400})
# One efficient node and three wasteful ones; nodes power off 30 s after they empty: a policy
# that learns to keep pods on the efficient node saves most of the energy.
TINY_NODES = [NodeSpec("good-0", "good", 16, 64, GOOD)] + [
    NodeSpec(f"bad-{i}", "bad", 16, 64, BAD) for i in range(3)
]
TINY_TRACE = TraceConfig(hours=0.5, arrivals_per_hour=40, duration_min_s=300, duration_max_s=1200)
TINY_POWER_OFF = PowerOffModel(30.0, 120.0)
TINY_CLUSTER = ClusterModel(power_off=TINY_POWER_OFF)


def tiny_source(rng):
    return TINY_NODES, generate_family("diurnal", TINY_TRACE, rng.randrange(1000)), {}


def tiny_config(seed, steps=500, **overrides):
    settings = dict(
        seed=seed,
        steps=steps,
        demo_episodes=0,
        batch_size=32,
        train_every=1,
        eps_decay_steps=steps,
        target_every=50,
        lr=1e-3,
        hidden=32,
        autoscaler=False,
        unneeded_seconds=30.0,
    )
    settings.update(overrides)
    return DQNConfig(**settings)


def energy_kwh(choose, seeds=(5000, 5001, 5002)):
    total = 0.0
    for seed in seeds:
        episode = Episode(
            TINY_NODES, generate_family("diurnal", TINY_TRACE, seed), RewardConfig(), TINY_CLUSTER
        )
        rng = random.Random(seed)
        while not episode.done:
            episode.step(choose(episode.rows(), rng))
        total += episode.sim.result().energy_joules
    return total / 3.6e6


def test_a_node_scores_the_same_whatever_the_other_candidates_and_their_order():
    torch.manual_seed(0)
    net = RowMLP(WIDTH, hidden=16)
    rows = torch.as_tensor(np.random.default_rng(1).normal(size=(7, WIDTH)))
    alone = net(rows[3:4])[0]
    shuffled = net(rows[[5, 3, 0, 6]])[1]
    padded = net(torch.stack([rows[[3, 1]], rows[[2, 4]]]))[0, 0]  # in a batch of decisions
    assert torch.allclose(alone, shuffled, rtol=0, atol=1e-12)
    assert torch.allclose(alone, padded, rtol=0, atol=1e-12)


def test_masked_argmax_never_picks_an_infeasible_node():
    q = torch.tensor([[5.0, 1.0, 9.0], [0.0, -1.0, -2.0]])
    mask = torch.tensor([[True, True, False], [False, True, True]])
    assert masked_argmax(q, mask).tolist() == [0, 1]


def test_a_pending_pod_costs_reward():
    # One 1-core node; pod 1 arrives at t = 10 and waits for pod 0 to finish at t = 100.
    node = NodeSpec("n", "g", 1, 4, GOOD)
    pods = [PodSpec(0, 0.0, 100.0, 1, 1, 1), PodSpec(1, 10.0, 50.0, 1, 1, 1)]
    paid = {}
    for weight in (0.0, 1.0):
        episode = Episode([node], pods, RewardConfig(pending_weight=weight), ClusterModel())
        paid[weight] = episode.step(0)
        assert episode.decision is not None and episode.decision.now == 100.0
    assert paid[0.0] - paid[1.0] == pytest.approx(90.0 / 3600.0)


def test_episodes_run_the_benchmarks_cluster_rules():
    """Episodes are built by the benchmark's simulation factory: a rule of the cluster model —
    here the telemetry-dropout fault, which episodes once dropped — reaches them."""
    from rl.simulation.engine.telemetry import TelemetryModel

    pods = [PodSpec(0, 0.0, 100.0, 1, 1, 1)]
    for dropout, known in ((0.0, True), (1.0, False)):
        cluster = ClusterModel(telemetry=TelemetryModel(), telemetry_dropout=dropout)
        episode = Episode(TINY_NODES, pods, RewardConfig(), cluster)
        assert episode.decision is not None
        assert all((s.telemetry is not None) == known for s in episode.decision.feasible)


def test_n_step_returns():
    writer = NStepWriter(n=2, gamma=0.5, demo=False)
    a, b, c = (np.full((1, WIDTH), float(i)) for i in range(3))
    writer.add(a, 0, 1.0)
    assert writer.next_state(b) == []
    writer.add(b, 0, 2.0)
    (first,) = writer.next_state(c)
    assert (first.ret, first.discount, first.next_rows is c) == (1.0 + 0.5 * 2.0, 0.25, True)
    writer.add(c, 0, 4.0)
    last_two = writer.finish()
    assert [(t.ret, t.next_rows) for t in last_two] == [(2.0 + 0.5 * 4.0, None), (4.0, None)]


def test_training_on_a_tiny_scenario_beats_random_placement():
    random_kwh = energy_kwh(lambda rows, rng: rng.randrange(len(rows)))
    for seed in (2,):
        net, log = train(tiny_config(seed), tiny_source)
        assert log.steps == 500 and log.updates > 400
        learned_kwh = energy_kwh(
            lambda rows, rng, net=net: int(net(torch.as_tensor(rows)).argmax())
        )
        assert learned_kwh < 0.85 * random_kwh, (seed, learned_kwh, random_kwh)


def test_training_is_deterministic_for_a_seed_and_never_opens_the_heldout_set():
    heldout = str(Path(__file__).resolve().parents[4] / "rl" / "heldout")
    opened: list[str] = []
    watching = [True]

    def hook(event, args):
        if watching[0] and event == "open" and args and isinstance(args[0], str | bytes | Path):
            opened.append(str(args[0] if not isinstance(args[0], bytes) else args[0].decode()))

    sys.addaudithook(hook)
    try:
        config = tiny_config(7, steps=120, demo_episodes=1, pretrain_updates=20)
        first, _ = train(config, tiny_source)
        # The default source draws random clusters from the bundled kinds (reads rl/scenarios).
        second, _ = train(config, tiny_source)
        drawn, _ = train(
            DQNConfig(
                seed=7,
                steps=20,
                demo_episodes=1,
                pretrain_updates=5,
                sizes=(4, 6),
                episode_hours=0.1,
            )
        )
    finally:
        watching[0] = False
    assert any("scenarios" in path for path in opened)  # the hook does see the reads
    assert not [p for p in opened if p.startswith(heldout) or "heldout" in p]
    for (name, a), (_, b) in zip(
        first.state_dict().items(), second.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    other, _ = train(tiny_config(8, steps=120, demo_episodes=1, pretrain_updates=20), tiny_source)
    assert not torch.equal(other.body[0].weight, first.body[0].weight)
    assert drawn is not None


def load_checkpoint(path):
    """The network a checkpoint holds, with its config and meta (what a test reads back)."""
    data = torch.load(path, weights_only=True)
    config, meta = data["config"], data["meta"]
    net = RowMLP(int(config["width"]), int(config["hidden"]), int(config["layers"]))
    net.load_state_dict(data["state_dict"])
    return net, config, meta


def test_checkpoint_round_trip(tmp_path):
    torch.manual_seed(0)
    net = RowMLP(WIDTH, hidden=8)
    net.set_standardization(np.random.default_rng(0).normal(3.0, 2.0, size=(50, WIDTH)))
    meta = {
        "kind": "dqn",
        "feature_schema": FEATURE_SCHEMA_V3.to_dict(),
        "score_map": {"center": 0.0, "spread": 1.0, "sign": 1.0},
    }
    npz = save_checkpoint(tmp_path / "m.pt", net, {"width": WIDTH, "hidden": 8, "layers": 2}, meta)
    assert npz == tmp_path / "m.npz"
    again, config, meta_again = load_checkpoint(tmp_path / "m.pt")
    rows = torch.as_tensor(np.random.default_rng(2).normal(size=(9, WIDTH)))
    assert torch.equal(net(rows), again(rows))
    assert meta_again == meta and config["hidden"] == 8


def test_numpy_export_scores_as_torch_does(tmp_path):
    from scheduler.learning.numpy_model import load_numpy_model

    torch.manual_seed(4)
    net = RowMLP(WIDTH, hidden=16, layers=3)
    net.set_standardization(np.random.default_rng(0).normal(3.0, 2.0, size=(50, WIDTH)))
    meta = {
        "kind": "dqn",
        "feature_schema": FEATURE_SCHEMA_V3.to_dict(),
        "score_map": {"center": 0.1, "spread": 0.5, "sign": 1.0},
    }
    npz = save_checkpoint(tmp_path / "m.pt", net, {"width": WIDTH, "hidden": 16, "layers": 3}, meta)
    model = load_numpy_model(npz)
    rows = np.random.default_rng(3).normal(2.0, 3.0, size=(40, WIDTH))
    with torch.no_grad():
        expected = net(torch.as_tensor(rows)).numpy()
    np.testing.assert_allclose(model.outputs(rows), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        model.scores(rows), 100.0 / (1.0 + np.exp(-(expected - 0.1) / 0.5)), rtol=1e-12
    )


def test_train_command_writes_checkpoint_export_curve_and_metadata(tmp_path):
    out = tmp_path / "dqn.pt"
    code = main(
        [
            "train",
            "--algo",
            "dqn",
            "--reward",
            "episode",
            "--steps",
            "40",
            "--seed",
            "3",
            "--demo-episodes",
            "1",
            "--max-nodes",
            "5",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    assert out.exists() and out.with_suffix(".png").stat().st_size > 1000
    from scheduler.learning.numpy_model import load_numpy_model

    model = load_numpy_model(out.with_suffix(".npz"))
    assert model.kind == "dqn"
    meta = model.meta
    assert meta["feature_schema"] == FEATURE_SCHEMA_V3.to_dict()
    assert meta["torch_version"] == torch.__version__ and meta["code_version"]
    training = meta["training"]
    assert training["seed"] == 3 and training["steps"] == 40
    assert set(training["families"]) == {"diurnal", "batch-services", "bursts"}
    assert all(4 <= e["size"] <= 5 for e in training["episodes"])
    json.dumps(meta)  # plain JSON


@pytest.mark.parametrize(
    "argv",
    [
        ["--algo", "dqn", "--out", "m.npz"],
        ["--algo", "dqn", "--out", "m.pt", "--steps", "0"],
        ["--algo", "dqn", "--out", "m.pt", "--max-nodes", "100"],
        ["--algo", "mlp", "--out", "m.pt"],
    ],
)
def test_train_command_refuses_bad_options(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", *argv]) == 2


def test_learned_policy_runs_in_the_benchmark_with_the_node_workloads(tmp_path):
    from rl.evaluation.benchmark import run_once
    from rl.policies.catalog import make_policy

    torch.manual_seed(0)
    net = RowMLP(WIDTH, hidden=8)
    meta = {
        "kind": "dqn",
        "feature_schema": FEATURE_SCHEMA_V3.to_dict(),
        "score_map": {"center": 0.0, "spread": 1.0, "sign": 1.0},
    }
    npz = save_checkpoint(tmp_path / "m.pt", net, {"width": WIDTH, "hidden": 8, "layers": 2}, meta)
    pods = generate_family("batch-services", TINY_TRACE, 3)
    result = run_once(TINY_NODES, pods, f"learned:{npz}", 0, TINY_POWER_OFF)
    assert result.never_scheduled == 0 and len(result.outcomes) == len(pods)
    policy = make_policy(f"learned:{tmp_path / 'm.pt'}", TINY_NODES, TINY_POWER_OFF)
    episode = Episode(TINY_NODES, pods, RewardConfig(), TINY_CLUSTER)
    policy.attach(episode.sim)
    d = episode.decision
    rows = policy.plugin.rows(d.info, CandidateBatch.of(d.feasible, d.now))
    known = FEATURE_SCHEMA_V3.node_features.index("workload_known")
    assert rows[:, known].tolist() == [1.0] * len(d.feasible)
    np.testing.assert_array_equal(rows, episode.rows())  # the policy sees what training saw
