"""descheduler's HighNodeUtilization strategy with its DefaultEvictor, as operators run it to pack
autoscaled clusters (with kube-scheduler's MostAllocated): the policy suffix
`+highnodeutilization` (`mostallocated+highnodeutilization@least-waste`).

Every rule is kubernetes-sigs/descheduler's at DESCHEDULER_COMMIT, its Go test tables translated
in tests/rl/simulation/controllers/descheduler/test_rl_descheduler_*.py: `evictor` (DefaultEvictor), `highnodeutilization` (the
strategy), `model` (its nodes, pods and resource arithmetic), `simulation` (one descheduling
cycle on the simulator, its evictions through the simulator's eviction API and owners).

Imports rl.simulation.engine and rl.simulation.traces (only `simulation` does), the scheduler's
plain data (scheduler.domain, scheduler.cluster's Kubernetes readers) and common/; nothing of the
autoscaler, the rebalancer or the rest of rl.
"""

DESCHEDULER_COMMIT = "7d2b28bf2b6a12810317936d909af0270ff38fa3"
