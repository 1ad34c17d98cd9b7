"""Plain data the scheduler works on (pods, nodes, resources, telemetry) and kube-scheduler's default
filters on it; no client library. May import only the agent's plain-data modules."""
