"""The benchmark, the promotion gate, the ablation, their reports, shards and parallel runs, the oracle bound.
Imports rl.simulation and rl.policies (and the layers below); never rl.learning."""
