"""`make bench` for the simulator: the bundled heterogeneous-with-power-off scenario, every policy.

Targets (issue 8; measured, never asserted by a test): on this scenario `heuristic` uses at least
25 % less energy than `default`, its mean slowdown is no worse than default's + 2 points, and it
uses less energy than `peaks` and `trimaran`. The table says which targets were met and by how
much the others were missed, and how fast the simulator runs.
"""

from __future__ import annotations

import sys
import time

from rl.benchmark import format_table, results_json, run_benchmark
from rl.policies import BUILTIN_POLICIES
from rl.scenario import SCENARIOS, load_node_groups, load_trace, scenario_path
from rl.simulator import PowerOffModel

SCENARIO = "heterogeneous-poweroff"
SEEDS = 3


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def main() -> str:
    scenario = SCENARIOS[SCENARIO]
    nodes = load_node_groups(scenario_path(scenario.nodes_file))
    pods = load_trace(scenario_path(scenario.trace_file))
    assert scenario.power_off_after_s is not None
    power_off = PowerOffModel(
        scenario.power_off_after_s, scenario.boot_seconds, scenario.boot_joules
    )
    started = time.monotonic()
    result = run_benchmark(
        nodes, pods, list(BUILTIN_POLICIES), SEEDS, power_off, show_progress=sys.stderr.isatty()
    )
    elapsed = time.monotonic() - started
    doc = results_json(result, {"name": SCENARIO})
    rows = doc["policies"]
    heuristic, default = rows["heuristic"], rows["default"]
    saving = -heuristic["energy_vs_default_pct"]
    slowdown_margin = heuristic["slowdown_mean"] - default["slowdown_mean"]
    lines = [
        f"Scenario `{SCENARIO}`: {len(nodes)} nodes, {len(pods)} pods, {SEEDS} seeds per policy.",
        "",
        format_table(doc),
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| heuristic ≥ 25 % less energy than default | {saving:.1f} % less | {_verdict(saving >= 25)} |",
        f"| heuristic mean slowdown ≤ default's + 2 points | {slowdown_margin:+.2f} points "
        f"| {_verdict(slowdown_margin <= 2)} |",
    ]
    for peer in ("peaks", "trimaran"):
        ratio = 100 * (heuristic["energy_kwh"] / rows[peer]["energy_kwh"] - 1)
        lines.append(
            f"| heuristic uses less energy than {peer} | {ratio:+.1f} % vs {peer} "
            f"| {_verdict(ratio < 0)} |"
        )
    decisions = len(pods) * SEEDS * len(BUILTIN_POLICIES)
    lines += [
        "",
        f"Simulator speed: {decisions} placements in {elapsed:.1f} s "
        f"({decisions / elapsed:,.0f} placements/s on this machine).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
