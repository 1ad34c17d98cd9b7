"""kubejoule as a cluster-autoscaler cloud provider for bare-metal machines switched off and on
through their BMC (`kubejoule-scheduler cloud-provider`, docs/bare-metal.md).

`settings` reads and checks the provider's configuration; `redfish` and `simulated` are the two
power backends (a BMC's `ComputerSystem.Reset`, or KWOK Nodes created after a boot delay);
`machines` keeps each machine's power state and enforces the safety rules; `kubeside` is its
door to the Kubernetes API (through scheduler/cluster/kube.py); `service` answers
cluster-autoscaler's externalgrpc CloudProvider calls; its entry point is scheduler/cmd/provider_cli.

Part of scheduler/autoscaler/: may import what it may (domain/, cluster/, service/, config/, the
protos), never standalone/, extender/, rebalancer/."""
