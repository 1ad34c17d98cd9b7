"""Filter and Score plugins for `scheduler.framework` profiles: kube-scheduler's default ones
that matter for placement, kubejoule's energy scorer, the peers' plugins, and the extender
adapter. `scheduler.config.registry` builds them by name.

May import domain/, framework/ and lifetimes/; never learning/ (it imports the energy plugin)."""
