"""Controllers beside the scheduler, named as policy suffixes (`suffixes.py`): descheduler's
HighNodeUtilization (`descheduler/`) and the energy rebalancer (`rebalancer.py`), each registered
with the run (`Simulation.every`) and evicting through its eviction API.

Imports rl.simulation.autoscaler (the rebalancer reads its settings), rl.simulation.engine and
rl.simulation.traces, the scheduler and common/."""
