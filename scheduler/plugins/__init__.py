"""Filter and Score plugins for `scheduler.framework` profiles: kube-scheduler's default ones
that matter for placement, kubejoule's energy scorer (the `energy/` folder: the plugin, its v3
levers, the nodes' curves, their fit and the consolidation prices), the peers' plugins, and the extender adapter.
`scheduler.config.registry` builds them by name.

May import domain/, framework/ and lifetimes/; never learning/ (it imports the energy plugin)."""
