"""cluster-autoscaler support: the gRPC expander server (`server`, its messages `messages`, the
running nodes' curves `running`, `tls`), which serves the energy-aware node-group choice
(scheduler/decisions/expansion.py, also the simulator's `kubejoule` expander); `provider/`, the
externalgrpc cloud provider for bare-metal machines switched through their BMC
(`kubejoule-scheduler cloud-provider`).

May import domain/, plugins/, telemetry/, cluster/, decisions/, service/, config/ (its entry point,
scheduler/cmd/expander_cli, builds its parts with config/): config/ sits below the four ways the
scheduler runs and imports none of them; standalone/, extender/, rebalancer/ never."""

# The largest BestOptions request the gRPC expander accepts. grpcio refuses requests over 4 MiB by
# default; cluster-autoscaler raises only its own receive limit (128 MiB). The largest requests
# benchmarks/bench_expander.py builds (1,000 node groups × 20 pending pods, or 50 × 400, with
# 900-byte annotations) are about 20 MiB: 64 MiB is three times that, and keeps one request's
# decoding well inside the Deployment's 1 Gi (256 MiB let a single request approach it).
DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024
