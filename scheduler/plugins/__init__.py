"""Filter and Score plugins for `scheduler.framework` profiles: kube-scheduler's default ones
that matter for placement, kubejoule's energy scorer (`energy`, its v3 levers `energy_v3`, the
nodes' curves `energy_curves`, fit `energy_history` and prices `energy_price`), the peers'
plugins, and the extender adapter. `scheduler.config.registry` builds them by name.

May import domain/, framework/ and lifetimes/; never learning/ (it imports the energy plugin)."""
