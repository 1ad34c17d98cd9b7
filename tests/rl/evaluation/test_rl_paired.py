"""Paired statistics (rl/evaluation/paired.py) and the verdicts built on them: an interval from
per-seed differences, "met" only when the whole interval clears the target."""

from __future__ import annotations

import math

import pytest

from rl.evaluation.paired import (
    Interval,
    at_most,
    difference,
    mean_interval,
    paired_axes,
    relative_pct,
)
from rl.evaluation.report import recommended_targets
from rl.evaluation.rows import BenchmarkDocument, OracleRow, PolicyRow, RunRow
from rl.simulation.traces.headline import BASELINE, PACKING_REFERENCE, RECOMMENDED


def test_the_interval_is_the_t_interval_of_the_per_seed_differences():
    found = mean_interval([1.0, 2.0, 3.0, 4.0])
    half = 3.182446305284263 * math.sqrt(5 / 3) / 2  # t(0.975, 3) × sd / √n
    assert found.mean == pytest.approx(2.5)
    assert (found.low, found.high) == (pytest.approx(2.5 - half), pytest.approx(2.5 + half))


def test_pairing_removes_what_the_seeds_share():
    # The workload moves both policies by ±10 %; the paired difference is exactly −2 %.
    ours = [98.0, 88.2, 107.8]
    theirs = [100.0, 90.0, 110.0]
    found = relative_pct(ours, theirs)
    assert found.mean == pytest.approx(-2.0)
    assert found.high == pytest.approx(-2.0)
    assert difference([3.0, 5.0], [1.0, 1.0]).mean == pytest.approx(3.0)


def test_met_only_when_the_whole_interval_clears_the_target():
    assert at_most(Interval(-2.0, -3.0, -1.0, 5), 0.0)
    assert not at_most(Interval(-2.0, -3.0, 0.5, 5), 0.0)  # the mean alone would pass
    assert not at_most(Interval(-2.0, None, None, 1), 0.0)  # one seed: no interval, no verdict


def _run(seed, energy, lost=0.0, evictions=0, p99=0.0):
    return {"seed": seed, "energy_kwh": energy, "lost_cpu_hours": lost, "evictions": evictions,
            "pending_seconds_p99": p99}


def _runs(*runs):
    return [RunRow.from_json(r) for r in runs]


def test_every_axis_pairs_by_seed():
    ours = [_run(0, 9.0, 1.0, 3, 10.0), _run(1, 10.0, 2.0, 4, 20.0)]
    theirs = [_run(1, 10.0, 2.0, 5, 25.0), _run(0, 10.0, 1.0, 3, 10.0)]
    axes = paired_axes(_runs(*ours), _runs(*theirs))
    assert axes["energy"].mean == pytest.approx(-5.0)
    assert axes["lost_cpu_hours"].mean == 0.0
    assert axes["evictions"].mean == pytest.approx(-0.5)
    assert axes["pending_p99"].mean == pytest.approx(-2.5)


def test_the_recommended_setups_verdicts():
    def row(*runs):
        return PolicyRow.from_json({"runs": list(runs)})

    rows = {
        BASELINE: row(*(_run(s, 20.0 + s) for s in range(4))),
        PACKING_REFERENCE: row(*(_run(s, 17.0 + s, 5.0, 10, 30.0) for s in range(4))),
    }
    rows[RECOMMENDED] = row(*(_run(s, 16.5 + s + 0.01 * s, 4.0 - s, 10 - s, 30.0 - s) for s in range(4)))
    from rl.evaluation.results import add_paired

    document = BenchmarkDocument({}, 4, BASELINE, add_paired(rows, BASELINE), OracleRow(None))
    targets = {t.target: t for t in recommended_targets(document)}
    if RECOMMENDED == PACKING_REFERENCE:
        pytest.skip("the recommended setup is bin packing itself")
    assert targets[f"{RECOMMENDED} energy no worse than {PACKING_REFERENCE}'s (upper end ≤ 0)"].met
    assert targets[f"{RECOMMENDED} lost_cpu_hours no worse than {PACKING_REFERENCE}'s (upper end ≤ 0)"].met
    # Evictions −0 … −3: the interval reaches above 0, so it is not shown to be no worse.
    assert not targets[f"{RECOMMENDED} evictions no worse than {PACKING_REFERENCE}'s (upper end ≤ 0)"].met
