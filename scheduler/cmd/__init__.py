"""The command line `kubejoule-scheduler` (`cli`, `build_parser()` listing the subcommands) and the
subcommands that wire a process from config/: `expander_cli` (`autoscaler-expander`, the gRPC
expander), `provider_cli` (`cloud-provider`, the bare-metal cloud provider) and `rebalancer_cli`
(`rebalancer`); `run` and `extender` are wired in `cli` itself (standalone/process,
extender/wiring). Every argparse parser of the scheduler is built here.

May import everything else of the scheduler and common/; nothing of the scheduler imports it
(import-linter: `scheduler-processes`, `scheduler-parts`)."""
