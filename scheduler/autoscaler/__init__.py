"""cluster-autoscaler support: the energy-aware node-group choice (`choice`) shared by the
simulator's `kubejoule` expander and the gRPC expander server.

May import domain/, plugins/, telemetry/, cluster/, service/, config/ (its own process's wiring)."""

# The largest BestOptions request the gRPC expander accepts. grpcio refuses requests over 4 MiB by
# default; cluster-autoscaler raises only its own receive limit (128 MiB), and thousands of
# options with their pods are tens of MiB.
DEFAULT_MAX_REQUEST_BYTES = 256 * 1024 * 1024
