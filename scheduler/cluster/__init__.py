"""The live cluster: the one door to the Kubernetes API, its objects parsed into domain types, the
watched cluster cache and its node table. May import domain/, lifetimes/, learning/ (node workloads)."""
