"""The energy rebalancer (`kubejoule-scheduler rebalancer`; docs/rebalancer.md): every interval
it looks for nodes whose pods all fit on running, more efficient nodes and empties them where
the energy saved over the pods' predicted lifetimes exceeds the disruption's cost by a margin
and Karpenter's balanced consolidation score (watts for price) passes — then leaves the node to
cluster-autoscaler.

Modules: `decide` (the decision: the one implementation, also run by the simulator's
`+rebalancer`), `energy` (its prices), `lifetime` (what it takes from scheduler/lifetimes),
`cluster` (the live cluster as decision input, the rebalancing taint), `pdbs`
(PodDisruptionBudgets), `api` (its Kubernetes calls), `loop` (the rounds, shadow and active),
`metrics`, `cli` (the command and its wiring). Its settings, the `rebalancer:` section, are
scheduler/config/rebalancer.py's.

May import domain/, framework/, lifetimes/, cluster/, service/, config/ (its settings; `cli`
builds its parts with it): config/ sits below the four ways the scheduler runs and imports none of
them; standalone/, extender/, autoscaler/ never."""
