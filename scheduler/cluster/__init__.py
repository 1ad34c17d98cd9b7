"""The live cluster: the one door to the Kubernetes API, its objects parsed into domain types
(`kubeobjects.pod_info_from_k8s`, `node_info_from_k8s`), the watched cluster cache, its node
table and the node workloads it gives feature schemas v2/v3 (`node_workload`). May import
domain/ and lifetimes/ (the predictor the cache teaches); never learning/."""
