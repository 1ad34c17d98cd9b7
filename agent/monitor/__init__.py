"""Measuring: two reads of the host (`raw_sample`) turned into one immutable `Snapshot` per
interval (`sampler`), by RAPL power, GPU power, the platform's composition, attribution to pods,
VMs and processes, idle baselines; the exporter's cumulative energy counters.

May import `agent.device`, `agent.protos` and `common`; never kube, exporter, calibration or cmd
(import-linter: `agent-layers`)."""
