"""cluster-autoscaler in the simulator: its settings (`model.py`: `AutoscalerModel`), the scan
loop and scale-up (`scan.py`: `Autoscaler`), when a loop runs (`trigger.py`: `LoopTrigger`, the
wait for new pods), scale-down (`scaledown.py`), each rule citing
kubernetes/autoscaler's file and commit. It acts on a run only through the engine's `ClusterAPI`.

Imports rl.simulation.engine and rl.simulation.traces, the scheduler and common/; never the
controllers."""
