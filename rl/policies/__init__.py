"""Placement policies for the simulator: scheduling profiles, the named peers, the hindsight reference.
Imports rl.simulation, the scheduler and the agent; never rl.evaluation or rl.learning."""
