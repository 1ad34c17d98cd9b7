"""The promotion gate: its statistics on synthetic paired results with a known effect, and the
command's contract (refusal still writes the file and exits 0; bad input exits 2)."""

from __future__ import annotations

import json
import random

import pytest

from rl.cmd.cli import main
from rl.evaluation import gate_run
from rl.evaluation.gate import (
    CaseResult,
    bootstrap_upper,
    combine,
    comparison,
    evaluate,
    report_markdown,
    wilcoxon_less,
)


def _cases(effects, pods=20, candidate_slowdown=0.1, candidate_pending=10.0, unscheduled=0):
    """Paired cases: baseline energy drawn per case, candidate = baseline × (1 + effect)."""
    rng = random.Random(4)
    cases = []
    for i, effect in enumerate(effects):
        base = rng.uniform(5.0, 50.0)
        cases.append(
            CaseResult(
                name=f"case-{i}",
                candidate_kwh=base * (1 + effect),
                baseline_kwh=base,
                candidate_unschedulable=unscheduled if i == 0 else 0,
                baseline_unschedulable=0,
                candidate_pending_s=(candidate_pending,) * pods,
                baseline_pending_s=(10.0,) * pods,
                candidate_slowdowns=(candidate_slowdown,) * pods,
                baseline_slowdowns=(0.1,) * pods,
            )
        )
    return cases


def _noisy(mean, spread, n=30, seed=1):
    rng = random.Random(seed)
    return [rng.gauss(mean, spread) for _ in range(n)]


def test_a_known_effect_is_promoted():
    document = evaluate(_cases(_noisy(-0.05, 0.01)))
    assert document["verdict"] == "promote", document["reasons"]
    assert document["p_value"] < 1e-6
    assert document["ci_upper"] < -0.04
    assert document["mean_relative_difference"] == pytest.approx(-0.05, abs=0.01)


def test_no_effect_is_refused():
    document = evaluate(_cases(_noisy(0.0, 0.01)))
    assert document["verdict"] == "refuse"
    assert any("Wilcoxon" in r for r in document["reasons"])
    assert any("upper bound" in r for r in document["reasons"])


def test_one_case_far_worse_is_refused_despite_a_mean_gain():
    effects = _noisy(-0.05, 0.01)
    effects[7] = 0.10
    document = evaluate(_cases(effects))
    assert document["p_value"] < 0.05 and document["ci_upper"] < -0.01  # wins on average
    assert document["verdict"] == "refuse"
    assert document["reasons"] == ["1 case(s) more than 3 % worse (worst: case-7, +10.00 %)"]


def test_a_small_gain_below_one_percent_is_refused():
    # Significant (every case better) but the mean gain, 0.5 %, is under the 1 % bar.
    document = evaluate(_cases(_noisy(-0.005, 0.001)))
    assert document["p_value"] < 0.05
    assert document["verdict"] == "refuse"
    assert [r for r in document["reasons"] if "upper bound" in r]


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"unscheduled": 1}, "unscheduled"),
        ({"candidate_slowdown": 0.2}, "mean slowdown"),
        ({"candidate_pending": 30.0}, "p95 pending"),
    ],
)
def test_slo_regressions_are_refused(kwargs, reason):
    document = evaluate(_cases(_noisy(-0.05, 0.01), **kwargs))
    assert document["verdict"] == "refuse"
    assert len(document["reasons"]) == 1 and reason in document["reasons"][0]


def test_statistics_helpers():
    assert wilcoxon_less([1, 2, 3], [1, 2, 3]) == 1.0
    # 10 pairs, all better: the exact one-sided p is 1 / 2^10.
    assert wilcoxon_less(list(range(10)), [x + 1 + 0.1 * x for x in range(10)]) == pytest.approx(
        1 / 1024
    )
    assert bootstrap_upper([0.02] * 10) == pytest.approx(0.02)
    assert bootstrap_upper([-0.1, 0.0, 0.1] * 10) > 0.0  # the mean's upper bound is above it
    with pytest.raises(ValueError, match="at least"):
        evaluate(_cases([-0.1] * 3))


