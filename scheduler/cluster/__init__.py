"""The live cluster: the one door to the Kubernetes API (`kube`: every call; `kube_request`,
`kube_http`: how a request reaches the server), its objects parsed into domain types
(`kubeobjects.pod_info_from_k8s`, `node_info_from_k8s`) and the times written into them
(`kubejson.rfc3339`, for the standalone scheduler's and the rebalancer's Events alike), the
watched cluster cache (with kube-scheduler's classification of node updates, `node_events`),
its node table and the node workloads it gives feature schemas v2/v3 (`node_workload`).
May import domain/ and lifetimes/ (the predictor the cache teaches); never learning/,
nor the four ways the scheduler runs that share it."""
