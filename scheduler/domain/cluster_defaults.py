"""The cluster's timing defaults, one source for the simulator, its benchmarks and the rebalancer.

cluster-autoscaler's flags at the values it ships with (its FAQ, "What are the parameters to
CA?", and `config/flags` in its sources), and the boot time the simulator gives a node going from
powered off — or not yet created — to Ready. Imports nothing.
"""

from __future__ import annotations

SCAN_INTERVAL_S = 10.0  # --scan-interval
SCALE_DOWN_UNNEEDED_S = 600.0  # --scale-down-unneeded-time
SCALE_DOWN_UTILIZATION_THRESHOLD = 0.5  # --scale-down-utilization-threshold
SCALE_DOWN_DELAY_AFTER_ADD_S = 600.0  # --scale-down-delay-after-add
SCALE_DOWN_DELAY_AFTER_FAILURE_S = 180.0  # --scale-down-delay-after-failure
MAX_POD_EVICTION_S = 120.0  # --max-pod-eviction-time
UNREMOVABLE_NODE_RECHECK_S = 300.0  # --unremovable-node-recheck-timeout
MAX_GRACEFUL_TERMINATION_S = 600  # --max-graceful-termination-sec (whole seconds)
NODE_DELETION_DELAY_TIMEOUT_S = 120.0  # --node-deletion-delay-timeout
NEW_POD_WAIT_S = 2.0  # core/static_autoscaler.go unschedulablePodTimeBuffer (a constant, wall clock)
BOOT_SECONDS = 120.0  # a node's boot, from powered off (or requested) to Ready
