"""Readers of the Snapshot: the Prometheus collector (`prometheus`, its per-section families in
`prometheus_sections`), the `once`/`replay` table (`report`) and the live terminal view (`top`).

May import `agent.monitor`, `agent.device` and `common`; never kube, calibration or cmd
(import-linter: `agent-layers`)."""
