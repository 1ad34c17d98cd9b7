"""The simulator's event kinds: their numbers order the events due at the same instant."""

# Events at the same instant: finishing pods free room before anything else looks at it, a node
# due to power off at the instant a pod arrives stays on for it, and the autoscaler's scan sees
# the pods that arrived at its instant as Pending once the scheduler has tried them.
COMPLETE = 0
BOOT_DONE = 1
ARRIVAL = 2
POWER_OFF = 3
SCAN = 4
PERIODIC = 5  # a controller that acts on the cluster every interval (`Simulation.every`)
