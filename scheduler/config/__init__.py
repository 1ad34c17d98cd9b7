"""The scheduler's YAML configuration (`--config FILE`): its keys, parsed and checked (`parse`,
`fields`, the `rebalancer:` section in `rebalancer`; `basics`, the leaf: ConfigError and the
listen parser, importing nothing), the plugin registry and the composition root
that builds the objects from them (`build`).

May import every part it builds (domain/, framework/, plugins/, lifetimes/, learning/, telemetry/,
cluster/, decisionlog/, service/); never the four ways the scheduler runs (standalone/, extender/,
autoscaler/, rebalancer/), which import it: each section's settings live here, not in its part."""
