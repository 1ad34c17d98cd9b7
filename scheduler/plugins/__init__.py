"""Filter and Score plugins for `scheduler.framework` profiles: kube-scheduler's default ones
that matter for placement, kubejoule's energy scorer, the peers' plugins, and the extender
adapter. `scheduler.plugins.registry` builds them by name.

May import domain/ and framework/ (the registry builds the `learned` plugin from learning/ when asked)."""
