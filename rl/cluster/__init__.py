"""A real Kubernetes control plane on loopback (`kubejoule-rl cluster up|down`): etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, KWOK's fake nodes and, on request,
metrics-server behind the aggregation layer, built from the Go module proxy by tools/k8s/build.sh,
and, given a binary built from its GitHub source (the proxy refuses its module), the real
cluster-autoscaler (`autoscaler`; `autoscaled_plane`: `cluster up --autoscaler`). Imports
rl.simulation (the node groups of a `nodes.yaml`, cluster-autoscaler's model) and
scheduler.domain's cluster defaults, and nothing else of kubejoule; never the kubernetes client
(api.py speaks JSON over HTTPS)."""
