"""Controllers that run beside the scheduler, named as policy suffixes: `POLICY+CONTROLLER`
(`mostallocated+highnodeutilization`, `kubejoule+rebalancer`), any number of them, each
registered with the simulation (`Simulation.every`) when the run starts.

| suffix | controller |
|---|---|
| `+highnodeutilization` | descheduler's HighNodeUtilization with its DefaultEvictor at their defaults (rl/simulation/controllers/descheduler/) |
| `+rebalancer` | kubejoule's energy rebalancer, active, at its defaults (scheduler/rebalancer/, rl/simulation/controllers/rebalancer.py) |
| `+rebalancer:FILE` | the same with the `rebalancer:` settings of a scheduler configuration FILE |
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from rl.simulation.engine.simulator import AttachingPolicy

if TYPE_CHECKING:
    from rl.simulation.engine.simulator import Policy, Simulation
    from rl.simulation.traces.scenario import NodeSpec
    from scheduler.domain.model import NodeState, PodInfo


class Controller(Protocol):
    """A controller beside the scheduler: registers itself with the run (`Simulation.every`)."""

    def attach(self, sim: Simulation) -> None: ...


def _descheduler(argument: str | None) -> Controller:
    from rl.simulation.controllers.descheduler.simulation import HighNodeUtilizationController

    if argument is not None:
        raise ValueError("+highnodeutilization takes no argument")
    return HighNodeUtilizationController()


def _rebalancer(argument: str | None) -> Controller:
    from rl.simulation.controllers.rebalancer import RebalancerController, settings_file

    if argument is None:
        return RebalancerController()
    return RebalancerController(config=settings_file(argument))


CONTROLLERS: dict[str, Callable[[str | None], Controller]] = {
    "highnodeutilization": _descheduler,
    "rebalancer": _rebalancer,
}


def split_controllers(name: str) -> tuple[str, tuple[str, ...]]:
    """`POLICY+C1+C2` → (POLICY, (C1, C2)) for known controllers at the end of the name (a
    controller may carry an argument, `+rebalancer:FILE`); other `+` (as in
    `default+extender:5`) belong to the policy."""
    suffixes: list[str] = []
    base = name
    while True:
        head, plus, tail = base.rpartition("+")
        if not plus or not head or tail.partition(":")[0] not in CONTROLLERS:
            break
        suffixes.insert(0, tail)
        base = head
    return base, tuple(suffixes)


def make_controller(suffix: str) -> Controller:
    """The controller a suffix names; ValueError (naming the file) on a bad argument."""
    name, colon, argument = suffix.partition(":")
    return CONTROLLERS[name](argument if colon else None)


class ControlledPolicy:
    """A policy with controllers: places pods as its base policy does; `attach(sim)` starts
    the controllers (and the base policy's own attach)."""

    def __init__(self, base: Policy, controllers: Sequence[str], name: str) -> None:
        for suffix in controllers:  # a bad argument fails now, before any simulation
            make_controller(suffix)
        self.base = base
        self.controller_names = tuple(controllers)
        self.name = name
        self.controllers: list[Controller] = []

    def reset(self, nodes: Sequence[NodeSpec], rng: random.Random) -> None:
        self.base.reset(nodes, rng)

    def choose(
        self, pod: PodInfo, feasible: Sequence[NodeState], now: float, candidates: Sequence[NodeState] = ()
    ) -> str:
        return self.base.choose(pod, feasible, now, candidates)

    def attach(self, sim: Simulation) -> None:
        if isinstance(self.base, AttachingPolicy):
            self.base.attach(sim)
        self.controllers = [make_controller(name) for name in self.controller_names]
        for controller in self.controllers:
            controller.attach(sim)
