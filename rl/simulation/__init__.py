"""The cluster simulator, in four folders, each importing only those below it (import-linter's
`rl-simulation-layers` contract):

| folder | what it holds |
|---|---|
| `controllers/` | controllers beside the scheduler, named as policy suffixes: descheduler's HighNodeUtilization, the energy rebalancer |
| `autoscaler/` | cluster-autoscaler: its settings, the scan loop, scale-down |
| `engine/` | the event loop and clock, the run's state, a node's life, the actions, the scheduler's view, energy, telemetry, workloads and PDBs, the records |
| `traces/` | a run's inputs: traces and their generator and importer, seeded workloads, scenarios, the pool |

Beside them, on top: `cluster.py` (`ClusterModel` and the one function that builds a
`Simulation`) and `recorded.py` (a run recorded on a real cluster as a `SimResult`).
Imports the scheduler and common/; nothing else of rl/."""
