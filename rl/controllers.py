"""Controllers that run beside the scheduler, named as policy suffixes: `POLICY+CONTROLLER`
(`mostallocated+highnodeutilization`), any number of them, each registered with the simulation
(`Simulation.every`) when the run starts.

| suffix | controller |
|---|---|
| `+highnodeutilization` | descheduler's HighNodeUtilization with its DefaultEvictor at their defaults (rl/descheduler/) |
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rl.scenario import NodeSpec
    from rl.simulator import Policy, Simulation


def _descheduler() -> Any:
    from rl.descheduler.simulation import HighNodeUtilizationController

    return HighNodeUtilizationController()


CONTROLLERS: dict[str, Callable[[], Any]] = {
    "highnodeutilization": _descheduler,
}


def split_controllers(name: str) -> tuple[str, tuple[str, ...]]:
    """`POLICY+C1+C2` → (POLICY, (C1, C2)) for known controllers at the end of the name; other
    `+` (as in `default+extender:5`) belong to the policy."""
    suffixes: list[str] = []
    base = name
    while True:
        head, plus, tail = base.rpartition("+")
        if not plus or not head or tail not in CONTROLLERS:
            break
        suffixes.insert(0, tail)
        base = head
    return base, tuple(suffixes)


class ControlledPolicy:
    """A policy with controllers: places pods as its base policy does; `attach(sim)` starts
    the controllers (and the base policy's own attach)."""

    def __init__(self, base: Policy, controllers: Sequence[str], name: str) -> None:
        self.base = base
        self.controller_names = tuple(controllers)
        self.name = name
        self.controllers: list[Any] = []

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        self.base.reset(nodes, rng)

    def choose(self, *args: Any, **kwargs: Any) -> str:
        return self.base.choose(*args, **kwargs)

    def attach(self, sim: Simulation) -> None:
        attach = getattr(self.base, "attach", None)
        if attach is not None:
            attach(sim)
        self.controllers = [CONTROLLERS[name]() for name in self.controller_names]
        for controller in self.controllers:
            controller.attach(sim)
