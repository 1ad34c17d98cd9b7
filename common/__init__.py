"""The vocabulary agent, scheduler and rl share: power curves, power profiles, Kubernetes
quantities and timestamps, argparse helpers, JSON types (`jsonvalue`), `protoc` for `make protos`.

It imports nothing of agent, scheduler or rl (import-linter's `layers` contract:
rl -> scheduler -> agent -> common), only the standard library and the agent's core dependencies.
"""
