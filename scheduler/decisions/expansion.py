"""Which node group should grow: the energy-aware choice among cluster-autoscaler's options.

When pods are Pending, cluster-autoscaler works out, for each node group that can grow, an
*option*: `node_count` new nodes of the group, built from the group's template node, and the
pending pods that would run on them. Its *expander* picks one. This module is the choice that
both the simulator's `kubejoule` expander (`rl/`) and the gRPC expander server
(`kubejoule-scheduler autoscaler-expander`) make — one implementation.

What an option costs
--------------------
With `P` the group's power curve (common/curves.py), `C` the template's allocatable cores,
`n = node_count` and the pods' CPU requests `R` in cores (a pod that requests no CPU counts
kube-scheduler's 100 m, as the scorer counts it):

    u = R / (n × C)                                  the load the pods give each new node
    expected_watts = n × P(u)                        the power right after the scale-up

Ranking options by `expected_watts` alone is the scorer's greedy mistake one level up: a new
node is switched on for the pending pods, but the pods that follow are placed on it too (the
scheduler fills running nodes before the autoscaler opens new ones), so its opening cost — idle
power plus the steep start of many real curves — is shared by all the load it will carry. The
options are therefore ranked by the scorer's consolidation price (scheduler/plugins/energy/plugin.py, "the
amortized price"), per core of pod load:

    watts_per_core = a / C,   a = min over 0 < v ≤ v_up of P(v) / v

— the least average power per unit of load the group's node reaches up to the load `v_up` it can
be expected to carry: `v_up = max(u, min(u_ref, u / s))`, where `u_ref` is the scorer's
`consolidation_utilization` (default 0.5) and `s` the largest share of the new nodes' memory,
pod slots or ephemeral storage that the option's pods take. `u / s` is the CPU load a node
reaches when more pods of the same mix fill its binding resource: a node opened for
memory-heavy pods will not be filled to `u_ref` with CPU, and is not priced as if it would. The
option's pods are charged `R × watts_per_core` watts (`price_watts`).

Per core rather than in total, so options that would schedule different pods compare fairly (an
option that serves fewer pods is not cheaper for it); for options with the same pods the two
orders agree. Ties go to the lower `expected_watts`, then to more pods, then to the group id, so
the choice is deterministic. Options whose group's curve is unknown (or whose template has no
CPU) never win over one whose curve is known; when no option's curve is known, every option is
returned and cluster-autoscaler's next expander (or its random pick) decides — never an empty
answer to a non-empty request.

Where a group's curve comes from (`resolve_curve`), first found wins:
1. the scheduler config's `node_groups:` entry for the group id;
2. a `node_groups:` entry named by the value of one of `node_group_labels` on the template node
   (default `node.kubernetes.io/instance-type`, `beta.kubernetes.io/instance-type`,
   `kubejoule.io/node-group`): one curve per instance type serves every group of that type;
3. the curve that agents export for running nodes with the same value of one of those labels;
4. else unknown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from common.curves import PowerCurve, curve_columns
from scheduler.domain.model import NodeInfo, PodInfo
from scheduler.plugins.energy import DEFAULT_CONSOLIDATION_UTILIZATION, request_cores
from scheduler.plugins.energy.price import amortized_rate, average_rates

# Template-node labels whose values name a curve (config `node_groups:` keys, or the label value
# of running nodes whose agents export a curve), tried in this order: the default of the
# configuration's `node_group_labels:` (scheduler/config/parse.py) and of `resolve_curve`.
DEFAULT_GROUP_LABELS: tuple[str, ...] = (
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "kubejoule.io/node-group",
)

CURVE_FROM_CONFIG = "config"  # node_groups[group id]
CURVE_FROM_LABEL = "label"  # node_groups[value of a template label]
CURVE_FROM_RUNNING = "running"  # exported by the agents of running nodes with that label value


@dataclass(frozen=True)
class GroupOption:
    """One scale-up option as cluster-autoscaler presents it (expander.Option)."""

    group_id: str
    node_count: int  # new nodes of the group; at least 1
    pods: tuple[PodInfo, ...]  # the pending pods that would run on them
    template: NodeInfo  # the group's template node: labels, allocatable
    debug: str = ""  # cluster-autoscaler's free-text debug field, passed through


@dataclass(frozen=True)
class OptionCost:
    """What an option costs by its group's curve (see the module docstring)."""

    option: GroupOption
    pod_cores: float  # R: the pods' CPU requests, cores
    utilization: float  # u: their load on each new node
    expected_watts: float  # n × P(u)
    watts_per_core: float  # the amortized rate per core of pod load: the ranking key
    price_watts: float  # R × watts_per_core: the watts charged to the option's pods

    def rank_key(self) -> tuple[float, float, int, str]:
        return (
            self.watts_per_core,
            self.expected_watts,
            -len(self.option.pods),
            self.option.group_id,
        )


def pod_cores(pods: Sequence[PodInfo]) -> float:
    """Σ of the pods' CPU requests in cores, counting the scorer's default for none."""
    return sum(request_cores(pod) for pod in pods)


