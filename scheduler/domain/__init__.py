"""Plain data the scheduler works on (pods, nodes, resources, telemetry, node workloads) and
kube-scheduler's default filters on it; no client library (Kubernetes JSON is read in cluster/).
May import only common/, nothing of the scheduler."""
