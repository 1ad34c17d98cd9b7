"""Learned scorers: DQN and MLP training, the simulator's decision log, the gymnasium environment.
May import all of rl/ below it; the only place torch may be imported."""
