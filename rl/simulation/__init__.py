"""The cluster simulator: event engine, energy, telemetry, cluster-autoscaler, controllers, traces, scenarios.
Imports the scheduler and common/; nothing else of rl/."""
