"""The simulation engine: the event loop and its clock (`simulator.py`: `Simulation`), the run's
one state object (`state.py`) and the parts that hold it — a node's life (`lifecycle.py`), what
the autoscaler and controllers may do (`actions.py`: `ClusterActions`, the `ClusterAPI` of
`node.py`), the scheduler's view (`view.py`) — with the nodes (`node.py`), event kinds
(`events.py`), energy ledgers and the power model (`energy.py`), telemetry (`telemetry.py`),
workloads and PDBs (`workloads.py`) and the records (`simrecords.py`).

Imports rl.simulation.traces, the scheduler and common/; never the autoscaler or the
controllers, which it drives through `ClusterAPI` and `Simulation.every`."""
