"""Random clusters and traces for training and for the held-out set.

* Node kinds: the node groups of the bundled scenarios (rl/scenarios/*.yaml) — four servers with
  their published SPECpower_ssj2008 curves and the Fan et al. model node. A cluster mixes two or
  three kinds, the first with 8 cores or more (the trace menus request up to 4 cores, so every
  pod fits somewhere) and `min_count: 1` (one node always on under autoscaler semantics).
* Load: a trace family (`rl/simulation/traces/tracegen.py`) whose arrival rate is scaled so that the mean CPU the
  pods use is `load` × the cluster's cores over the arrival window (measured on a pilot trace of
  the same family and seed, so the scale is exact for that family's menus).

Training draws clusters of `TRAINING_SIZES` nodes from its own seeds; the held-out set
(rl/heldout/, written by rl/heldout/make_heldout.py with seeds of its own) also has sizes
outside that range. Neither reads the other's files.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rl.simulation.traces.scenario import NodeSpec, PodSpec, load_node_groups, scenario_path
from rl.simulation.traces.tracegen import TraceConfig, generate_family

TRAINING_SIZES = (4, 64)  # inclusive range of cluster sizes training draws from
KIND_FILES = ("heterogeneous.yaml", "homogeneous.yaml")
_PILOT_ARRIVALS_PER_HOUR = 100.0


def node_kinds() -> list[NodeSpec]:
    """One template node per bundled node group (first node of each group)."""
    kinds: dict[str, NodeSpec] = {}
    for filename in KIND_FILES:
        for node in load_node_groups(scenario_path(filename)):
            kinds.setdefault(node.group, node)
    return list(kinds.values())


def random_cluster(
    rng: random.Random, size: int, kinds: list[NodeSpec] | None = None
) -> list[NodeSpec]:
    """`size` nodes of two or three kinds, at least one kind with >= 8 cores, grouped by kind."""
    pool = kinds if kinds is not None else node_kinds()
    big = [k for k in pool if k.cpu_cores >= 8]
    chosen = [rng.choice(big)]
    others = [k for k in pool if k is not chosen[0]]
    chosen += rng.sample(others, min(len(others), rng.choice((1, 2))))
    weights = [rng.random() + 0.2 for _ in chosen]
    counts = [1] * len(chosen)  # every chosen kind is present
    for _ in range(size - len(chosen)):
        counts[rng.choices(range(len(chosen)), weights=weights)[0]] += 1
    nodes = []
    for position, (kind, count) in enumerate(zip(chosen, counts, strict=True)):
        for i in range(count):
            # Under autoscaler semantics one node of the first (big) kind is always on.
            nodes.append(
                replace(
                    kind,
                    name=f"{kind.group}-{i}",
                    ordinal=i,
                    min_count=int(position == 0),
                    initial_count=None,
                )
            )
    return nodes


@dataclass(frozen=True)
class TraceDraw:
    family: str
    hours: float
    load: float  # mean CPU used by pods / cluster cores over the arrival window
    seed: int


def scaled_trace(draw: TraceDraw, nodes: list[NodeSpec]) -> list[PodSpec]:
    """A trace of `draw.family` whose mean used CPU is `draw.load` × the cluster's cores."""
    pilot_config = TraceConfig(hours=draw.hours, arrivals_per_hour=_PILOT_ARRIVALS_PER_HOUR)
    pilot = generate_family(draw.family, pilot_config, draw.seed)
    window_s = draw.hours * 3600.0
    pilot_cores = sum(p.cpu_usage * p.duration_s for p in pilot) / window_s
    cores = sum(n.cpu_cores for n in nodes)
    scale = draw.load * cores / pilot_cores if pilot_cores > 0 else 1.0
    config = TraceConfig(hours=draw.hours, arrivals_per_hour=_PILOT_ARRIVALS_PER_HOUR * scale)
    return generate_family(draw.family, config, draw.seed)


# --- case folders (nodes.yaml + trace.csv) for the gate's command ------------------------------

# Seeds 900000–900999 belong to the promotion gate's cases (written with this function by
# their own script); a validation set drawn here from training seeds must stay clear of them.
RESERVED_SEEDS = range(900_000, 901_000)
VALIDATION_HOURS = {"diurnal": 2.0, "batch-services": 2.0, "bursts": 1.0}


def nodes_yaml(nodes: list[NodeSpec]) -> str:
    """Node groups YAML (rl/simulation/traces/scenario.py's format) of a random cluster: one group per kind."""
    import yaml

    groups: dict[str, dict[str, Any]] = {}
    for node in nodes:
        group = groups.setdefault(
            node.group,
            {
                "name": node.group,
                "count": 0,
                "min_count": node.min_count,
                "cpu_cores": node.cpu_cores,
                "memory_gib": node.memory_gib,
                "power": {"points": [round(w, 3) for w in node.curve.as_points()]},
            },
        )
        group["count"] += 1
    return yaml.safe_dump(list(groups.values()), sort_keys=False)


def write_cases(
    out: str | Path,
    seed_base: int,
    sizes: Sequence[int],
    hours: Mapping[str, float],
    label: str = "validation",
) -> None:
    """One folder per (family, size) under `out`, numbered in that order, case k drawn from
    `random.Random(seed_base + k)`: a random cluster, a load of 15–45 % of its cores, a trace of
    the family over `hours[family]` and its PDBs (the layout `kubejoule-rl gate --heldout`
    reads)."""
    from rl.simulation.traces.scenario import format_pdbs, format_trace
    from rl.simulation.traces.tracegen import FAMILIES, family_pdbs

    root = Path(out)
    case = 0
    for family in FAMILIES:
        for size in sizes:
            seed = seed_base + case
            rng = random.Random(seed)
            nodes = random_cluster(rng, size)
            load = round(rng.uniform(0.15, 0.45), 3)
            pods = scaled_trace(TraceDraw(family, hours[family], load, seed), nodes)
            folder = root / f"{case:02d}-{family}-{size}n"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "nodes.yaml").write_text(
                f"# {label} case {case}: seed {seed}, load {load}\n" + nodes_yaml(nodes)
            )
            (folder / "trace.csv").write_text(format_trace(pods))
            (folder / "pdbs.yaml").write_text(format_pdbs(family_pdbs(pods)))
            print(f"{folder.name}: {len(nodes)} nodes, {len(pods)} pods, load {load}")
            case += 1
