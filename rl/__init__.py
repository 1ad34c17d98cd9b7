"""kubejoule's cluster energy simulator, its benchmark, gate and learned scorers (`kubejoule-rl`).
The command lines in `cmd/` (`cli.py` over `ablation_cli.py` over `benchmark_cli.py` and `cluster_cli.py`) over
simulation → policies → cluster (a real control plane on loopback) → evaluation → learning."""
