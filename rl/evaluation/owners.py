"""A trace's workloads on the cluster: their controllers as real objects, their
PodDisruptionBudgets, and the replay standing in for the controllers when one of their pods is
evicted — as the simulator models them (rl/simulation/engine/workloads.py).

Owners. Each workload of the trace (its `workload` column; a pod without one is its own) whose
pods have an owner becomes one object of that kind in the run's namespace — a ReplicaSet, a
StatefulSet, a ReplicationController, a Job — and each of its pods is created with an
ownerReference (`controller: true`) to it and the label `kubejoule.io/workload`. They are real
because the real components read them: cluster-autoscaler's drain rules take a pod with a
controller of those kinds as replicated (simulator/drainability/rules/replicated/rule.go, the
kind only) and look the controller up (replicacount/rule.go: a missing Job, ReplicaSet or
StatefulSet blocks the node, `ControllerNotFound`); the disruption controller in
kube-controller-manager finds each PDB's pods' controller and takes its scale as the expected
count (disruption.go `getExpectedPodCount`); the garbage collector deletes a pod whose owner is
gone. The replay keeps each owner's `spec.replicas` (a Job's `parallelism`) at the workload's
pods that exist — arrived, not ended (a replacement still starting counts) — the simulator's
expected count (`PodLedger`).

The disruption controller recounts a PDB on its pods' and its own events only, never on a
change of a controller's scale (kubernetes/kubernetes pkg/controller/disruption/disruption.go:
event handlers on the pod and PDB informers; the ReplicaSet, StatefulSet and other controllers'
informers are listers only). A real controller changes its scale first and its pods after (a
ReplicaSet scaled down deletes a pod: the recount sees the new scale), so the replay does too: a
running pod's owner is scaled down `lead` ahead of the pod's end (`retire_ending`: the end KWOK
will play, from when the pod was seen running), and after any other change of scale (an arrival,
a bare pod gone) and after each end seen, the PDB is touched (an annotation,
`RECOUNT_ANNOTATION`), which makes the controller recount it. Without that, a pod's end was
counted against the old scale — one healthy pod short, the PDB without room — until the
workload's next pod event: cluster-autoscaler refused drains (`not enough pod disruption
budget`) the simulator, whose pods leave and scale together, never saw.

The workload controllers themselves are off on the benchmark's cluster
(rl/cluster/controlplane.py `REPLAYED_CONTROLLERS`): a ReplicaSet controller would keep
`replicas` pods of its template, with no per-pod lifetimes, and delete the ones the replay
creates beyond them; the trace's pods, their arrivals and durations, are the replay's.

Evictions. A pod deleted before it ended — cluster-autoscaler's drain through the Eviction API,
which honours the PDBs, or any other deletion, which a controller would also replace — has the
fate its owner gives it (`PodLedger.evicted`, the simulator's own bookkeeping): a ReplicaSet's,
StatefulSet's or ReplicationController's pod is replaced at once by a new pod `p-<row>-<n>`
that lives the rest of its lifetime, a Job's by one that starts over, a bare pod is gone. A
replacement runs from its start (it holds its requests and draws its CPU) but is Ready only
after the workload model's `pod_startup_s` (÷ speedup: KWOK's `kubejoule.io/startup`,
rl/cluster/kwok.py), so the disruption controller does not count it healthy before, and its
lifetime counts from its Ready: its life on the node is startup + lifetime, as the simulator
runs it.

Refused (`check_owned`): a trace pod owned by a DaemonSet or a kind outside those above (no
object the cluster would treat as the simulator does), and a PDB with `max_unavailable` or a
percentage over a Job's pods (the disruption controller finds no scale for a Job: its status
fails, where the simulator counts the Job's pods)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from common.jsonvalue import JsonObject
from rl.cluster.api import Api
from rl.simulation.engine.workloads import DELETED, PodLedger, WorkloadModel
from rl.simulation.traces.kubeobjects import CONTAINER, OwnerReference
from rl.simulation.traces.trace import PdbSpec, PodSpec

WORKLOAD_LABEL = "kubejoule.io/workload"
RECOUNT_ANNOTATION = "kubejoule.io/recount"  # changed to make the disruption controller recount
# kind → (apiVersion, the collection's path under the namespace)
OWNER_API: dict[str, tuple[str, str]] = {
    "ReplicaSet": ("apps/v1", "/apis/apps/v1/namespaces/{ns}/replicasets"),
    "StatefulSet": ("apps/v1", "/apis/apps/v1/namespaces/{ns}/statefulsets"),
    "ReplicationController": ("v1", "/api/v1/namespaces/{ns}/replicationcontrollers"),
    "Job": ("batch/v1", "/apis/batch/v1/namespaces/{ns}/jobs"),
}


def object_name(workload: str) -> str:
    """A workload's name as an object's and a label value (DNS-1123, ≤ 63 characters)."""
    name = "".join(c if c.isalnum() or c == "-" else "-" for c in workload.lower()).strip("-")[:63].rstrip("-")
    return name or "workload"


def workload_name(pod: PodSpec) -> str:
    """The pod's workload's object name: its `workload`, else `pod-<row>`."""
    return object_name(pod.workload or f"pod-{pod.index}")


def check_owned(pods: Sequence[PodSpec], pdbs: Sequence[PdbSpec]) -> None:
    """ValueError unless the cluster can stand for these owners and PDBs as the simulator does
    (module docstring)."""
    kinds: dict[str, str] = {}
    named: dict[str, str] = {}
    for pod in pods:
        if pod.owner_kind is None:
            continue
        workload = pod.workload or f"pod-{pod.index}"
        if named.setdefault(workload_name(pod), workload) != workload:
            raise ValueError(f"--on-cluster: workloads {named[workload_name(pod)]!r} and {workload!r} have one object "
                             f"name ({workload_name(pod)!r}; trace row {pod.index})")
        if pod.owner_kind not in OWNER_API:
            raise ValueError(f"--on-cluster with the autoscaler: trace row {pod.index} is owned by a {pod.owner_kind}; "
                             f"the cluster stands in for {', '.join(OWNER_API)} only (rl/evaluation/owners.py)")
        name = workload_name(pod)
        if kinds.setdefault(name, pod.owner_kind) != pod.owner_kind:
            raise ValueError(f"--on-cluster: workload {name!r} has pods of two owner kinds "
                             f"({kinds[name]}, {pod.owner_kind}; trace row {pod.index})")
    for pdb in pdbs:
        kind = next((p.owner_kind for p in pods if p.workload == pdb.workload), None)
        counted = pdb.min_available is not None and isinstance(pdb.min_available, int)
        if kind == "Job" and not counted:
            raise ValueError(f"--on-cluster: the PDB of {pdb.workload} (line {pdb.line}) needs its Job's scale, which "
                             "the disruption controller cannot find (only an integer min_available works for a Job)")


def owner_manifest(kind: str, name: str, replicas: int) -> JsonObject:
    """The workload's controller object (its pods come from the replay: module docstring)."""
    api_version, _ = OWNER_API[kind]
    labels = {WORKLOAD_LABEL: name}
    pod_spec: dict[str, object] = {"containers": [{"name": CONTAINER, "image": "registry.invalid/replay"}]}
    template: dict[str, object] = {"metadata": {"labels": dict(labels)}, "spec": pod_spec}
    spec: dict[str, object] = {"template": template}
    if kind == "Job":
        pod_spec["restartPolicy"] = "Never"
        spec["parallelism"] = replicas
    else:
        spec["replicas"] = replicas
        spec["selector"] = labels if kind == "ReplicationController" else {"matchLabels": labels}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "labels": labels}, "spec": spec}


