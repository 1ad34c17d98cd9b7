"""A run's inputs: workload traces (`trace.py`: the CSV and its pods), their generator
(`tracegen.py`) and importer (`trace_import.py`), a workload drawn per seed
(`seeded_workload.py`), pods as Kubernetes objects (`kubeobjects.py`), the bundled scenarios
(`scenario.py`: node groups, DaemonSets, PDBs; `headline.py`: the headline's rows) and the
training/held-out pool (`pool.py`).

Imports the scheduler and common/; nothing else of rl.simulation."""
