"""`kubejoule-scheduler run`: a standalone scheduler for pods that opt in with
`spec.schedulerName: kubejoule-scheduler`.

One pass per pod, as kube-scheduler does it:

1. take the pod off the queue (`SchedulingQueue`, `queue`);
2. filter every node with kube-scheduler's default filters (the framework's Filter plugins,
   `scheduler/plugins/`), against the requests of bound *and assumed* pods (`ClusterCache`);
3. score the feasible nodes (or kube-scheduler's nodes to score (percentageOfNodesToScore) among them, an
   option) with the scheduler's profile — the `profile:` of the configuration, by default
   kubejoule's energy plugin (`scheduler.plugins.defaults.kubejoule_profile`) — and with
   kube-scheduler's default profile, for comparison; steps 2–4 are the placement decision
   (`scheduler/decisions/placement.py`, shared with the simulator), over one candidate batch of
   the cache's nodes kept up to date pod after pod;
4. choose, ties at random (`scheduler.framework.select_best`): `active` mode takes the
   profile's best node; `shadow` mode (the default) takes the default profile's and tells the
   profile's pick and best scores in an `EnergyRecommendation` Event on the pod (never a patch);
5. assume the pod on that node and bind it through the Binding subresource (in a small pool of
   binder threads, so the next pod is decided while the API answers); emit a `Scheduled` Event;
   write the decision line (`scheduler/decisionlog/`) and, later, its outcome line.

When nothing fits, the pod gets a `FailedScheduling` Event with kube-scheduler's summary ("0/12
nodes are available: 3 Insufficient cpu, …") and `PodScheduled=False`, reason `Unschedulable`,
and waits for a cluster change or a timeout. API errors and conflicts back off and retry. A pod
is never dropped. Only the leader (`scheduler/service/leader.py`) takes pods off the queue; standbys keep their
caches warm so a takeover is immediate.

Modules: `settings` (StandaloneConfig), `queue` (the scheduling queue), `staging` (the next
node table's batch, staged in the background for the decision), `binding` (the API calls,
binder threads), `events`
(Events and status patches in the background), `records` (decision lines), `loop` (the
scheduler), `process` (`kubejoule-scheduler run`'s wiring).

May import every part below the entry points: domain/, framework/, plugins/, lifetimes/, learning/,
cluster/, decisionlog/, decisions/, service/, config/ (`process` builds the scheduler with it: config/ sits
below the four ways the scheduler runs and imports none of them); extender/, autoscaler/,
rebalancer/ never."""

from scheduler.standalone.binding import ClusterApi, KubeClusterApi
from scheduler.standalone.loop import StandaloneScheduler
from scheduler.standalone.process import RunOptions, run_process
from scheduler.standalone.settings import (
    EVENT_RECOMMENDATION,
    MODE_ACTIVE,
    MODE_SHADOW,
    StandaloneConfig,
)

__all__ = [
    "EVENT_RECOMMENDATION",
    "MODE_ACTIVE",
    "MODE_SHADOW",
    "ClusterApi",
    "KubeClusterApi",
    "RunOptions",
    "StandaloneConfig",
    "StandaloneScheduler",
    "run_process",
]
