"""One trace replayed on a real control plane, and every pod's life recorded from the API.

Each trace pod becomes a v1.Pod (its requests, the trace's kube objects:
rl/simulation/traces/kubeobjects.py, and its `safe-to-evict` annotation when the trace gives one)
named `p-<row>` in a namespace of the run's own, created at its
arrival ÷ `speedup` after the replay starts, for the policy's `schedulerName`, with KWOK's
`kubejoule.io/duration` annotation set to its duration ÷ `speedup` (KWOK ends it Succeeded then:
rl/cluster/kwok.py). Without `workloads` it is a bare pod; with them (the autoscaled benchmark:
rl/evaluation/owners.py) an owned pod carries an ownerReference to its workload's real
controller object, and a pod deleted before it ended is replaced as its owner would (a pod
`p-<row>-<n>`, created at once; a bare pod is not). A watch on the namespace (listed first, then
watched from the list's resourceVersion and resumed from the last one seen when the server ends
it) notes when each pod object is first seen bound, Running, Unschedulable, Succeeded and deleted
before it ended (evicted: cluster-autoscaler's drain), on this process's monotonic clock; the
record is in trace seconds: (seen − replay start) × speedup. The replay ends when every trace
row has ended (its last incarnation Succeeded) or is gone (a bare pod evicted).

Faults stop the replay with what was recorded so far and the reason (`Recording.failure`): a
component of the cluster or of the policy that exits, a watch that fails (an error event, a
broken connection: events may have been lost, so the record can no longer be trusted), pods that
do not end within the trace's time (replacements' included, with a margin)."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from common.jsonvalue import subobject, subobjects
from rl.cluster.api import Api, ApiError
from rl.cluster.kwok import DURATION_ANNOTATION, STARTUP_ANNOTATION, go_duration
from rl.evaluation.owners import WORKLOAD_LABEL, Incarnation, Workloads, parse_name
from rl.simulation.recorded import PodLife
from rl.simulation.traces.kubeobjects import SAFE_TO_EVICT_ANNOTATION, OwnerReference, PodObject
from rl.simulation.traces.scenario import PodSpec

RUN_LABEL = "kubejoule.io/replay"
# Past the trace's end (÷ speedup), how long pods may still take to end before the run fails.
END_MARGIN_WALL_S = 60.0
WATCH_SLACK_WALL_S = 120  # the pod watch outlives the replay's end by this much (wall seconds)
# Pods that never bind stop the run once nothing else runs and this long has passed.
STUCK_WALL_S = 20.0
POLL_WALL_S = 0.2
# An owned pod's owner is scaled down this long (wall) before the pod's end (rl/evaluation/owners.py).
RETIRE_LEAD_WALL_S = 0.5


Key = tuple[int, int]  # (trace row, incarnation: 0 the trace's pod, n its n-th replacement)


@dataclass
class Recording:
    """What the watch saw, in trace seconds, per pod object (`Key`), and why the replay stopped
    early (None: it ran to its end)."""

    speedup: float
    t0: float = 0.0
    bound: dict[Key, tuple[float, str]] = field(default_factory=dict)  # → (time, node)
    running: dict[Key, float] = field(default_factory=dict)
    ended: dict[Key, float] = field(default_factory=dict)
    unschedulable: set[int] = field(default_factory=set)  # rows
    evicted: dict[Key, float] = field(default_factory=dict)  # deleted before it ended
    gone: set[int] = field(default_factory=set)  # rows that will not run again
    replacements: deque[Incarnation] = field(default_factory=deque)  # to create, oldest first
    horizon_s: float = 0.0  # when the last pod should end, replacements included
    created: int = 0  # the trace's pods created
    failure: str | None = None
    end_s: float = 0.0

    def trace_s(self, monotonic_s: float) -> float:
        return (monotonic_s - self.t0) * self.speedup

    @property
    def done(self) -> int:
        """Rows that will not run again: ended, or evicted and not replaced (a bare pod)."""
        return len(self.gone)

    def lives(self) -> list[PodLife]:
        """Every bound pod's life: its start is when it was seen Running (else bound); an evicted
        pod's ends at its eviction."""
        return [
            PodLife(key[0], node, self.running.get(key, at), self.ended.get(key, self.evicted.get(key)),
                    evicted=key in self.evicted)
            for key, (at, node) in sorted(self.bound.items())
        ]


