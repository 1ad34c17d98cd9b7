"""The cluster simulator: event engine, energy, telemetry, cluster-autoscaler, controllers, traces, scenarios.
Imports the scheduler and the agent's plain-data modules; nothing else of rl/."""
