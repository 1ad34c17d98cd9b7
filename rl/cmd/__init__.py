"""The command line `kubejoule-rl` (`cli`) and its subcommands: `ablation_cli`, `whatif_cli` and
`train_cli` over `benchmark_cli` (the options, the cluster they describe, a scenario's setup the
ablation, the what-if grid and benchmarks/bench_rl.py reuse) and `cluster_cli`, over
`on_cluster_cli` (`benchmark --on-cluster`).

May import everything else of rl/ (and what rl/ may: scheduler/, agent/, common/); nothing of rl/
imports it (import-linter: `rl-layers`, and `rl-cmd-layers` inside it)."""
