"""Kubernetes: the one adapter to the API (`client`, the only importer of the kubernetes client),
the pod watch's names (`podmeta`) and Metrics Server usage (`metrics_server`), added to a Snapshot.

May import `agent.monitor` (the Snapshot), `agent.device` and `common`; never exporter,
calibration or cmd (import-linter: `agent-layers`, `agent-kubernetes-adapter`)."""