def test_promotion_needs_a_pass_against_every_baseline():
    """Winning against the shipped default is not enough: the candidate must also beat bin
    packing, and each refusal names the baseline it lost to."""
    wins = evaluate(_cases(_noisy(-0.05, 0.01)))
    loses = evaluate(_cases(_noisy(0.0, 0.01)))
    assert wins["verdict"] == "promote" and loses["verdict"] == "refuse"
    both = combine({"kubejoule": wins, "mostallocated": loses})
    assert both["verdict"] == "refuse" and both["baselines"] == ["kubejoule", "mostallocated"]
    assert both["reasons"] and all(r.startswith("against mostallocated: ") for r in both["reasons"])
    assert comparison(both, "kubejoule")["verdict"] == "promote"
    assert comparison(both, "mostallocated")["reasons"] == loses["reasons"]
    assert combine({"kubejoule": wins, "mostallocated": wins})["verdict"] == "promote"
    with pytest.raises(KeyError):
        comparison(both, "heuristic")
    with pytest.raises(ValueError):
        combine({})


def test_report_lists_every_case_and_reason_per_baseline():
    document = combine(
        {
            "kubejoule": evaluate(_cases(_noisy(0.0, 0.01))),
            "mostallocated": evaluate(_cases(_noisy(-0.05, 0.01))),
        }
    )
    text = report_markdown(document)
    assert text.startswith("# Promotion gate: REFUSE")
    assert text.count("| case-") == 30
    assert "vs `kubejoule` | vs `mostallocated`" in text and "| **refuse** | **promote** |" in text
    for reason in document["reasons"]:
        assert reason in text


def _case_dir(root, cases=6, arrivals_per_hour=120):
    from rl.simulation.traces.scenario import format_trace
    from rl.simulation.traces.tracegen import TraceConfig, generate_family

    nodes = """- name: small
  count: 2
  cpu_cores: 4
  memory_gib: 8
  power: {idle_watts: 40, max_watts: 120}
- name: big
  count: 2
  cpu_cores: 16
  memory_gib: 32
  power: {idle_watts: 60, max_watts: 200}
"""
    for i in range(cases):
        folder = root / f"case-{i}"
        folder.mkdir(parents=True)
        (folder / "nodes.yaml").write_text(nodes)
        pods = generate_family("bursts", TraceConfig(hours=0.25, arrivals_per_hour=arrivals_per_hour), 10 + i)
        (folder / "trace.csv").write_text(format_trace(pods))
    return root


def test_gate_command_writes_a_refusal_and_exits_0(tmp_path, capsys):
    heldout = _case_dir(tmp_path / "heldout", arrivals_per_hour=600)  # enough to keep 2+ nodes on
    out, report = tmp_path / "gate.json", tmp_path / "gate.md"
    # roundrobin spreads pods over every node: it never beats the energy heuristic.
    code = main(
        [
            "gate",
            "--candidate",
            "roundrobin",
            "--heldout",
            str(heldout),
            "--out",
            str(out),
            "--report",
            str(report),
            "--no-progress",
        ]
    )
    assert code == 0
    document = json.loads(out.read_text())
    assert document["schema"] == "kubejoule.gate/v2"
    assert document["verdict"] == "refuse" and document["reasons"]
    # By default against the shipped default profile and bin packing, in the same run.
    assert (
        document["baselines"] == ["kubejoule", "mostallocated"] == list(gate_run.DEFAULT_BASELINES)
    )
    for entry in document["comparisons"]:
        assert {c["name"] for c in entry["cases"]} == {f"case-{i}" for i in range(6)}
        assert set(entry["cases"][0]) >= {
            "name",
            "candidate_kwh",
            "baseline_kwh",
            "candidate_unschedulable",
            "baseline_unschedulable",
        }
    shipped, packing = (comparison(document, b) for b in document["baselines"])
    # The candidate ran once per case: the same energy in both pairings; the baselines differ.
    assert [c["candidate_kwh"] for c in shipped["cases"]] == [
        c["candidate_kwh"] for c in packing["cases"]
    ]
    assert [c["baseline_kwh"] for c in shipped["cases"]] != [
        c["baseline_kwh"] for c in packing["cases"]
    ]
    assert "autoscaler" in document["semantics"]
    assert report.read_text().startswith("# Promotion gate: REFUSE")
    printed = capsys.readouterr().out
    assert "against kubejoule: refuse" in printed and "against mostallocated: refuse" in printed


