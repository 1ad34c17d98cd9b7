"""Writes the held-out set of the promotion gate (run once; its output is committed).

    python rl/heldout/make_heldout.py rl/heldout

36 cases: 3 trace families × 12 cluster sizes (one of them, 80 nodes, outside the training range
of rl/pool.py), node mixes from the bundled SPECpower kinds (one node of the first kind always
on: min_count 1), the bundled DaemonSets (no daemonsets.yaml), load 15–45 % of the cluster's
cores, arrival windows of 2 h (1 h for the bursts family). Seeds 900000 + case number: training draws its seeds from
its own range and never reads these folders (tests/rl/test_rl_heldout.py checks both).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import yaml

from rl.pool import TraceDraw, random_cluster, scaled_trace
from rl.scenario import format_trace
from rl.tracegen import FAMILIES

HELDOUT_SEED_BASE = 900_000
SIZES = (6, 8, 12, 16, 24, 32, 48, 80, 10, 20, 40, 14)
HOURS = {"diurnal": 2.0, "batch-services": 2.0, "bursts": 1.0}  # arrival window per family


def nodes_yaml(nodes: list) -> str:
    groups: dict[str, dict] = {}
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


def main(out: str) -> None:
    root = Path(out)
    case = 0
    for family in FAMILIES:
        for size in SIZES:
            seed = HELDOUT_SEED_BASE + case
            rng = random.Random(seed)
            nodes = random_cluster(rng, size)
            load = round(rng.uniform(0.15, 0.45), 3)
            pods = scaled_trace(TraceDraw(family, HOURS[family], load, seed), nodes)
            folder = root / f"{case:02d}-{family}-{size}n"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "nodes.yaml").write_text(
                f"# held-out case {case}: seed {seed}, load {load}\n" + nodes_yaml(nodes)
            )
            (folder / "trace.csv").write_text(format_trace(pods))
            print(f"{folder.name}: {len(nodes)} nodes, {len(pods)} pods, load {load}")
            case += 1


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "rl/heldout")
