"""When cluster-autoscaler runs a loop: its loop trigger, and its wait for new pods.

Sources: cluster-autoscaler 1.36.1 (kubernetes/autoscaler, cluster-autoscaler/):

* main.go (the `FrequentLoopsEnabled` branch of `run`): with `--frequent-loops-enabled` (its
  default, true: config/flags/flags.go `frequentLoopsEnabled`) the loop is
  `trigger.Wait(previousRun); previousRun, lastRun = lastRun, now; RunOnce(lastRun)`: `Wait` is
  given the start of the loop *before* the one that just ran ("so we need to pass the older
  timestamp (previousRun) to trigger.Wait").
* loop/trigger.go `LoopTrigger.Wait(lastRun)`: it returns at once when the last scale-up
  (`LastScaleUpTime`) or the last scale-down deletion started (`LastScaleDownDeleteTime`) is not
  before `lastRun` ("starts new iteration immediately if the previous one was productive");
  otherwise it waits for `--scan-interval` or for the first unschedulable pod, whichever comes
  first. With the older timestamp, a productive loop is followed by two loops at once: the
  next one, and the one after it (whose `Wait` is given the productive loop's own start).
  The provisioning-request trigger cannot fire here (no ProvisioningRequests).
* loop/trigger.go `StartPodObserver`/`isRecentUnschedulablePod`: the unschedulable pod is one the
  scheduler has just marked `PodScheduled=False, reason Unschedulable` (its transition under 10 s
  old: `maxPodChangeAge`) and not bound; the channel holds one signal, so several pods at once
  start one loop. Here: a pod the scheduler finds no node for for the first time since it (or its
  replacement after an eviction) was created.
* core/static_autoscaler.go `RunOnce`, `allPodsAreNew`: no scale-up while the oldest of the
  Pending pods to help (those that fit no node, booting ones included) was created less than
  `unschedulablePodTimeBuffer` (2 s) ago — "these pods have been created very recently and
  probably there is more pods to come" — and the loop's scale-down deletions are off too
  (`DisableScaleDownForLoop`: its planner still runs). The 2 s is a constant of wall clock, not a
  flag: at a replay's speedup N it is 2·N s of the trace (rl/evaluation/fidelity.py
  `as_run_on_cluster`). Its 30 s for GPU pods (`unschedulablePodWithGpuTimeBuffer`) cannot apply:
  no trace pod asks for a GPU. `--new-pod-scale-up-delay` (`filterOutYoungPods`) is 0 at its
  default and leaves every pod in.

In the simulator a loop takes no time: the loops "at once" run at the same instant, after the
events due then (rl/simulation/engine/events.py). Without frequent loops (main.go's other
branch, `time.After(ScanInterval)`) a loop runs every scan interval. Either way the first loop
is at t = 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass
class LoopTrigger:
    """The time from one loop to the next (main.go's loop and loop/trigger.go `Wait`)."""

    scan_interval_s: float
    frequent_loops: bool = True
    loops: int = 0  # loops run so far
    _last_productive: int = -2  # the number of the last loop that scaled up or started a deletion

    @property
    def wakes_on_unschedulable(self) -> bool:
        """A pod turning unschedulable starts a loop at once (`Wait`'s pod observer)."""
        return self.frequent_loops

    def after_loop(self, productive: bool) -> float:
        """A loop has run (`productive`: it scaled up or started a node deletion): the seconds
        until the next one, unless an unschedulable pod comes first (0: at once)."""
        self.loops += 1
        if productive:
            self._last_productive = self.loops
        if not self.frequent_loops:
            return self.scan_interval_s
        # Wait(previousRun): previousRun is the start of the loop before the one just run.
        return 0.0 if self._last_productive >= self.loops - 1 else self.scan_interval_s


def all_pods_are_new(created_s: Iterable[float], now: float, wait_s: float) -> bool:
    """static_autoscaler.go `allPodsAreNew`: the oldest pod was created less than `wait_s` ago
    (`oldest.Add(buffer).After(now)`); False for no pods."""
    oldest = min(created_s, default=None)
    return oldest is not None and oldest + wait_s > now
