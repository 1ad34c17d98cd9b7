"""Writes the held-out set of the promotion gate (run once; its output is committed).

    python rl/heldout/make_heldout.py rl/heldout

36 cases: 3 trace families × 12 cluster sizes (one of them, 80 nodes, outside the training range
of rl/simulation/traces/pool.py), node mixes from the bundled SPECpower kinds (one node of the first kind always
on: min_count 1), the bundled DaemonSets (no daemonsets.yaml), load 15–45 % of the cluster's
cores, arrival windows of 2 h (1 h for the bursts family), the trace's workloads and its services'
PodDisruptionBudgets (pdbs.yaml; rl/simulation/traces/tracegen.py). Seeds 900000 + case number: training draws its seeds from
its own range and never reads these folders (tests/rl/heldout/test_rl_heldout.py checks both).
"""

from __future__ import annotations

import sys

from rl.simulation.traces.pool import write_cases

HELDOUT_SEED_BASE = 900_000
SIZES = (6, 8, 12, 16, 24, 32, 48, 80, 10, 20, 40, 14)
HOURS = {"diurnal": 2.0, "batch-services": 2.0, "bursts": 1.0}  # arrival window per family


def main(out: str) -> None:
    write_cases(out, HELDOUT_SEED_BASE, SIZES, HOURS, "held-out")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "rl/heldout")