def pdb_manifest(pdb: PdbSpec) -> JsonObject:
    """The trace's PDB as policy/v1 over its workload's pods (by their workload label)."""
    name = object_name(pdb.workload)
    spec: dict[str, object] = {"selector": {"matchLabels": {WORKLOAD_LABEL: name}}}
    if pdb.max_unavailable is not None:
        spec["maxUnavailable"] = pdb.max_unavailable
    else:
        spec["minAvailable"] = pdb.min_available
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": spec}


@dataclass(frozen=True)
class Incarnation:
    """What one pod object of a trace row is to run: its startup before Ready and its lifetime
    after, in trace seconds (the first: no startup, the trace's duration)."""

    row: int
    number: int  # 0: the trace's own pod; n: its n-th replacement
    startup_s: float
    lifetime_s: float

    @property
    def name(self) -> str:
        return f"p-{self.row}" if self.number == 0 else f"p-{self.row}-{self.number}"


def parse_name(name: str) -> tuple[int, int] | None:
    """`p-<row>` / `p-<row>-<n>` → (row, n); None for any other pod."""
    parts = name.split("-")
    if parts[0] != "p" or len(parts) not in (2, 3) or not all(p.isdigit() for p in parts[1:]):
        return None
    return int(parts[1]), int(parts[2]) if len(parts) == 3 else 0


