"""What Kubernetes and cluster-autoscaler do with a trace's workloads: which pods block a node's
removal, how much room a PodDisruptionBudget has, and what an eviction does to a pod, by owner.

Sources (quoted by file; AS = kubernetes/autoscaler at f7bb0c3623750695e1bb7f9f52269590f2974cbf,
the last commit with cluster-autoscaler's core packages in that repository, 2026-07-20; paths
under cluster-autoscaler/):

* Blocking pods — AS simulator/drainability/rules/rules.go `Default`: the rules in order, the first
  with an outcome wins. For the pods a trace can describe that is:
  daemonset/rule.go (a DaemonSet pod is drainable: never blocks), safetoevict/rule.go (the
  annotation `safe-to-evict: "true"` makes a pod drainable — before the later rules, so also
  before its PDB), replicated/rule.go (a pod without a controller, or whose controller kind is
  not ReplicationController, Job, ReplicaSet or StatefulSet, blocks: `NotReplicated`, with
  `--skip-nodes-with-custom-controller-pods` at its default true), notsafetoevict/rule.go
  (`safe-to-evict: "false"` blocks), pdb/rule.go (a pod whose PDB has `DisruptionsAllowed < 1`
  blocks: `NotEnoughPdb`). The other rules (mirror, long-terminating, replica count at
  `--min-replica-count` 0, terminal, kube-system pods, local storage) cannot fire on a trace pod.
* PDB room — kubernetes/kubernetes pkg/controller/disruption/disruption.go
  (`getExpectedPodCount`, `countHealthyPods`, `updatePdbStatus`): `max_unavailable` →
  desired healthy = expected − ⌈budget⌉ (percentages of the expected count, rounded up, at least
  0); `min_available` as an integer → that number, as a percentage → ⌈p × expected⌉; allowed =
  healthy − desired, 0 when negative or when no pod is expected. Expected is the controller's
  scale; here it is the workload's pods that exist (arrived, not finished), which is the scale
  of a controller that keeps its replicas. Healthy = running and Ready: a replacement still
  starting (`--pod-startup-seconds`) or Pending is not.
* Eviction by owner (the controllers' behaviour, Kubernetes' documentation of ReplicaSet,
  StatefulSet and Job): a ReplicaSet, StatefulSet or ReplicationController pod is replaced by a
  new pod that lives the rest of its lifetime; a Job pod (and a pod of any other controller) is
  replaced by one that starts over, and the CPU-seconds it had done are lost; a bare pod (only
  evictable with `safe-to-evict: "true"`) or a DaemonSet pod of the trace is deleted, not
  recreated. Every replacement is Pending from the eviction and needs `pod_startup_s` before it
  is Ready; the simulator runs that startup at the pod's CPU use (it holds its requests and draws
  its CPU, and its own lifetime does not advance).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from rl.simulation.traces.trace import Budget, PdbSpec, PodSpec
from scheduler.cluster.podfacts import KEEPS_LIFETIME

# AS simulator/drainability/rules/replicated/rule.go, `replicatedKind`.
REPLICATED_KINDS = frozenset({"ReplicationController", "Job", "ReplicaSet", "StatefulSet"})
DAEMONSET = "DaemonSet"
DEFAULT_POD_STARTUP_S = 10.0

# Fates of an evicted pod.
REPLACED = "replaced"  # a new pod with the remaining lifetime
RESTARTED = "restarted"  # a new pod that starts from scratch
DELETED = "deleted"  # gone for good


def eviction_fate(owner_kind: str | None) -> str:
    if owner_kind in KEEPS_LIFETIME:
        return REPLACED
    if owner_kind is None or owner_kind == DAEMONSET:
        return DELETED
    return RESTARTED


def is_daemonset_pod(pod: PodSpec) -> bool:
    return pod.owner_kind == DAEMONSET


def blocking_reason(pod: PodSpec, pdb_room: int | None) -> str | None:
    """Why cluster-autoscaler will not remove a node this pod runs on (None: it may go).
    `pdb_room`: its PDB's disruptions allowed (None without a PDB)."""
    if is_daemonset_pod(pod) or pod.safe_to_evict is True:
        return None
    if pod.owner_kind not in REPLICATED_KINDS:
        return "NotReplicated"
    if pod.safe_to_evict is False:
        return "NotSafeToEvict"
    if pdb_room is not None and pdb_room < 1:
        return "NotEnoughPdb"
    return None


def scaled_budget(value: Budget, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value.rstrip("%")) * total / 100)


def disruptions_allowed(pdb: PdbSpec, expected: int, healthy: int) -> int:
    """The disruption controller's `DisruptionsAllowed` for a workload with `expected` pods of
    which `healthy` run and are Ready."""
    if pdb.max_unavailable is not None:
        desired = max(0, expected - scaled_budget(pdb.max_unavailable, expected))
    else:
        assert pdb.min_available is not None
        desired = scaled_budget(pdb.min_available, expected)
    allowed = healthy - desired
    return 0 if expected <= 0 or allowed <= 0 else allowed