def pod_manifest(pod: PodSpec, scheduler_name: str, speedup: float, run: str,
                 incarnation: Incarnation | None = None, owner: OwnerReference | None = None) -> PodObject:
    """The trace pod (or its replacement `incarnation`) as a v1.Pod; `owner`: its ownerReference
    (rl/evaluation/owners.py), None: a bare pod."""
    life = incarnation or Incarnation(pod.index, 0, 0.0, pod.duration_s)
    body = pod.pod_object()
    body["metadata"] = {
        "name": life.name,
        "labels": {RUN_LABEL: run},
        "annotations": {DURATION_ANNOTATION: go_duration(life.lifetime_s / speedup)},
    }
    if life.startup_s > 0:
        body["metadata"]["annotations"][STARTUP_ANNOTATION] = go_duration(life.startup_s / speedup)
    if owner is not None:
        body["metadata"]["ownerReferences"] = [owner]
        body["metadata"]["labels"][WORKLOAD_LABEL] = owner["name"]
    if pod.safe_to_evict is not None:  # what cluster-autoscaler's drain reads, as the simulator does
        body["metadata"]["annotations"][SAFE_TO_EVICT_ANNOTATION] = str(pod.safe_to_evict).lower()
    body["spec"]["schedulerName"] = scheduler_name
    body["spec"]["containers"][0]["image"] = "registry.invalid/replay"
    body["spec"].pop("nodeName", None)
    return body


class ResourceWatch(ABC):
    """A collection listed, then watched from the list's resourceVersion (resumed from the last
    one seen when the server ends the watch), in a thread; each object seen goes to `_note`. Any
    failure sets `error` (events may have been lost: the record can no longer be trusted)."""

    def __init__(self, api: Api, path: str, recording: Recording, timeout_s: int) -> None:
        self._api = api
        self._path = path
        self._recording = recording
        self._timeout_s = timeout_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch {path}", daemon=True)
        self.error: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    @abstractmethod
    def _note(self, obj: Mapping[str, object], event: str) -> None:
        """Record what `obj` (seen in an `event`: ADDED, MODIFIED, DELETED, or LISTED) tells."""

    def _run(self) -> None:
        try:
            listed = self._api.request("GET", self._path)
            for item in subobjects(listed, "items"):
                self._note(item, "LISTED")
            version = listed["metadata"]["resourceVersion"]
            while not self._stopped.is_set():
                for event in self._api.watch(f"{self._path}?resourceVersion={version}&allowWatchBookmarks=true",
                                             timeout_seconds=self._timeout_s):
                    obj = subobject(event, "object")
                    if event.get("type") == "ERROR":
                        message = obj.get("message", event)
                        raise RuntimeError(f"error event: {message}")
                    version = subobject(obj, "metadata").get("resourceVersion", version)
                    if event.get("type") != "BOOKMARK":
                        self._note(obj, str(event.get("type")))
                    if self._stopped.is_set():
                        return
                self._stopped.wait(POLL_WALL_S)  # the server ended the watch: resume where it was
        except Exception as exc:  # noqa: BLE001 (any failure of the watch ends the record)
            if not self._stopped.is_set():
                self.error = f"the watch of {self._path} dropped: {exc}"


class PodWatch(ResourceWatch):
    """The namespace's pods into a Recording (module docstring); with `workloads`, each start,
    end and eviction also goes to them, and an evicted pod's replacement is queued in the
    recording."""

    def __init__(self, api: Api, namespace: str, recording: Recording, timeout_s: int,
                 workloads: Workloads | None = None) -> None:
        super().__init__(api, f"/api/v1/namespaces/{namespace}/pods", recording, timeout_s)
        self._workloads = workloads

    def _note(self, pod: Mapping[str, object], event: str) -> None:
        metadata = subobject(pod, "metadata")
        key = parse_name(str(metadata.get("name", "")))
        if key is None:
            return
        row, record, workloads = key[0], self._recording, self._workloads
        at = record.trace_s(time.monotonic())
        node = subobject(pod, "spec").get("nodeName")
        if isinstance(node, str) and node and key not in record.bound:
            record.bound[key] = (at, node)
        status = subobject(pod, "status")
        phase = status.get("phase")
        if phase in ("Running", "Succeeded") and key not in record.running:
            record.running[key] = at
            if workloads is not None:
                workloads.started(row, key[1], at)
        if phase == "Succeeded" and key not in record.ended:
            record.ended[key] = at
            record.gone.add(row)
            if workloads is not None:
                workloads.ended(row)
        going = event == "DELETED" or metadata.get("deletionTimestamp")
        if going and key not in record.ended and key not in record.evicted:
            # Deleted before it ended (cluster-autoscaler's drain): replaced as its owner would.
            record.evicted[key] = at
            following = workloads.evicted(row, key[1], at) if workloads is not None else None
            if following is None:
                record.gone.add(row)
            else:
                record.horizon_s = max(record.horizon_s, at + following.startup_s + following.lifetime_s)
                record.replacements.append(following)
        for condition in subobjects(status, "conditions"):
            if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
                record.unschedulable.add(row)


