"""kubejoule's energy-aware scheduler (`kubejoule-scheduler`, `cmd/cli.py`): one folder per part, mapped
in docs/DESIGN.md ("Inside scheduler/"). May import common/, never the agent or rl/."""
