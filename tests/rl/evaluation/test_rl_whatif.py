"""`kubejoule-rl whatif` (rl/evaluation/whatif.py): the grid of cluster-autoscaler's settings,
each cell the benchmark's own runs on the same seeds, compared with the shipped settings."""

from __future__ import annotations

import pytest

from rl.cmd.benchmark_cli import scenario_setup
from rl.evaluation.whatif import (
    SHIPPED,
    THRESHOLDS,
    UNNEEDED_S,
    plan_whatif,
    run_whatif,
    whatif_table,
)
from rl.simulation.cluster import ClusterModel


def test_every_cell_runs_its_settings_on_the_same_workloads():
    nodes, pods, cluster = scenario_setup("heterogeneous-autoscaler")
    pods = [p for p in pods if p.submit_s < 2 * 3600.0]
    cells = plan_whatif(nodes, pods, cluster, "mostallocated@kubejoule", 2)
    assert [settings for settings, _ in cells] == [(u, t) for u in UNNEEDED_S for t in THRESHOLDS]
    for (unneeded, threshold), plan in cells:
        model = plan.models[plan.tasks[0].expander].autoscaler
        assert (model.scale_down_unneeded_s, model.utilization_threshold) == (unneeded, threshold)
        assert plan.pods_of(1) == cells[0][1].pods_of(1)
    document = run_whatif(cells, jobs=1)
    shipped = next(c for c in document["cells"]
                   if (c["scale_down_unneeded_s"], c["utilization_threshold"]) == SHIPPED)
    assert shipped["vs_shipped_pct"]["mean"] == 0.0
    table = whatif_table(document)
    assert table.count("\n") == 2 + len(UNNEEDED_S) * len(THRESHOLDS) - 1
    assert "| 3 min | 0.7 |" in table


def test_without_the_autoscaler_there_is_nothing_to_vary():
    nodes, pods, _ = scenario_setup("heterogeneous")
    with pytest.raises(ValueError, match="autoscaler"):
        plan_whatif(nodes, pods, ClusterModel(), "default", 2)
