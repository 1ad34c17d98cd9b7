"""kubejoule agent package, in layers as Kepler's internal/ (docs/DESIGN.md, "Inside agent/"):
`cmd` (command lines, server) over `calibration`, `exporter` and `kube` (independent of each
other), over `monitor` (the Snapshot), over `device` (the readers), over `protos`. Each folder's
`__init__` says what it may import; import-linter's `agent-layers` contract checks it.
May import `common`, never the scheduler or rl."""
__version__ = "0.1.0"
