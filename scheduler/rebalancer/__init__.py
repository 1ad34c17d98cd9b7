"""The energy rebalancer (`kubejoule-scheduler rebalancer`; docs/rebalancer.md): every interval
it looks for nodes whose pods all fit on running, more efficient nodes and empties them where
the energy saved over the pods' predicted lifetimes exceeds the disruption's cost by a margin
and Karpenter's balanced consolidation score (watts for price) passes — then leaves the node to
cluster-autoscaler.

The decision itself, its prices and what it takes from the lifetime predictor are
scheduler/decisions/rebalance*.py (the one implementation, also run by the simulator's
`+rebalancer`); this folder wires it. Modules: `cluster` (the live cluster as the decision's
input, the rebalancing taint), `pdbs` (PodDisruptionBudgets), `api` (its Kubernetes calls),
`loop` (the rounds, shadow and active: read, decide, act), `metrics`. Its command and wiring are
scheduler/cmd/rebalancer_cli.py; its settings, the `rebalancer:` section,
scheduler/config/rebalancer.py's.

May import domain/, framework/, lifetimes/, cluster/, decisions/, service/, config/ (its
settings; scheduler/cmd/rebalancer_cli builds its parts with it): config/ sits below the four ways the scheduler runs and imports none of
them; standalone/, extender/, autoscaler/ never."""
