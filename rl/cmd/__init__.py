"""The command line `kubejoule-rl` (`cli`) and its subcommands: `ablation_cli`, `whatif_cli`,
`train_cli`, `gate_cli`, `merge_cli` and `trace_import_cli` (`trace import`) over `benchmark_cli`
(the options, the cluster they describe, a scenario's setup the ablation, the what-if grid and
benchmarks/bench_rl.py reuse) and `cluster_cli`, over `on_cluster_cli` (`benchmark --on-cluster`)
and the option groups several commands share: `cluster_options` (cluster-autoscaler's settings and
the workload options) and `parallel_options` (`--jobs`, `--shard`). Beside `cli`, two `python -m`
commands of the training workflow: `pool_cli` (a validation set) and `decision_log_cli` (the MLP's
training log). Every argparse parser of rl/ is built here; the library parts they call stay in
the subpackages.

May import everything else of rl/ (and what rl/ may: scheduler/, agent/, common/); nothing of rl/
imports it (import-linter: `rl-layers`, and `rl-cmd-layers` inside it)."""
