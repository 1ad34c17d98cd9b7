"""kubejoule's cluster energy simulator, its benchmark, gate and learned scorers (`kubejoule-rl`).
Entry points loose (`cli.py` over `ablation_cli.py` over `benchmark_cli.py`) over simulation → policies → evaluation → learning."""
