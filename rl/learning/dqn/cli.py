"""`kubejoule-rl train --algo dqn`: run `rl.learning.dqn.train`, fix the score map, write the checkpoint,
its numpy export and the learning curve."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rl.evaluation.progress import ProgressBar
from rl.learning.dqn.episodes import build_episode, draw_episode
from rl.learning.dqn.network import RowMLP, save_checkpoint
from rl.learning.dqn.train import DQNConfig, TrainLog, train
from rl.simulation.traces.tracegen import FAMILIES
from scheduler.learning.features_v3 import FEATURE_SCHEMA_V3

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from rl.learning.dqn.credit_train import CreditConfig, CreditLog

SCORE_MAP_ROWS = 2000


def score_map(net: RowMLP, rows: np.ndarray) -> dict[str, float]:
    """Center and spread of the network's outputs on sample rows: 50 at the median, the middle
    80 % of outputs over about 27–73."""
    with torch.no_grad():
        q = net(torch.as_tensor(rows)).numpy()
    low, mid, high = np.quantile(q, [0.1, 0.5, 0.9])
    return {"center": float(mid), "spread": float(max((high - low) / 4.0, 1e-9)), "sign": 1.0}


def sample_rows(config: DQNConfig, count: int) -> np.ndarray:
    """Rows of a few heuristic-free random decisions on fresh training draws (seeded)."""
    import random

    from rl.learning.dqn.episodes import Episode, training_cluster

    rng = random.Random(config.seed + 7919)
    out: list[np.ndarray] = []
    total = 0
    while total < count:
        nodes, pods = build_episode(draw_episode(rng, config.episode_hours, config.sizes))
        cluster = training_cluster(config.autoscaler, config.unneeded_seconds, config.boot_seconds)
        episode = Episode(nodes, pods, config.reward, cluster, rng.randrange(2**31))
        while not episode.done and total < count:
            rows = episode.rows()
            out.append(rows)
            total += len(rows)
            episode.step(rng.randrange(len(rows)))
    return np.concatenate(out)[:count]


def _finish_plot(
    fig: Figure, top: Axes, bottom: Axes, ylabel: str, title: str, losses: Sequence[float], loss_label: str,
    path: str,
) -> None:
    """A training plot's shared frame: the top panel's axes, legend and title against self-play
    decisions, the loss per update below (log scale), written to `path`."""
    top.set_xlabel("self-play decisions")
    top.set_ylabel(ylabel)
    top.legend(fontsize=8)
    top.set_title(title)
    bottom.plot(losses, lw=0.5)
    bottom.set_yscale("log")
    bottom.set_xlabel("update")
    bottom.set_ylabel(loss_label)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    import matplotlib.pyplot as plt  # loaded by the caller, with its Agg backend

    plt.close(fig)


def plot_curve(log: TrainLog, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6))
    steps, rates, demo = [], [], []
    done = 0
    for e in log.episodes:
        if e["demo"]:
            demo.append(e["reward"] / max(1, e["decisions"]))
            continue
        done += e["decisions"]
        steps.append(done)
        rates.append(e["reward"] / max(1, e["decisions"]))
    top.plot(steps, rates, ".", alpha=0.4, label="self-play episode")
    if len(rates) >= 5:
        window = np.ones(5) / 5
        top.plot(steps[4:], np.convolve(rates, window, mode="valid"), label="mean of 5")
    if demo:
        top.axhline(float(np.mean(demo)), color="k", ls="--", label="heuristic demonstrations")
    _finish_plot(
        fig, top, bottom, "reward per decision",
        "DQN training (each episode: a new random cluster and trace)", log.losses, "loss (TD + margin)", path,
    )


def train_dqn(args: argparse.Namespace, curve: str, code_version: str) -> int:
    config = DQNConfig(
        seed=args.seed,
        minutes=args.minutes,
        steps=args.steps,
        demo_episodes=args.demo_episodes,
        sizes=(4, args.max_nodes),
    )
    bar = None
    if not args.no_progress:
        total = config.steps if config.steps is not None else int(60 * config.minutes)
        bar = ProgressBar(total, "train dqn")
        shown = [0]

        def progress(log: TrainLog) -> None:
            position = log.steps if config.steps is not None else int(log.seconds)
            position = min(position, total)
            bar.advance(position - shown[0], f"{log.steps} decisions, {log.updates} updates")
            shown[0] = position

    net, log = train(config, on_progress=progress if bar is not None else None)
    if bar is not None:
        bar.close()
    meta = {
        "kind": "dqn",
        "feature_schema": FEATURE_SCHEMA_V3.to_dict(),
        "score_map": score_map(net, sample_rows(config, SCORE_MAP_ROWS)),
        "training": {
            "families": list(FAMILIES),
            "sizes": list(config.sizes),
            "seed": config.seed,
            "steps": log.steps,
            "updates": log.updates,
            "seconds": round(log.seconds, 1),
            "episodes": log.episodes,
        },
        "code_version": code_version,
        "torch_version": torch.__version__,
        "command": "kubejoule-rl " + " ".join(sys.argv[1:]) if sys.argv[1:] else None,
    }
    settings = {k: v for k, v in asdict(config).items() if k != "reward"}
    settings.update({"width": FEATURE_SCHEMA_V3.width, "reward": asdict(config.reward)})
    npz = save_checkpoint(args.out, net, settings, meta)
    plot_curve(log, curve)
    print(
        f"wrote {args.out}, {npz}, {curve}: {log.steps} self-play decisions, {log.updates} "
        f"updates, {len(log.episodes)} episodes in {log.seconds:.0f} s",
        file=sys.stderr,
    )
    print(
        f"the same weights again: --seed {config.seed} --steps {log.steps}",
        file=sys.stderr,
    )
    return 0


def plot_credit_curve(log: CreditLog, path: str) -> None:
    """Per round: the mean credit of the network's own choices on its labelled decisions (0 =
    as good as the better gate baseline there) against self-play decisions; and the loss."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6))
    steps = [r["steps"] for r in log.rounds]
    credit = [r["chosen_credit"] for r in log.rounds]
    top.plot(steps, credit, ".-", label="mean credit of the chosen node (training rollouts)")
    top.axhline(0.0, color="k", ls="--", label="the better of kubejoule and mostallocated")
    _finish_plot(
        fig, top, bottom, "credit (cost units: 0.1 kWh)",
        "DQN with forked credit (each rollout: a new random cluster and trace)", log.losses,
        "loss (credit regression + margin)", path,
    )


