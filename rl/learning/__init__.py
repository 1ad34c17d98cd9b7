"""Learned scorers: DQN and MLP training (its command, `kubejoule-rl train`, is rl/cmd/train_cli.py), the simulator's decision log, the gymnasium environment.
May import all of rl/ below it; the only place torch may be imported."""
