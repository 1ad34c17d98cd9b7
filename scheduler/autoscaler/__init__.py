"""cluster-autoscaler support: the energy-aware node-group choice (`choice`) shared by the
simulator's `kubejoule` expander and the gRPC expander server.

May import domain/, plugins/, telemetry/, cluster/, service/, config/ (the `node_groups:` labels'
default; `cli`, the entry point, builds its parts with config/): config/ sits below the four ways
the scheduler runs and imports none of them; standalone/, extender/, rebalancer/ never."""

# The largest BestOptions request the gRPC expander accepts. grpcio refuses requests over 4 MiB by
# default; cluster-autoscaler raises only its own receive limit (128 MiB), and thousands of
# options with their pods are tens of MiB.
DEFAULT_MAX_REQUEST_BYTES = 256 * 1024 * 1024