def train_dqn_credit(args: argparse.Namespace, curve: str, code_version: str) -> int:
    """`kubejoule-rl train --algo dqn --reward credit`: rl/learning/dqn/credit_train.py."""
    from rl.learning.dqn.credit_train import CreditConfig, train_credit

    sizes = (4, args.max_nodes)
    config = CreditConfig(
        seed=args.seed,
        steps=args.steps if args.steps is not None else 0,
        minutes=None if args.steps is not None else args.minutes,
        sizes=sizes,
    )
    bar = None
    if not args.no_progress:
        total = config.steps if args.steps is not None else int(60 * args.minutes)
        bar = ProgressBar(total, "train dqn (credit)")
        shown = [0]

        def progress(log: CreditLog, _net: Any = None) -> None:
            position = min(log.steps if args.steps is not None else int(log.seconds), total)
            bar.advance(position - shown[0], f"{log.steps} decisions, {log.labelled} labelled")
            shown[0] = position

    net, log = train_credit(config, args.jobs, progress if bar is not None else None)
    if bar is not None:
        bar.close()
    npz = write_credit_checkpoint(args.out, curve, net, log, config, code_version)
    print(
        f"wrote {args.out}, {npz}, {curve}: {log.steps} self-play decisions, {log.labelled} "
        f"labelled by forks, {log.updates} updates, {len(log.episodes)} rollouts in "
        f"{log.seconds:.0f} s",
        file=sys.stderr,
    )
    print(f"the same weights again: --seed {config.seed} --steps {log.steps}", file=sys.stderr)
    return 0


def write_credit_checkpoint(
    out: str, curve: str, net: RowMLP, log: CreditLog, config: CreditConfig, code_version: str
) -> Path:
    """The credit DQN's checkpoint, numpy export (its score map from sample rows of training
    draws) and learning curve."""
    rows_config = DQNConfig(seed=config.seed, sizes=config.sizes)
    meta = {
        "kind": "dqn",
        "feature_schema": FEATURE_SCHEMA_V3.to_dict(),
        "score_map": score_map(net, sample_rows(rows_config, SCORE_MAP_ROWS)),
        "training": {
            "reward": "credit",
            "families": list(FAMILIES),
            "sizes": list(config.sizes),
            "seed": config.seed,
            "steps": log.steps,
            "labelled": log.labelled,
            "updates": log.updates,
            "seconds": round(log.seconds, 1),
            "rounds": log.rounds,
            "episodes": log.episodes,
        },
        "code_version": code_version,
        "torch_version": torch.__version__,
        "command": "kubejoule-rl " + " ".join(sys.argv[1:]) if sys.argv[1:] else None,
    }
    settings = {k: v for k, v in asdict(config).items() if k != "cost"}
    settings.update({
        "width": FEATURE_SCHEMA_V3.width,
        "hidden": config.hidden,
        "layers": config.layers,
        "cost": asdict(config.cost),
    })
    npz = save_checkpoint(out, net, settings, meta)
    plot_credit_curve(log, curve)
    return npz
