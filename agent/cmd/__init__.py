"""The command lines: `kubejoule-agent` (`cli`, with its device and Kubernetes options in
`devices_cli` and `cluster_cli`, and `run`'s sampling loop and HTTP server in `server`) and
`kubejoule-calibrate` (`calibrate_cli`).

May import everything else of the agent and `common`; nothing imports it (import-linter:
`agent-layers`)."""