def replay(
    api: Api,
    namespace: str,
    pods: Sequence[PodSpec],
    scheduler_name: str,
    speedup: float,
    dead: Callable[[], list[str]],
    progress: Callable[[str], None] = lambda _m: None,
    recording: Recording | None = None,
    watches: Sequence[ResourceWatch] = (),
    stuck_wall_s: float = STUCK_WALL_S,
    workloads: Workloads | None = None,
) -> Recording:
    """Replay `pods` into `namespace` (which exists) for `scheduler_name` (module docstring);
    `dead()` names the components that have exited (checked throughout). `watches`: more
    watches into `recording` (the nodes', rl/evaluation/node_watch.py), started and stopped with
    the pods'; `stuck_wall_s`: how long nothing may run while pods wait; `workloads`: the
    trace's owners, installed in `namespace` (rl/evaluation/owners.py: the replay creates an
    evicted owned pod's replacement, and keeps the owners' scale), None: bare pods."""
    recording = recording or Recording(speedup)
    recording.horizon_s = max((p.submit_s + p.duration_s for p in pods), default=0.0)
    watch = PodWatch(api, namespace, recording, int(recording.horizon_s / speedup + END_MARGIN_WALL_S + WATCH_SLACK_WALL_S),
                     workloads)
    order = sorted(pods, key=lambda p: p.submit_s)
    path = f"/api/v1/namespaces/{namespace}/pods"
    errors: list[str] = []

    def create(pod: PodSpec, incarnation: Incarnation) -> None:
        owner = workloads.owner_reference(pod) if workloads is not None else None
        try:
            api.request("POST", path, pod_manifest(pod, scheduler_name, speedup, namespace, incarnation, owner))
        except (ApiError, OSError) as exc:
            errors.append(f"creating pod {incarnation.name}: {exc}")

    def sync() -> None:
        try:
            if workloads is not None:
                workloads.sync(api, namespace)
        except (ApiError, OSError) as exc:
            errors.append(f"scaling the workloads' owners: {exc}")

    recording.t0 = time.monotonic()
    everything = [watch, *watches]
    for each in everything:
        each.start()
    last_report = 0.0
    stuck_since: float | None = None
    syncing: Future[None] | None = None
    with ThreadPoolExecutor(4) as pool, ThreadPoolExecutor(1) as scaler:
        while True:
            now = time.monotonic()
            while recording.created < len(order) and order[recording.created].submit_s / speedup <= now - recording.t0:
                pod = order[recording.created]
                first = workloads.arrived(pod.index) if workloads is not None else Incarnation(pod.index, 0, 0.0,
                                                                                               pod.duration_s)
                pool.submit(create, pod, first)
                recording.created += 1
            while recording.replacements:
                following = recording.replacements.popleft()
                pool.submit(create, pods[following.row], following)
            if workloads is not None:
                workloads.retire_ending(recording.trace_s(now), RETIRE_LEAD_WALL_S * speedup)
            if syncing is None or syncing.done():
                syncing = scaler.submit(sync)
            failure = _failure(dead(), next((w.error for w in everything if w.error), None), errors)
            ended = recording.done
            if failure is None and ended == len(pods):
                break
            if failure is None and now - recording.t0 > recording.horizon_s / speedup + END_MARGIN_WALL_S:
                failure = (f"{len(pods) - ended} of {len(pods)} pods had not ended {END_MARGIN_WALL_S:g} s "
                           "(wall) after the trace's end")
            active = sum(1 for key in list(recording.bound) if key not in recording.ended and key not in recording.evicted)
            if recording.created == len(order) and active == 0 and ended < len(pods):
                stuck_since = stuck_since or now
                if failure is None and now - stuck_since > stuck_wall_s:
                    failure = (f"{len(pods) - ended} pods were never bound by {scheduler_name} and nothing "
                               f"else runs ({len(recording.unschedulable)} reported Unschedulable)")
            else:
                stuck_since = None
            if failure is not None:
                recording.failure = failure
                break
            if now - last_report > 10.0:
                last_report = now
                progress(f"{recording.created}/{len(pods)} created, {len(recording.bound)} bound, {ended} ended, "
                         f"trace t={recording.trace_s(now):.0f} s")
            time.sleep(POLL_WALL_S)
    recording.end_s = max([*recording.ended.values(), *recording.evicted.values()], default=0.0) \
        if recording.failure is None else recording.trace_s(time.monotonic())
    for each in everything:
        each.stop()
    return recording


def _failure(dead: list[str], watch_error: str | None, errors: list[str]) -> str | None:
    if dead:
        return f"{', '.join(dead)} exited during the run"
    if watch_error:
        return watch_error
    if errors:
        return errors[0]
    return None
