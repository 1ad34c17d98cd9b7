"""Calibration: check RAPL, measure idle power, sweep load, fit the node's power curve.

The command line is `agent.cmd.calibrate_cli`; the modules here are its parts:
`check` (is RAPL usable, and as whom), `load` (duty-cycle worker processes), `measure`
(energy and utilization windows), `fit` (linear, Fan et al., 11 points; held-out selection),
`wall` (a RAPL-to-wall correction from a power meter's CSV), `platform_fit` (the curve against
the BMC's platform reading), `output` (the power profile's YAML written) and `console` (what the
terminal shows).

May import `agent.monitor`, `agent.device` and `common`; never exporter, kube or cmd
(import-linter: `agent-layers`)."""
