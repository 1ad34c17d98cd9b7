"""The DQN with credit on the action (issue 24): one readable loop, rollouts in parallel.

Why: the episode reward (`rl/learning/dqn/train.py`) is the whole cluster's energy until the next
decision, of which the node the action touched is a small share; the network learned little
from it. Here each labelled decision's reward is the action's own consequence:

1. **Rollouts** (`credit_episode`, in `--jobs` processes, `episodes_per_round` at a time, each
   with the network as it stood when the round began): a fresh training draw (4–64 nodes, a
   trace family, 1 h) placed ε-greedily by the network (numpy forward pass, the scheduler's).
   `labels_per_episode` decisions (positions drawn uniformly from the task's seed, so a large
   cluster costs no more forks than a small one) are **labelled**: the
   candidates are the choices of both gate baselines (`kubejoule`, the shipped default, and
   `mostallocated`, bin packing), the network's own and `random_candidates` other feasible
   nodes; each is scored by forking the simulation (`rl.learning.dqn.credit.fork_cost`: the pod placed
   there, then `continuation` placing every pod for `horizon_s`, the same seed in every fork).
   A candidate's **credit** is the better baseline's cost minus its own: > 0 beats both
   baselines here, < 0 loses to the better one.
2. **Learning** (in this process, after each round): the labelled decisions join a replay
   buffer; `updates_per_state` × (new states) updates, each on a batch of states: smooth-L1
   regression of Q(s, a) on the credit of every labelled candidate, plus DQfD's large-margin
   loss toward the best labelled candidate (`max_a [Q(a) + margin·1(a ≠ a*)] − Q(a*)` over all
   feasible nodes: demonstrations of whichever of the best baseline or the network did better
   there). γ = 0: a fork's horizon already holds what the action did later; Q(s, a) is the
   expected credit, the baselines' best choice has credit 0.

Deterministic for a seed and a step budget whatever `--jobs` is: a round's tasks (seeds, ε and
the weights) are fixed before it runs and its results are used in task order.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rl.evaluation.workers import WorkerPool
from rl.learning.dqn.credit import RewardConfig as CreditCost
from rl.learning.dqn.credit import fork_cost
from rl.learning.dqn.episodes import (
    Episode,
    RewardConfig,
    build_episode,
    draw_episode,
    training_cluster,
)
from rl.simulation.traces.pool import TRAINING_SIZES
from scheduler.domain.cluster_defaults import SCALE_DOWN_UNNEEDED_S, SCAN_INTERVAL_S
from scheduler.learning.numpy_model import mlp_forward

BASELINES = ("kubejoule", "mostallocated")  # the gate's two baselines


@dataclass(frozen=True)
class CreditConfig:
    seed: int = 1
    steps: int = 20_000  # self-play decisions (placements) over all rollouts
    minutes: float | None = None  # or a wall-clock budget, checked between rounds
    episode_hours: float = 1.0
    sizes: tuple[int, int] = TRAINING_SIZES
    episodes_per_round: int = 4
    labels_per_episode: int = 12  # labelled decisions per rollout
    random_candidates: int = 1
    horizon_s: float = SCALE_DOWN_UNNEEDED_S + 12 * SCAN_INTERVAL_S  # past the autoscaler's unneeded time and its scans
    continuation: str = "mostallocated"  # places every later pod inside a fork
    hidden: int = 64
    layers: int = 2
    lr: float = 1e-3
    batch_size: int = 32
    updates_per_state: int = 2
    buffer_size: int = 50_000  # labelled decisions kept
    eps_start: float = 0.3
    eps_end: float = 0.05
    eps_decay_steps: int = 10_000
    demo_margin: float = 0.02
    demo_weight: float = 1.0
    cost: CreditCost = field(default_factory=CreditCost)


@dataclass(frozen=True)
class Labelled:
    rows: np.ndarray  # feasible × width
    actions: tuple[int, ...]  # labelled candidates
    credits: tuple[float, ...]  # their credit (> 0: better than the better baseline)


@dataclass(frozen=True)
class RolloutTask:
    config: CreditConfig
    seed: int
    epsilon: float
    weights: tuple[tuple[np.ndarray, np.ndarray], ...] | None  # None: act as `kubejoule`
    mean: np.ndarray
    scale: np.ndarray


@dataclass
class RolloutResult:
    draw: dict[str, Any]
    decisions: int
    energy_kwh: float
    labelled: list[Labelled]
    chosen_credit: float  # the network's choice's mean credit on its labelled decisions


def _q(task: RolloutTask, rows: np.ndarray) -> np.ndarray:
    assert task.weights is not None
    return mlp_forward(task.weights, (rows - task.mean) / task.scale)


def credit_episode(_context: object, task: RolloutTask) -> RolloutResult:
    """One rollout (module docstring, step 1); a module-level function for the process pool."""
    from rl.policies.catalog import make_policy

    config = task.config
    rng = random.Random(task.seed)
    draw = draw_episode(rng, config.episode_hours, config.sizes)
    nodes, pods = build_episode(draw)
    cluster = training_cluster()
    power_off = cluster.policy_power_off()
    episode = Episode(nodes, pods, RewardConfig(), cluster, rng.randrange(2**31))
    baselines = [make_policy(name, nodes, power_off) for name in BASELINES]
    for policy in baselines:
        policy.reset(nodes, random.Random(rng.randrange(2**31)))
    fork_seed = rng.randrange(2**31)
    positions = set(rng.sample(range(len(pods)), min(config.labels_per_episode, len(pods))))
    labelled: list[Labelled] = []
    chosen_credits: list[float] = []
    decisions = 0
    last = max(positions, default=-1)
    while not episode.done and decisions <= last:  # nothing is learned past the last label
        d = episode.decision
        assert d is not None
        names = episode.names()
        label = len(names) > 1 and decisions in positions
        explore = rng.random() < task.epsilon
        rows = episode.rows() if label or not (explore or task.weights is None) else None
        picks = (
            [names.index(p.choose(d.info, d.feasible, d.now, d.candidates)) for p in baselines]
            if label or (task.weights is None and not explore)
            else []
        )
        if explore:
            action = rng.randrange(len(names))
        elif task.weights is None:
            action = picks[0]  # the first round acts as the shipped default
        else:
            assert rows is not None
            action = int(np.argmax(_q(task, rows)))
        if label:
            assert rows is not None
            others = [i for i in range(len(names)) if i not in (*picks, action)]
            extra = rng.sample(others, min(config.random_candidates, len(others)))
            actions = tuple(dict.fromkeys([*picks, action, *extra]))
            costs = [
                fork_cost(
                    episode.sim,
                    names[i],
                    make_policy(config.continuation, nodes, power_off),
                    config.horizon_s,
                    config.cost,
                    fork_seed,
                )
                for i in actions
            ]
            best_baseline = min(costs[actions.index(i)] for i in picks)
            credits = tuple(best_baseline - c for c in costs)
            labelled.append(Labelled(rows, actions, credits))
            chosen_credits.append(credits[actions.index(action)])
        episode.step(action)
        decisions += 1
    return RolloutResult(
        asdict(draw),
        decisions,
        episode.sim.energy_joules / 3.6e6,
        labelled,
        float(np.mean(chosen_credits)) if chosen_credits else 0.0,
    )


@dataclass
class CreditLog:
    rounds: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    steps: int = 0
    updates: int = 0
    labelled: int = 0
    seconds: float = 0.0


def _loss(net: Any, batch: list[Labelled], config: CreditConfig) -> Any:
    """Credit regression on every labelled candidate + the margin toward the best one."""
    import torch
    from torch.nn import functional

    width = batch[0].rows.shape[1]
    most = max(len(s.rows) for s in batch)
    rows = np.zeros((len(batch), most, width))
    mask = np.zeros((len(batch), most), dtype=bool)
    for k, s in enumerate(batch):
        rows[k, : len(s.rows)] = s.rows
        mask[k, : len(s.rows)] = True
    q = net(torch.as_tensor(rows))
    index = [(k, a) for k, s in enumerate(batch) for a in s.actions]
    credit = torch.as_tensor([c for s in batch for c in s.credits])
    taken = q[[k for k, _ in index], [a for _, a in index]]
    loss = functional.smooth_l1_loss(taken, credit)
    best = torch.as_tensor([s.actions[int(np.argmax(s.credits))] for s in batch])
    margins = config.demo_margin * (1.0 - functional.one_hot(best, most).to(q.dtype))
    with_margin = torch.where(torch.as_tensor(mask), q + margins, -torch.inf).max(dim=1).values
    q_best = q.gather(1, best[:, None]).squeeze(1)
    return loss + config.demo_weight * (with_margin - q_best).mean()


def train_credit(
    config: CreditConfig,
    jobs: int = 1,
    on_progress: Callable[[CreditLog, Any], None] | None = None,
) -> tuple[Any, CreditLog]:
    """Train (module docstring); returns the torch RowMLP and the log. `on_progress(log, net)`
    after every round."""
    import torch

    from rl.learning.dqn.network import RowMLP

    torch.manual_seed(config.seed)
    torch.set_num_threads(1)
    rng = random.Random(config.seed)
    sampler = np.random.default_rng(config.seed)
    log = CreditLog()
    started = time.monotonic()
    net: Any = None
    optimizer: Any = None
    replay: list[Labelled] = []
    pool = WorkerPool(credit_episode, None, jobs) if jobs > 1 else None

    def over() -> bool:
        if config.minutes is not None:
            return time.monotonic() - started >= 60.0 * config.minutes
        return log.steps >= config.steps

    try:
        while not over():
            fraction = min(1.0, log.steps / max(1, config.eps_decay_steps))
            epsilon = config.eps_start + fraction * (config.eps_end - config.eps_start)
            weights = mean = scale = None
            if net is not None:
                weights = tuple((w, b) for w, b in net.numpy_layers())
                mean, scale = net.mean.numpy().copy(), net.scale.numpy().copy()
            tasks = [
                # the first round acts as the shipped default (the network does not exist yet)
                RolloutTask(config, rng.randrange(2**31), epsilon, weights, mean, scale)  # type: ignore[arg-type]
                for _ in range(config.episodes_per_round)
            ]
            if pool is not None:
                results = pool.run(tasks)
            else:
                results = [credit_episode(None, t) for t in tasks]
            new = [s for r in results for s in r.labelled]
            if net is None:  # the standardization, fixed from the first round's rows
                net = RowMLP(new[0].rows.shape[1], config.hidden, config.layers)
                net.set_standardization(np.concatenate([s.rows for s in new]))
                optimizer = torch.optim.Adam(net.parameters(), lr=config.lr)
            replay = (replay + new)[-config.buffer_size :]
            for _ in range(config.updates_per_state * len(new)):
                picked = sampler.choice(len(replay), size=min(config.batch_size, len(replay)))
                loss = _loss(net, [replay[int(i)] for i in picked], config)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                log.losses.append(float(loss.detach()))
                log.updates += 1
            for r in results:
                log.steps += r.decisions
                log.episodes.append(
                    {**r.draw, "decisions": r.decisions, "energy_kwh": round(r.energy_kwh, 4),
                     "labelled": len(r.labelled), "chosen_credit": r.chosen_credit}
                )
            log.labelled += len(new)
            log.rounds.append({
                "steps": log.steps,
                "epsilon": round(epsilon, 4),
                "chosen_credit": float(np.mean([r.chosen_credit for r in results])),
                "labelled": len(new),
            })
            log.seconds = time.monotonic() - started
            if on_progress is not None:
                on_progress(log, net)
    finally:
        if pool is not None:
            pool.close()
    log.seconds = time.monotonic() - started
    return net, log