def _check(option: GroupOption) -> float:
    """The template's allocatable cores; ValueError for an option no autoscaler would make."""
    if option.node_count < 1:
        raise ValueError(f"option {option.group_id!r}: node_count must be at least 1, got {option.node_count}")
    return option.template.cpu_cores


def expected_watts(option: GroupOption, curve: PowerCurve) -> float:
    """Watts of `node_count` new nodes of the group running the option's pods, the pods' CPU
    requests spread evenly over them (P continued past full load, as the scorer does).
    ValueError when node_count < 1 or the template has no allocatable CPU."""
    cores = _check(option)
    if cores <= 0:
        raise ValueError(f"option {option.group_id!r}: the template node has no allocatable CPU")
    u = pod_cores(option.pods) / (option.node_count * cores)
    return option.node_count * curve.extended_watts(u)


def _binding_share(option: GroupOption) -> float:
    """The largest share of the new nodes' memory, pod slots or ephemeral storage the pods take."""
    allocatable = option.template.allocatable
    n = option.node_count
    share = 0.0
    pairs = (
        (sum(p.requests.memory_bytes for p in option.pods), allocatable.memory_bytes),
        (len(option.pods), allocatable.pods),
        (sum(p.requests.ephemeral_storage_bytes for p in option.pods), allocatable.ephemeral_storage_bytes),
    )
    for requested, available in pairs:
        if available > 0 and requested > 0:
            share = max(share, requested / (n * available))
    return share


def option_cost(
    option: GroupOption,
    curve: PowerCurve,
    reference_utilization: float = DEFAULT_CONSOLIDATION_UTILIZATION,
) -> OptionCost:
    """The option's cost by this curve; ValueError as for expected_watts()."""
    if not 0.0 < reference_utilization <= 1.0:
        raise ValueError("reference_utilization must be in (0, 1]")
    cores = _check(option)
    if cores <= 0:
        raise ValueError(f"option {option.group_id!r}: the template node has no allocatable CPU")
    requested = pod_cores(option.pods)
    u = requested / (option.node_count * cores)
    share = _binding_share(option)
    reachable = reference_utilization if share <= 0 else min(reference_utilization, u / share)
    up_to = max(u, reachable)
    if up_to <= 0:  # pods that explicitly request 0 CPU: price them at the reference load
        up_to = reference_utilization
    per_core = _amortized_rate(curve, up_to) / cores
    return OptionCost(
        option=option,
        pod_cores=requested,
        utilization=u,
        expected_watts=option.node_count * curve.extended_watts(u),
        watts_per_core=per_core,
        price_watts=requested * per_core,
    )


def _amortized_rate(curve: PowerCurve, up_to: float) -> float:
    """The energy plugin's amortized rate a_n of `curve` up to `up_to` (the same function, on a
    batch of one curve)."""
    cols = curve_columns([curve])
    return float(amortized_rate(cols, average_rates(cols), np.array([up_to]))[0])


def rank_options(
    options: Sequence[GroupOption],
    curves: Mapping[str, PowerCurve | None],
    reference_utilization: float = DEFAULT_CONSOLIDATION_UTILIZATION,
) -> list[OptionCost]:
    """The options whose group has a curve (in `curves`, by group id) and a template with CPU,
    cheapest first. ValueError for an option with node_count < 1."""
    costs = []
    for option in options:
        curve = curves.get(option.group_id)
        cores = _check(option)
        if curve is None or cores <= 0:
            continue
        cost = option_cost(option, curve, reference_utilization)
        if math.isfinite(cost.watts_per_core):
            costs.append(cost)
    costs.sort(key=OptionCost.rank_key)
    return costs


def best_options(
    options: Sequence[GroupOption],
    curves: Mapping[str, PowerCurve | None],
    reference_utilization: float = DEFAULT_CONSOLIDATION_UTILIZATION,
) -> list[GroupOption]:
    """The single least-energy option; all of them, in their order, when no option's curve is
    known. Never empty for a non-empty `options`. ValueError for an option with node_count < 1."""
    ranked = rank_options(options, curves, reference_utilization)
    if ranked:
        return [ranked[0].option]
    return list(options)


# -- where a group's curve comes from -------------------------------------------------------------


def resolve_curve(
    group_id: str,
    template: NodeInfo,
    node_groups: Mapping[str, PowerCurve],
    label_keys: Sequence[str] = DEFAULT_GROUP_LABELS,
    running: Mapping[tuple[str, str], PowerCurve] | None = None,
) -> tuple[PowerCurve, str] | None:
    """The group's curve and where it came from (CURVE_FROM_*), or None when unknown.

    `node_groups` is the config's `node_groups:` (keys: group ids or label values); `running`
    maps (label key, label value) of running nodes to the curve their agents export.
    """
    configured = node_groups.get(group_id)
    if configured is not None:
        return configured, CURVE_FROM_CONFIG
    labels = template.label_map
    for key in label_keys:
        value = labels.get(key)
        if value and value in node_groups:
            return node_groups[value], CURVE_FROM_LABEL
    if running:
        for key in label_keys:
            value = labels.get(key)
            if value and (key, value) in running:
                return running[(key, value)], CURVE_FROM_RUNNING
    return None