def test_gate_command_takes_its_baselines(tmp_path):
    heldout = _case_dir(tmp_path / "heldout")
    out = tmp_path / "gate.json"
    args = ["gate", "--candidate", "mostallocated", "--heldout", str(heldout), "--out", str(out)]
    assert (
        main([*args, "--baseline", "heuristic", "--baseline", "mostallocated", "--no-progress"])
        == 0
    )
    document = json.loads(out.read_text())
    assert document["baselines"] == ["heuristic", "mostallocated"]
    # Against itself nothing differs: refused, as no gain can be shown.
    itself = comparison(document, "mostallocated")
    assert itself["mean_relative_difference"] == 0.0 and itself["verdict"] == "refuse"


@pytest.mark.parametrize(
    "problem", ["missing", "empty", "no-trace", "no-pods", "bad-policy", "too-few"]
)
def test_gate_command_bad_input_exits_2(tmp_path, problem, capsys):
    heldout = tmp_path / "heldout"
    candidate = "default"
    if problem == "empty":
        heldout.mkdir()
    elif problem == "no-trace":
        _case_dir(heldout)
        (heldout / "case-3" / "trace.csv").unlink()
    elif problem == "no-pods":
        _case_dir(heldout)
        (heldout / "case-2" / "trace.csv").write_text(
            "submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage\n"
        )
    elif problem == "bad-policy":
        _case_dir(heldout)
        candidate = "nonsense"
    elif problem == "too-few":
        _case_dir(heldout, cases=2)
    out = tmp_path / "gate.json"
    code = main(
        [
            "gate",
            "--candidate",
            candidate,
            "--heldout",
            str(heldout),
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 2 and not out.exists()
    assert "kubejoule-rl gate:" in capsys.readouterr().err


def test_candidate_path_becomes_the_learned_policy(tmp_path):
    model = tmp_path / "m.npz"
    model.write_bytes(b"")
    assert gate_run.candidate_policy(str(model)) == f"learned:{model}"
    assert gate_run.candidate_policy("default") == "default"


def test_the_recorded_semantics_are_the_rules_the_gate_runs() -> None:
    """gate.json's `semantics` is read from the cluster the gate builds: cluster-autoscaler's
    shipped scale-down (threshold 0.5, the cool-downs, the parallelism) and the plan's own times."""
    from rl.evaluation.gate_run import EXPANDER, GatePlan, gate_cluster
    from rl.simulation.autoscaler.model import AutoscalerModel

    plan = GatePlan("mlp", ("kubejoule",), (), scale_down_unneeded_s=300.0, boot_seconds=90.0)
    shipped = AutoscalerModel()
    assert gate_cluster((), 300.0, 90.0).autoscaler == AutoscalerModel(
        expander=EXPANDER, boot_seconds=90.0, scale_down_unneeded_s=300.0)
    for words in (f"{EXPANDER} expander", "boot 90 s", "after 300 s unneeded",
                  f"utilization threshold {shipped.utilization_threshold:g}",
                  f"delay after add {shipped.delay_after_add_s:g} s",
                  f"after failure {shipped.delay_after_failure_s:g} s",
                  f"up to {shipped.max_scale_down_parallelism} empty nodes at once",
                  f"a loop every {shipped.scan_interval_s:g} s, and at once on an unschedulable pod",
                  f"none scaling up for pods under {shipped.new_pod_wait_s:g} s old",
                  f"{shipped.max_drain_parallelism} drain at a time",
                  f"not considered again for {shipped.unremovable_recheck_s:g} s",
                  "the nodes found unneeded soft-tainted (DeletionCandidateOfClusterAutoscaler",
                  f"up to {shipped.max_bulk_soft_taint_count} taint changes a loop",
                  "telemetry sampled every 5 s"):
        assert words in plan.semantics, (words, plan.semantics)
