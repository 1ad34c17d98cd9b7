"""DQN training, top to bottom (CleanRL's shape): demonstrations, pretraining, self-play.

1. **Demonstrations**: `demo_episodes` episodes placed by the `heuristic` policy; their n-step
   transitions go to a demonstration buffer that is never evicted. The input standardization is
   fixed from their rows.
2. **Pretraining** (`pretrain_updates`) on the demonstrations only: double-DQN TD loss plus
   DQfD's large-margin loss `max_a [Q(a) + margin·1(a ≠ a_E)] − Q(a_E)`, so training starts at
   the heuristic's choices and has to improve on them.
3. **Self-play**: ε-greedy over the feasible nodes (masked argmax of the shared per-row
   network), n-step returns into the replay buffer, one update every `train_every` decisions
   from a batch mixing replay and demonstrations (`demo_fraction`), the margin loss on the
   demonstration part; the target network is copied every `target_every` updates.

Every episode is a fresh random cluster (4–64 nodes of the bundled SPECpower kinds), trace
family and load (`rl/learning/dqn/episodes.py`), under the gate's cluster rules (cluster-autoscaler with
the `kubejoule` expander, DaemonSets, lagging telemetry). Deterministic for a seed and a step budget (`steps`):
the RNGs are seeded and torch runs on a fixed number of threads. Without `steps`, the wall-clock
cap (`minutes`) ends the run (checked every 100 decisions); such a run is reproduced exactly by
giving its recorded `steps`.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch.nn import functional

from rl.learning.dqn.episodes import (
    Episode,
    RewardConfig,
    build_episode,
    draw_episode,
    training_cluster,
)
from rl.learning.dqn.network import RowMLP, masked_argmax
from rl.learning.dqn.replay import NStepWriter, Replay, collate
from rl.policies.catalog import make_policy
from rl.simulation.cluster import ClusterModel
from rl.simulation.traces.pool import TRAINING_SIZES
from rl.simulation.traces.scenario import NodeSpec, PodSpec
from scheduler.domain.cluster_defaults import BOOT_SECONDS, SCALE_DOWN_UNNEEDED_S
from scheduler.learning.features_v3 import FEATURE_SCHEMA_V3

EpisodeSource = Callable[[random.Random], tuple[list[NodeSpec], list[PodSpec], dict[str, Any]]]


@dataclass(frozen=True)
class DQNConfig:
    seed: int = 1
    minutes: float = 5.0  # wall-clock budget when `steps` is None
    steps: int | None = None  # self-play decisions (exact; `minutes` is then ignored)
    episode_hours: float = 1.0  # arrival window of each training trace
    autoscaler: bool = True  # cluster-autoscaler rules (False: the visible-power-off ablation)
    unneeded_seconds: float = SCALE_DOWN_UNNEEDED_S  # a node empty this long powers off …
    boot_seconds: float = BOOT_SECONDS  # … and a node takes this long to boot
    sizes: tuple[int, int] = TRAINING_SIZES  # cluster sizes drawn (inclusive)
    demo_episodes: int = 6  # heuristic episodes for the demonstration buffer
    pretrain_updates: int = 400
    hidden: int = 64  # width of the shared per-row network's hidden layers
    layers: int = 2
    lr: float = 5e-4
    gamma: float = 0.9  # per decision; decisions are seconds apart
    n_step: int = 3
    batch_size: int = 32
    buffer_size: int = 20_000
    train_every: int = 4  # decisions per update in self-play
    target_every: int = 200  # updates per target-network copy
    eps_start: float = 0.2
    eps_end: float = 0.02
    eps_decay_steps: int = 10_000
    demo_fraction: float = 0.25  # share of each self-play batch drawn from the demonstrations
    demo_margin: float = 0.05  # DQfD margin, in reward units
    demo_weight: float = 1.0
    threads: int = 1  # the per-row network is tiny: a second thread only adds synchronization
    reward: RewardConfig = field(default_factory=RewardConfig)


@dataclass
class TrainLog:
    episodes: list[dict[str, Any]] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    steps: int = 0
    updates: int = 0
    seconds: float = 0.0


def random_episodes(config: DQNConfig) -> EpisodeSource:
    def source(rng: random.Random) -> tuple[list[NodeSpec], list[PodSpec], dict[str, Any]]:
        draw = draw_episode(rng, config.episode_hours, config.sizes)
        nodes, pods = build_episode(draw)
        return nodes, pods, asdict(draw)

    return source


def _cluster(config: DQNConfig) -> ClusterModel:
    return training_cluster(config.autoscaler, config.unneeded_seconds, config.boot_seconds)


class Learner:
    """The online and target networks, the optimizer and the loss."""

    def __init__(self, config: DQNConfig, width: int) -> None:
        self.config = config
        self.width = width
        self.net = RowMLP(width, config.hidden, config.layers)
        self.target = copy.deepcopy(self.net)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=config.lr)
        self.updates = 0

    def set_standardization(self, rows: np.ndarray) -> None:
        self.net.set_standardization(rows)
        self.target.load_state_dict(self.net.state_dict())

    def act(self, rows: np.ndarray) -> int:
        with torch.no_grad():
            return int(self.net(torch.as_tensor(rows)).argmax())

    def update(self, transitions: list[Any]) -> float:
        b = collate(transitions, self.width)
        rows, mask = torch.as_tensor(b.rows), torch.as_tensor(b.mask)
        action = torch.as_tensor(b.action)
        q = self.net(rows)
        q_taken = q.gather(1, action[:, None]).squeeze(1)
        with torch.no_grad():  # double DQN: the online net picks, the target net values
            next_rows, next_mask = torch.as_tensor(b.next_rows), torch.as_tensor(b.next_mask)
            best = masked_argmax(self.net(next_rows), next_mask)
            next_value = self.target(next_rows).gather(1, best[:, None]).squeeze(1)
            target = torch.as_tensor(b.ret) + torch.as_tensor(b.discount) * next_value
        loss = functional.smooth_l1_loss(q_taken, target)
        demo = torch.as_tensor(b.demo, dtype=torch.float64)
        if bool(demo.any()):
            margins = self.config.demo_margin * (
                1.0 - functional.one_hot(action, q.shape[1]).to(q.dtype)
            )
            best_with_margin = torch.where(mask, q + margins, -torch.inf).max(dim=1).values
            margin_loss = ((best_with_margin - q_taken) * demo).sum() / demo.sum()
            loss = loss + self.config.demo_weight * margin_loss
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.updates += 1
        if self.updates % self.config.target_every == 0:
            self.target.load_state_dict(self.net.state_dict())
        return float(loss.detach())


def _demonstrations(
    config: DQNConfig, source: EpisodeSource, rng: random.Random, log: TrainLog
) -> Replay:
    demos = Replay(capacity=10**7)
    for _ in range(config.demo_episodes):
        nodes, pods, draw = source(rng)
        episode = Episode(nodes, pods, config.reward, _cluster(config), rng.randrange(2**31))
        heuristic = make_policy("heuristic", nodes, _cluster(config).policy_power_off())
        heuristic.reset(nodes, random.Random(rng.randrange(2**31)))
        writer = NStepWriter(config.n_step, config.gamma, demo=True)
        total, count = 0.0, 0
        while not episode.done:
            rows = episode.rows()
            for t in writer.next_state(rows):
                demos.add(t)
            decision = episode.decision
            assert decision is not None
            chosen = heuristic.choose(
                decision.info, decision.feasible, decision.now, decision.candidates
            )
            action = episode.names().index(chosen)
            reward = episode.step(action)
            writer.add(rows, action, reward)
            total, count = total + reward, count + 1
        for t in writer.finish():
            demos.add(t)
        log.episodes.append({**draw, "demo": True, "decisions": count, "reward": total})
    return demos


def _random_rows(config: DQNConfig, source: EpisodeSource, rng: random.Random) -> np.ndarray:
    nodes, pods, _ = source(rng)
    episode = Episode(nodes, pods, config.reward, _cluster(config), rng.randrange(2**31))
    rows = []
    while not episode.done:
        rows.append(episode.rows())
        episode.step(rng.randrange(len(rows[-1])))
    return np.concatenate(rows)


def train(
    config: DQNConfig,
    source: EpisodeSource | None = None,
    on_progress: Callable[[TrainLog], None] | None = None,
) -> tuple[RowMLP, TrainLog]:
    """Train a DQN (see the module docstring); returns the online network and the log."""
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    rng = random.Random(config.seed)
    sampler = np.random.default_rng(config.seed)
    source = source or random_episodes(config)
    log = TrainLog()
    started = time.monotonic()
    width = FEATURE_SCHEMA_V3.width

    # 1. demonstrations, and the input standardization from their rows
    demos = _demonstrations(config, source, rng, log)
    learner = Learner(config, width)
    if len(demos):
        learner.set_standardization(np.concatenate([t.rows for t in demos.items]))
    else:  # no demonstrations: standardize on one episode of random placements
        learner.set_standardization(_random_rows(config, source, rng))

    # 2. pretraining on the demonstrations
    for _ in range(config.pretrain_updates if len(demos) else 0):
        log.losses.append(learner.update(demos.sample(sampler, config.batch_size)))

    # 3. self-play
    replay = Replay(config.buffer_size)
    demo_count = round(config.batch_size * config.demo_fraction) if len(demos) else 0
    deadline = started + 60.0 * config.minutes
    while log.steps < config.steps if config.steps is not None else time.monotonic() < deadline:
        nodes, pods, draw = source(rng)
        episode = Episode(nodes, pods, config.reward, _cluster(config), rng.randrange(2**31))
        writer = NStepWriter(config.n_step, config.gamma, demo=False)
        total, count = 0.0, 0
        while not episode.done and (config.steps is None or log.steps < config.steps):
            if config.steps is None and log.steps % 100 == 0:
                if time.monotonic() >= deadline:
                    break  # the clock stops a run mid-episode; its last steps get no bootstrap
                log.seconds, log.updates = time.monotonic() - started, learner.updates
                if on_progress is not None:
                    on_progress(log)
            rows = episode.rows()
            for t in writer.next_state(rows):
                replay.add(t)
            fraction = min(1.0, log.steps / max(1, config.eps_decay_steps))
            epsilon = config.eps_start + fraction * (config.eps_end - config.eps_start)
            if sampler.random() < epsilon:
                action = int(sampler.integers(len(rows)))
            else:
                action = learner.act(rows)
            reward = episode.step(action)
            writer.add(rows, action, reward)
            total, count = total + reward, count + 1
            log.steps += 1
            if log.steps % config.train_every == 0 and len(replay) >= config.batch_size:
                batch = replay.sample(sampler, config.batch_size - demo_count)
                batch += demos.sample(sampler, demo_count)
                log.losses.append(learner.update(batch))
        for t in writer.finish():
            replay.add(t)
        log.episodes.append({**draw, "demo": False, "decisions": count, "reward": total})
        log.updates = learner.updates
        log.seconds = time.monotonic() - started
        if on_progress is not None:
            on_progress(log)
    log.updates = learner.updates
    log.seconds = time.monotonic() - started
    return learner.net, log