class Workloads:
    """The run's owners and PDBs on the cluster, each owner's scale kept at its workload's
    existing pods, and each evicted pod's fate and replacement (module docstring). Thread-safe:
    the pod watch reports starts, ends and evictions; the replay creates pods."""

    def __init__(self, pods: Sequence[PodSpec], model: WorkloadModel) -> None:
        self._pods = pods
        self._model = model
        self._ledger = PodLedger(pods, model)
        self._lock = threading.Lock()
        self._kinds = {workload_name(p): p.owner_kind for p in pods if p.owner_kind is not None}
        self._count: dict[str, int] = {}
        self._sent: dict[str, int] = {}
        self._uids: dict[str, str] = {}
        self._incarnation: dict[int, Incarnation] = {}
        self._started: dict[int, float] = {}
        self._budgeted = {object_name(pdb.workload) for pdb in model.pdbs}
        self._retired: set[int] = set()  # rows whose owner was scaled down ahead of their end
        self._touch: set[str] = set()  # PDBs to recount at the next sync
        self._recounts = 0

    def install(self, api: Api, namespace: str) -> None:
        """Every owner (at 0 replicas) and every PDB in `namespace`."""
        for name, kind in self._kinds.items():
            created = api.request("POST", OWNER_API[kind][1].format(ns=namespace), owner_manifest(kind, name, 0))
            self._uids[name] = created["metadata"]["uid"]
            self._sent[name] = 0
        for pdb in self._model.pdbs:
            api.request("POST", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", pdb_manifest(pdb))

    def owner_reference(self, pod: PodSpec) -> OwnerReference | None:
        if pod.owner_kind is None:
            return None
        name = workload_name(pod)
        return {"apiVersion": OWNER_API[pod.owner_kind][0], "kind": pod.owner_kind, "name": name,
                "uid": self._uids[name], "controller": True, "blockOwnerDeletion": True}

    def arrived(self, row: int) -> Incarnation:
        """The trace's pod of `row` is created: its first incarnation."""
        with self._lock:
            self._ledger.arrived(row)
            self._change(row, +1)
            first = Incarnation(row, 0, 0.0, self._pods[row].duration_s)
            self._incarnation[row] = first
            return first

    def started(self, row: int, number: int, at_s: float) -> None:
        """Incarnation `number` of `row` was seen running at `at_s` (trace s)."""
        with self._lock:
            if self._incarnation.get(row) is not None and self._incarnation[row].number == number \
                    and row not in self._started:
                self._ledger.started(row, at_s)
                self._started[row] = at_s

    def retire_ending(self, now_s: float, lead_s: float) -> None:
        """Scale down the owner of each running pod that ends within `lead_s` of `now_s` (trace
        s), ahead of the end, as a controller would (module docstring)."""
        with self._lock:
            for row, start in self._started.items():
                incarnation = self._incarnation[row]
                if row not in self._retired and start + incarnation.startup_s + incarnation.lifetime_s <= now_s + lead_s:
                    self._retired.add(row)
                    self._change(row, -1, touch=False)

    def ended(self, row: int) -> None:
        with self._lock:
            self._ledger.finished(row)
            self._started.pop(row, None)
            if row in self._retired:
                self._retired.discard(row)
                self._touch_pdb(row)
            else:
                self._change(row, -1)

    def evicted(self, row: int, number: int, at_s: float) -> Incarnation | None:
        """Incarnation `number` of `row` went before it ended, at `at_s`: its replacement (None:
        a bare pod, gone for good; or a stale report about an older incarnation)."""
        with self._lock:
            current = self._incarnation.get(row)
            if current is None or current.number != number:
                return None
            start = self._started.pop(row, None)
            if row in self._retired:  # scaled down for an end that now will not come: its replacement runs
                self._retired.discard(row)
                self._change(row, +1)
            plan = self._ledger.run_plan_s(row)
            if start is None:  # never seen running: nothing done
                self._ledger.started(row, at_s)
            left = plan if start is None else max(0.0, plan - (at_s - start))
            fate = self._ledger.evicted(row, left)
            if fate == DELETED:
                self._change(row, -1)
                return None
            startup = self._model.pod_startup_s
            following = Incarnation(row, number + 1, startup, self._ledger.run_plan_s(row) - startup)
            self._incarnation[row] = following
            return following

    def _change(self, row: int, by: int, touch: bool = True) -> None:
        pod = self._pods[row]
        if pod.owner_kind is not None:
            name = workload_name(pod)
            self._count[name] = self._count.get(name, 0) + by
        if touch:
            self._touch_pdb(row)

    def _touch_pdb(self, row: int) -> None:
        name = workload_name(self._pods[row])
        if name in self._budgeted:
            self._touch.add(name)

    def sync(self, api: Api, namespace: str) -> None:
        """Each owner's scale to its workload's existing pods, where it changed; then each PDB
        to recount touched (module docstring)."""
        with self._lock:
            changed = {n: c for n, c in self._count.items() if self._sent.get(n) != c}
            touched, self._touch = sorted(self._touch), set()
        for name, count in changed.items():
            kind = self._kinds[name]
            field = "parallelism" if kind == "Job" else "replicas"
            api.request("PATCH", f"{OWNER_API[kind][1].format(ns=namespace)}/{name}", {"spec": {field: count}},
                        content_type="application/merge-patch+json")
            self._sent[name] = count
        for name in touched:
            self._recounts += 1
            api.request("PATCH", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}",
                        {"metadata": {"annotations": {RECOUNT_ANNOTATION: str(self._recounts)}}},
                        content_type="application/merge-patch+json")