@dataclass(frozen=True)
class WorkloadModel:
    """How the cluster treats the trace's workloads (besides the trace's own columns)."""

    pdbs: tuple[PdbSpec, ...] = ()
    pod_startup_s: float = DEFAULT_POD_STARTUP_S  # a replacement's time from placement to Ready

    def __post_init__(self) -> None:
        if not self.pod_startup_s >= 0:
            raise ValueError("the pod startup time must be >= 0")


@dataclass
class PodLedger:
    """Each pod's lifecycle across evictions, its workload's PDB room, and the disruption
    counters of a run. The simulator tells it when pods arrive, start, finish and are evicted."""

    pods: Sequence[PodSpec]
    model: WorkloadModel = field(default_factory=WorkloadModel)
    evictions: int = 0
    restarted_pods: int = 0  # replaced by a pod that starts over
    replaced_pods: int = 0  # replaced by a pod that lives the rest of the lifetime
    deleted_pods: int = 0
    lost_cpu_seconds: float = 0.0  # CPU-seconds done by evicted pods and done again (or lost)

    def __post_init__(self) -> None:
        count = len(self.pods)
        self._lifetime_left = [p.duration_s for p in self.pods]
        self._startup = [0.0] * count  # of the current incarnation (0 for the trace's own pod)
        self._run = [0.0] * count  # run seconds the current incarnation started with
        self._ready_at = [0.0] * count
        self._pdbs = {p.workload: p for p in self.model.pdbs}
        self._existing: dict[str, int] = {}
        self._running: dict[str, set[int]] = {}
        self._disrupted: set[str] = set()

    def __deepcopy__(self, memo: dict[int, object]) -> PodLedger:
        """A copy whose counters and per-pod state can move apart (Simulation.fork); the trace
        and the PDBs are immutable and shared."""
        copied = copy.copy(self)
        copied._lifetime_left = list(self._lifetime_left)
        copied._startup = list(self._startup)
        copied._run = list(self._run)
        copied._ready_at = list(self._ready_at)
        copied._existing = dict(self._existing)
        copied._running = {k: set(v) for k, v in self._running.items()}
        copied._disrupted = set(self._disrupted)
        return copied

    @property
    def disrupted_workloads(self) -> int:
        """Workloads (a pod without one counts alone) that lost at least one pod to eviction."""
        return len(self._disrupted)

    def has_pdb(self, pod: PodSpec) -> bool:
        return pod.workload in self._pdbs

    def arrived(self, index: int) -> None:
        workload = self.pods[index].workload
        if workload is not None:
            self._existing[workload] = self._existing.get(workload, 0) + 1

    def started(self, index: int, now: float) -> float:
        """A pod (or its replacement) starts now: the run seconds it needs at full speed."""
        self._run[index] = self._startup[index] + self._lifetime_left[index]
        self._ready_at[index] = now + self._startup[index]
        workload = self.pods[index].workload
        if workload is not None:
            self._running.setdefault(workload, set()).add(index)
        return self._run[index]

    def finished(self, index: int) -> None:
        self._gone(index)

    def run_plan_s(self, index: int) -> float:
        """Seconds the pod's current incarnation (or the next one, while it is Pending) runs at
        full speed from its placement: its startup plus the lifetime it has left. The truth
        the `hindsight` reference is told (rl/policies/hindsight.py); no policy reads it."""
        return self._startup[index] + self._lifetime_left[index]

    def evicted(self, index: int, left_s: float) -> str:
        """The pod was evicted with `left_s` run seconds left: its fate, with the lost work and
        the replacement's run plan booked."""
        pod = self.pods[index]
        done = max(0.0, self._run[index] - left_s)
        startup = self._startup[index]
        fate = eviction_fate(pod.owner_kind)
        self.evictions += 1
        self._disrupted.add(pod.workload or f"pod {index}")
        running = self._running.get(pod.workload or "")
        if running is not None:
            running.discard(index)
        if fate == REPLACED:
            self.replaced_pods += 1
            self.lost_cpu_seconds += pod.cpu_usage * min(done, startup)
            self._lifetime_left[index] -= max(0.0, done - startup)
        else:
            self.lost_cpu_seconds += pod.cpu_usage * done
        if fate == RESTARTED:  # its lifetime was never shortened: it runs all of it again
            self.restarted_pods += 1
        if fate == DELETED:
            self.deleted_pods += 1
            self._gone(index)
        self._startup[index] = self.model.pod_startup_s
        return fate

    def _gone(self, index: int) -> None:
        workload = self.pods[index].workload
        if workload is not None:
            self._existing[workload] -= 1
            self._running.get(workload, set()).discard(index)

    def pdb_room(self, workload: str | None, now: float) -> int | None:
        """The workload's PDB's disruptions allowed now; None when it has no PDB."""
        pdb = self._pdbs.get(workload) if workload is not None else None
        if pdb is None:
            return None
        healthy = sum(1 for i in self._running.get(pdb.workload, ()) if self._ready_at[i] <= now)
        return disruptions_allowed(pdb, self._existing.get(pdb.workload, 0), healthy)
