"""The decisions the scheduler's processes and the simulator share, one implementation each:

* `placement` — where one pod goes: the standalone scheduler's `ProfileDecider` (filter the
  cluster cache's node table, score it with the scheduler's profile and kube-scheduler's default
  profile, choose), run by `kubejoule-scheduler run` and by the simulator's `profile:` policies;
* `rebalance` — which nodes the energy rebalancer empties in one round (`plan`), with its prices
  (`rebalance_prices`: the energy saved, the disruption's cost, Karpenter's balanced score) and
  what it takes from the lifetime predictor (`rebalance_lifetime`), run by
  `kubejoule-scheduler rebalancer` and by the simulator's `+rebalancer`;
* `expansion` — which node group cluster-autoscaler should grow (`best_options`), served by the
  gRPC expander and run by the simulator's `kubejoule` expander.

A decision takes its inputs as values and returns its result; it reads no cluster, calls no API
and writes nothing. The four ways the scheduler runs (standalone/, extender/, autoscaler/,
rebalancer/) wire them: read the cluster, call the decision, write what it decided. That is why
they live here, below config/, rather than in the process folder that runs them: the simulator
(rl/) imports them as a library and must never import a process (import-linter's
`parts-without-processes` contract).

May import domain/, framework/, lifetimes/, plugins/, cluster/ (the node table `placement` decides
over); never config/ (a decision names the settings it reads: `rebalance.RebalanceSettings`), nor
the four ways the scheduler runs, nor cmd/."""
