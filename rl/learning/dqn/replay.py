"""n-step replay with demonstrations (DQfD's shape: Hester et al., AAAI 2018).

A transition is one decision: the rows of its feasible nodes, the chosen index, the n-step
discounted return `R = Σ_{k<n} γ^k r_{t+k}`, the rows of the decision n steps later (None at
the episode's end) and `γ^n` for bootstrapping. `NStepWriter` turns a stream of
(rows, action, reward) into such transitions; `Replay` is a ring buffer with uniform sampling
from a seeded numpy generator; demonstrations live in their own buffer and are never evicted.
Batches are padded to the largest candidate count with a mask.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Transition:
    rows: np.ndarray  # candidates × width
    action: int
    ret: float  # n-step discounted return
    next_rows: np.ndarray | None  # None: the episode ended within n steps
    discount: float  # γ^k for the bootstrap term (k = steps actually summed)
    demo: bool


class NStepWriter:
    """Turns (rows, action, reward) steps into n-step transitions as soon as they are known."""

    def __init__(self, n: int, gamma: float, demo: bool) -> None:
        if n < 1 or not 0.0 <= gamma <= 1.0:
            raise ValueError("need n >= 1 and 0 <= gamma <= 1")
        self.n, self.gamma, self.demo = n, gamma, demo
        self._window: deque[tuple[np.ndarray, int, float]] = deque()

    def _transition(self, next_rows: np.ndarray | None) -> Transition:
        rows, action, _ = self._window[0]
        ret = sum(self.gamma**k * r for k, (_, _, r) in enumerate(self._window))
        discount = self.gamma ** len(self._window)
        return Transition(rows, action, ret, next_rows, discount, self.demo)

    def add(self, rows: np.ndarray, action: int, reward: float) -> None:
        """Record a step (its transition is emitted by `next_state` or `finish`)."""
        self._window.append((rows, action, reward))

    def next_state(self, rows: np.ndarray) -> list[Transition]:
        """The next decision's rows are known: emit the oldest step once it has n rewards."""
        if len(self._window) < self.n:
            return []
        out = [self._transition(rows)]
        self._window.popleft()
        return out

    def finish(self) -> list[Transition]:
        """The episode ended: every remaining step gets its truncated return, no bootstrap."""
        out = []
        while self._window:
            out.append(self._transition(None))
            self._window.popleft()
        return out


class Replay:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: list[Transition] = []
        self._next = 0

    def __len__(self) -> int:
        return len(self.items)

    def add(self, transition: Transition) -> None:
        if len(self.items) < self.capacity:
            self.items.append(transition)
        else:
            self.items[self._next] = transition
            self._next = (self._next + 1) % self.capacity

    def sample(self, rng: np.random.Generator, count: int) -> list[Transition]:
        picks = rng.integers(0, len(self.items), size=count)
        return [self.items[i] for i in picks.tolist()]


@dataclass(frozen=True)
class Batch:
    rows: np.ndarray  # B × K × width
    mask: np.ndarray  # B × K (bool)
    action: np.ndarray  # B
    ret: np.ndarray  # B
    next_rows: np.ndarray  # B × K' × width (zeros where there is no next state)
    next_mask: np.ndarray  # B × K'
    discount: np.ndarray  # B (0 where there is no next state)
    demo: np.ndarray  # B (bool)


def _pad(arrays: list[np.ndarray | None], width: int) -> tuple[np.ndarray, np.ndarray]:
    count = max([len(a) for a in arrays if a is not None] + [1])
    out = np.zeros((len(arrays), count, width))
    mask = np.zeros((len(arrays), count), dtype=bool)
    for i, a in enumerate(arrays):
        if a is not None:
            out[i, : len(a)] = a
            mask[i, : len(a)] = True
    return out, mask


def collate(transitions: list[Transition], width: int) -> Batch:
    rows, mask = _pad([t.rows for t in transitions], width)
    next_rows, next_mask = _pad([t.next_rows for t in transitions], width)
    return Batch(
        rows=rows,
        mask=mask,
        action=np.array([t.action for t in transitions]),
        ret=np.array([t.ret for t in transitions]),
        next_rows=next_rows,
        next_mask=next_mask,
        discount=np.array([t.discount if t.next_rows is not None else 0.0 for t in transitions]),
        demo=np.array([t.demo for t in transitions]),
    )
