"""Calibration: check RAPL, measure idle power, sweep load, fit the node's power curve.

The command line is `agent.calibrate_cli`; the modules here are its parts:
`check` (is RAPL usable, and as whom), `load` (duty-cycle worker processes), `measure`
(energy and utilization windows), `fit` (linear, Fan et al., 11 points; held-out selection),
`wall` (a RAPL-to-wall correction from a power meter's CSV) and `profile` (the YAML written).
"""
