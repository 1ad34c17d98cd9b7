"""Fidelity on the real cluster-autoscaler: a tiny autoscaled trace — two node groups of different
shapes and curves, two waves of pods over half an hour, 30× faster — run by the real
kube-scheduler and cluster-autoscaler (its kwok cloud provider; least-waste, and `--expander=grpc`
to our expander with our standalone scheduler) on KWOK nodes and in the simulator, the same plan
both ways (`kubejoule-rl benchmark --on-cluster`'s code). About 3 minutes.

cluster-autoscaler is the one real component CI cannot have: the Go module proxy answers 403
"This module version is not available" for k8s.io/autoscaler/cluster-autoscaler, and CI reaches
only the registries. These tests run when $KUBEJOULE_CA_BIN names a binary built from its GitHub
source (tools/k8s/build-ca-from-source.sh) and are skipped otherwise, saying so.

What is held: every run complete, every pod placed, cluster-autoscaler scaling up and down with
booting power counted, and energy within 15 % of the simulator's. Before the simulator modelled
cluster-autoscaler's loop trigger (a loop at once when an unschedulable pod appears and right
after a productive loop: loop/trigger.go `LoopTrigger.Wait`, `--frequent-loops-enabled` default
true) and its wait for pods under 2 s of wall clock old (core/static_autoscaler.go
`allPodsAreNew`: 60 s of trace at 30×, `as_run_on_cluster`), this bursty trace was +5.5 % (60×),
+9.9 % and +11.7 % (30×) energy apart for `default@least-waste` and +36 % (60×), +25 % and +14.6 %
(30×) for `kubejoule@kubejoule`, and the bound was 40 %; with them, at 30× on 2026-12-06,
+5.99 % for both (node-seconds +7.1 %; load average 12 on the shared 2-core machine) and, in a
second run, −0.84 % and −2.88 % (node-seconds −14 % and −20 %: the cluster scaled down two nodes
where the simulator did three, sooner; load average 4–7) (docs/how-to/real-kubernetes.md)."""

from __future__ import annotations

from pathlib import Path

from rl.evaluation.benchmark import plan_benchmark, run_plan
from rl.evaluation.fidelity import as_run_on_cluster
from rl.evaluation.on_cluster import run_on_cluster
from rl.simulation.autoscaler.model import AutoscalerModel
from rl.simulation.cluster import ClusterModel
from rl.simulation.traces.scenario import DaemonSetSpec, PodSpec, parse_node_groups

ENERGY_TOLERANCE_PCT = 15.0
# 30×, not 60×: at 60× cluster-autoscaler's loops (0.4–0.6 s wall on a 2-core machine) outlast
# its 167 ms scan interval, it gathers several Pending pods per loop and asks for other options
# than the simulator, whose loops take no time (measured before the simulator had the loop
# trigger: kubejoule@kubejoule booted 4 nodes where the simulator booted 1, +36 % energy).
SPEEDUP = 30.0
NODES = parse_node_groups([
    {"name": "lean", "count": 3, "cpu_cores": 4, "memory_gib": 8, "power": {"idle_watts": 40, "max_watts": 110}},
    {"name": "hot", "count": 2, "cpu_cores": 16, "memory_gib": 32, "min_count": 1,
     "power": {"idle_watts": 150, "max_watts": 400, "curve": "fan", "r": 1.4}},
])
DAEMONSETS = (DaemonSetSpec("agent", cpu_request=0.1, cpu_usage=0.02, mem_request_gib=0.1),)
# The shipped timers but a shorter unneeded time, so that the half hour sees scale-downs.
CLUSTER = ClusterModel(autoscaler=AutoscalerModel(scale_down_unneeded_s=300.0, delay_after_add_s=300.0),
                       daemonsets=DAEMONSETS, telemetry=None)


def _trace() -> list[PodSpec]:
    """Two waves: 10 pods in the first 5 minutes (more than the hot node holds), 6 after 20."""
    first = [(30.0 * i, 2.0 + (i % 3)) for i in range(10)]
    second = [(1200.0 + 40.0 * i, 1.0 + (i % 2)) for i in range(6)]
    return [PodSpec(i, t, 360.0 + 20.0 * (i % 4), cpu, cpu, round(0.8 * cpu, 3))
            for i, (t, cpu) in enumerate(first + second)]


def _pct(cluster: float, sim: float) -> float:
    return 100.0 * (cluster - sim) / sim


def test_the_simulator_agrees_with_the_real_cluster_autoscaler(k8s_bin: Path, ca_bin: Path, tmp_path: Path) -> None:
    plan = plan_benchmark(NODES, _trace(), ["default@least-waste", "kubejoule@kubejoule"], 1, CLUSTER, (), False)
    messages: list[str] = []
    outcomes, partial = run_on_cluster(plan, DAEMONSETS, k8s_bin, tmp_path, SPEEDUP, messages.append, ca_bin)
    assert partial is None, f"{partial}\n" + "\n".join(messages[-10:])
    simulated = {o.summary.policy: o.summary for o in run_plan(as_run_on_cluster(plan, SPEEDUP), None, 1, False)}
    for outcome in outcomes:
        real, sim = outcome.summary, simulated[outcome.summary.policy]
        report = (real.policy, real.energy_joules, sim.energy_joules, real.node_seconds, sim.node_seconds,
                  real.scale_ups, sim.scale_ups, real.scale_downs, sim.scale_downs)
        print(f"{real.policy}: energy {_pct(real.energy_joules, sim.energy_joules):+.2f} %, node-seconds "
              f"{_pct(real.node_seconds, sim.node_seconds):+.2f} % (cluster / simulator: {report[1:]})")
        assert abs(_pct(real.energy_joules, sim.energy_joules)) <= ENERGY_TOLERANCE_PCT, report
        assert real.scale_ups >= 1 and sim.scale_ups >= 1, report
        assert real.scale_downs >= 1 and sim.scale_downs >= 1, report
        assert real.never_scheduled == 0 and sim.never_scheduled == 0, report
        assert real.energy_split_joules["boots"] > 0, report


def test_cluster_autoscaler_dying_mid_run_stops_it_partial(k8s_bin: Path, ca_bin: Path, tmp_path: Path) -> None:
    """cluster-autoscaler killed during the first run: the run stops naming it, its record kept as
    partial, nothing after it run."""
    from rl.cluster.processes import pid_alive, stop

    plan = plan_benchmark(NODES, _trace()[:6], ["default@least-waste", "default@kubejoule"], 1, CLUSTER, (), False)
    killed: list[str] = []

    def progress(message: str) -> None:
        if "created" in message and not killed:
            pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
            for pid in pids:
                try:
                    argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if argv and argv[0] == str(ca_bin).encode() and str(tmp_path).encode() in b" ".join(argv) and pid_alive(pid):
                    stop(pid)
                    killed.append(message)

    outcomes, partial = run_on_cluster(plan, DAEMONSETS, k8s_bin, tmp_path, SPEEDUP, progress, ca_bin)
    assert killed and outcomes == []
    assert partial is not None and partial.task.key == "default@least-waste"
    assert "cluster-autoscaler-default-least-waste-s0 exited during the run" in partial.reason
    assert partial.as_json()["partial"] is True
