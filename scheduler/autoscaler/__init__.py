"""cluster-autoscaler support: the energy-aware node-group choice (`choice`) shared by the
simulator's `kubejoule` expander and the gRPC expander server."""
