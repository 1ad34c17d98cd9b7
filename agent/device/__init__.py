"""The host's readers: RAPL, cgroups, /proc (CPU time, processes, VMs), GPUs (NVML, the kubelet's
PodResources), the BMC (Redfish), network counters; energy-counter arithmetic and `Gap`, the
vocabulary of missing values. Each reader takes its root and knows nothing of the Snapshot.

May import `agent.protos` and `common`; nothing else of the agent (import-linter: `agent-layers`,
`agent-device-readers`)."""
