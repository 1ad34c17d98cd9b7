"""Each machine's power state, and the power actions cluster-autoscaler asks for, under the
safety rules (docs/bare-metal.md).

A machine is `off`, `booting` (Reset On asked; its Node not Ready yet), `running` (its Node
Ready), `stopping` (GracefulShutdown asked, ForceOff after `graceful_shutdown_seconds`) or
`failed` (a Reset accepted but not performed, a Node that never registered, a machine that will
not switch off): cluster-autoscaler sees a failed machine as an instance with an error and backs
off its group. A machine whose BMC does not answer keeps its state, is flagged `unreachable`,
is reported (an Event, a metric) and is left alone until it answers again.

A power action is asked only for a machine on the allow-list; switching off only when its Node
is cordoned and runs nothing but DaemonSet, mirror and finished pods, and never below the
group's minimum. In shadow mode every check runs and the answer is an error saying what would
have been done (an Event and a Node annotation record it), so cluster-autoscaler undoes its own
side and nothing is switched."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from common.jsonvalue import subobject
from scheduler.autoscaler.provider.backend import (
    OFF,
    ON,
    POWERING_ON,
    RESET_FORCE,
    RESET_GRACEFUL,
    RESET_ON,
    BackendError,
    PowerBackend,
)
from scheduler.autoscaler.provider.metrics import ProviderMetrics
from scheduler.autoscaler.provider.safety import blocking_pods, cordoned, most_efficient, ready
from scheduler.autoscaler.provider.settings import GROUP_LABEL, Group, Machine, ProviderSettings

log = logging.getLogger("kubejoule.cloudprovider")

OFF_STATE, BOOTING, RUNNING, STOPPING, FAILED = "off", "booting", "running", "stopping", "failed"
STATES = (OFF_STATE, BOOTING, RUNNING, STOPPING, FAILED)
SHADOW_ANNOTATION = "kubejoule.io/power-shadow"


class Kube(Protocol):
    def node(self, name: str) -> dict[str, object] | None: ...
    def pods_on(self, node: str) -> list[dict[str, object]]: ...
    def delete_node(self, name: str) -> None: ...
    def annotate(self, name: str, annotations: dict[str, str]) -> None: ...
    def event(self, node: str, uid: str, reason: str, message: str, warning: bool = False) -> None: ...


class ProviderError(Exception):
    """A call refused; `code` is the gRPC status name it is answered with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Tracked:
    machine: Machine
    state: str = OFF_STATE
    since: float = 0.0  # when the last Reset was asked (or the state entered)
    forced: bool = False
    unreachable: str = ""  # the BMC's last error while it does not answer
    error: str = ""  # why it failed
    provider_id: str = ""  # its Node's spec.providerID once seen
    power: str = ""  # the last PowerState read


class Fleet:
    def __init__(self, settings: ProviderSettings, backend: PowerBackend, kube: Kube,
                 metrics: ProviderMetrics | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.backend = backend
        self.kube = kube
        self.metrics = metrics or ProviderMetrics()
        self.clock = clock
        self.tracked = {m.node: Tracked(m) for m in settings.machines()}
        self.templates: dict[str, dict[str, object]] = {}  # group → the last Node of it seen
        self._lock = threading.RLock()
        self._refreshing = threading.Lock()
        self.refreshed = 0
        self._started = False

    # -- reading the machines -----------------------------------------------------------------

    def refresh(self) -> None:
        """Read every machine's power state and its Node; move the states on."""
        # One refresh at a time (CA's Refresh and the provider's own loop), so a reading is never
        # applied after a newer one; the BMCs are read in parallel, outside the state lock, so a
        # slow BMC delays neither CA's other calls nor the other machines' readings.
        with self._refreshing:
            machines = [t.machine for t in self.tracked.values()]
            with ThreadPoolExecutor(max_workers=max(1, min(16, len(machines))),
                                    thread_name_prefix="bmc") as pool:
                readings = dict(zip([m.node for m in machines], pool.map(self._read, machines), strict=True))
            with self._lock:
                for name, reading in readings.items():
                    self._advance(self.tracked[name], reading)
                self._started = True
                self.refreshed += 1
                for group in self.settings.groups:
                    for state in STATES:
                        count = sum(self.tracked[m.node].state == state for m in group.machines)
                        self.metrics.machines.labels(group.id, state).set(count)

    def _read(self, machine: Machine) -> str | BackendError:
        try:
            return self.backend.power_state(machine)
        except BackendError as exc:
            return exc

    def _advance(self, t: Tracked, reading: str | BackendError) -> None:
        m, now = t.machine, self.clock()
        if isinstance(reading, BackendError):
            self.metrics.bmc_errors.labels(m.group).inc()
            if not t.unreachable:
                log.warning("machine %s: BMC not answering, left alone: %s", m.node, reading)
                self._event(m, "BMCUnreachable", f"BMC not answering, machine left alone: {reading}", True)
            t.unreachable = str(reading)
            return
        if t.unreachable:
            log.info("machine %s: BMC answers again (%s)", m.node, reading)
            t.unreachable = ""
        node = self._node(m)
        if node is not None:
            t.provider_id = str(subobject(node, "spec").get("providerID") or "")
            if ready(node):
                self.templates[m.group] = node
        power = t.power = reading
        if not self._started:  # first reading: take the machines as they are
            if power == OFF:
                t.state = OFF_STATE
            elif node is not None and ready(node):
                t.state = RUNNING
            else:
                self._enter(t, BOOTING if power != OFF else OFF_STATE, now)
            return
        if t.state == BOOTING:
            if node is not None and ready(node) and power != OFF:
                self._enter(t, RUNNING, now)
                self._event(m, "PoweredOn", "machine on and its Node Ready")
            elif power == OFF and now - t.since > self.settings.power_state_deadline_seconds:
                self._fail(t, f"the BMC accepted Reset On but the machine is still off after "
                              f"{self.settings.power_state_deadline_seconds:g} s")
            elif now - t.since > self.settings.boot_deadline_seconds:
                self._fail(t, f"Node {m.node} did not register Ready within "
                              f"{self.settings.boot_deadline_seconds:g} s of power on")
        elif t.state == STOPPING:
            self._stopping(t, node, power, now)
        elif t.state == RUNNING and power == OFF:
            self._enter(t, OFF_STATE, now)
            self._event(m, "PoweredOffOutside", "machine found off (switched off outside kubejoule)", True)
        elif t.state == OFF_STATE and power in (ON, POWERING_ON):
            self._enter(t, RUNNING if node is not None and ready(node) else BOOTING, now)
        elif t.state == FAILED and node is not None and ready(node) and power != OFF:
            self._enter(t, RUNNING, now)  # a late registration
            t.error = ""

    def _stopping(self, t: Tracked, node: dict[str, object] | None, power: str, now: float) -> None:
        m = t.machine
        if power == OFF:
            self._enter(t, OFF_STATE, now)
            if node is not None and not self.settings.keep_node_object:
                self.kube.delete_node(m.node)
            self._event(m, "PoweredOff", "machine switched off" + (" (forced)" if t.forced else ""))
            return
        if not t.forced and now - t.since > self.settings.graceful_shutdown_seconds:
            blocking = blocking_pods(self.kube.pods_on(m.node)) if node is not None else []
            if blocking:  # never force a machine off with pods on it
                self._fail(t, f"still on after GracefulShutdown and pods are on it again: {', '.join(blocking[:5])}")
                return
            if self._reset(m, RESET_FORCE, "force_off"):
                t.forced, t.since = True, now
                self._event(m, "ForceOff", f"not off {self.settings.graceful_shutdown_seconds:g} s after GracefulShutdown: ForceOff")
        elif t.forced and now - t.since > self.settings.power_state_deadline_seconds:
            self._fail(t, "ForceOff accepted but the machine is still on")

    # -- what cluster-autoscaler asks ---------------------------------------------------------

    def group(self, group_id: str) -> Group:
        group = self.settings.group(group_id)
        if group is None:
            raise ProviderError("NOT_FOUND", f"no node group {group_id!r}")
        return group

    def group_of_node(self, name: str, provider_id: str, labels: dict[str, str]) -> Group | None:
        """The node's group: by providerID (kubejoule://NODE or the one its Node carries), else by
        the group label together with the Node name, else by the Node name; None: not ours."""
        with self._lock:
            for t in self.tracked.values():
                if provider_id and provider_id in (t.machine.provider_id, t.provider_id):
                    return self.settings.group(t.machine.group)
            t = self.tracked.get(name)  # type: ignore[assignment]
            if t is None:
                return None
            label = labels.get(GROUP_LABEL)
            if label and label != t.machine.group:
                log.warning("node %s has %s=%s but is configured in group %s", name, GROUP_LABEL, label, t.machine.group)
            return self.settings.group(t.machine.group)

    def target_size(self, group_id: str) -> int:
        with self._lock:
            return sum(self.tracked[m.node].state in (BOOTING, RUNNING, FAILED) for m in self.group(group_id).machines)

    def instances(self, group_id: str) -> list[Tracked]:
        with self._lock:
            return [self.tracked[m.node] for m in self.group(group_id).machines
                    if self.tracked[m.node].state != OFF_STATE]

    def template(self, group_id: str) -> dict[str, object] | None:
        """A Node of the group for CA's template: the last one seen Ready, else one made from the
        configuration's `capacity` and `labels` (scale from zero after a restart), else None."""
        group = self.group(group_id)
        with self._lock:
            seen = self.templates.get(group_id)
        if seen is not None:
            return seen
        machine = group.machines[0]
        if not machine.capacity:
            return None
        return {
            "metadata": {"labels": {GROUP_LABEL: group_id, **machine.labels}},
            "spec": {},
            "status": {"capacity": dict(machine.capacity), "allocatable": dict(machine.capacity)},
        }

    def instance_id(self, t: Tracked) -> str:
        return t.provider_id or t.machine.provider_id

    def increase(self, group_id: str, delta: int) -> list[str]:
        """Power on `delta` switched-off machines of the group, the most efficient first; the
        Node names. All or nothing: ProviderError when fewer may be powered on."""
        group = self.group(group_id)
        if delta <= 0:
            raise ProviderError("INVALID_ARGUMENT", f"delta must be positive, got {delta}")
        with self._lock:
            target = self.target_size(group_id)
            if target + delta > group.max_size:
                raise ProviderError("INVALID_ARGUMENT", f"{group_id}: {target} + {delta} is over the maximum {group.max_size}")
            off = [self.tracked[m.node] for m in group.machines if self.tracked[m.node].state == OFF_STATE]
            usable = [t.machine for t in off if t.machine.node in self.settings.allow and not t.unreachable]
            chosen = most_efficient(usable, self.settings.reference_utilization)[:delta]
            if len(chosen) < delta:
                skipped = [f"{t.machine.node} ({'BMC: ' + t.unreachable if t.unreachable else 'not on the allow-list'})"
                           for t in off if t.machine not in usable]
                raise ProviderError("FAILED_PRECONDITION", f"{group_id}: only {len(chosen)} of {delta} machine(s) may be "
                                    f"powered on" + (f"; left alone: {', '.join(skipped)}" if skipped else ""))
            if self.settings.shadow:
                for m in chosen:
                    self._shadow(m, "power_on", "would power on (shadow mode)")
                raise ProviderError("FAILED_PRECONDITION", f"shadow mode: would power on {', '.join(m.node for m in chosen)}")
            failed = []
            for m in chosen:
                if self._reset(m, RESET_ON, "power_on"):
                    self._enter(self.tracked[m.node], BOOTING, self.clock())
                    self._event(m, "PoweringOn", f"Reset On asked for cluster-autoscaler (group {group_id})")
                else:
                    failed.append(m.node)
            if failed:
                raise ProviderError("UNAVAILABLE", f"{group_id}: the BMC of {', '.join(failed)} refused or did not answer Reset On")
            return [m.node for m in chosen]

    def delete_nodes(self, group_id: str, nodes: Sequence[tuple[str, str]]) -> list[str]:
        """Switch off the machines of (name, providerID) after the checks (all or nothing)."""
        group = self.group(group_id)
        with self._lock:
            chosen: list[Tracked] = []
            for name, provider_id in nodes:
                found = self.group_of_node(name, provider_id, {})
                t = next((x for x in self.tracked.values() if provider_id and provider_id in (x.machine.provider_id, x.provider_id)), None) \
                    or self.tracked.get(name)
                if found is None or t is None or found.id != group_id:
                    raise ProviderError("NOT_FOUND", f"node {name or provider_id} is not a machine of group {group_id}")
                chosen.append(t)
            problems = [p for t in chosen if (p := self._why_not_off(t))]
            serving = sum(self.tracked[m.node].state in (BOOTING, RUNNING) for m in group.machines)
            leaving = sum(t.state in (BOOTING, RUNNING) for t in chosen)
            if serving - leaving < group.min_size:
                problems.append(f"{group_id} would go below its minimum {group.min_size} ({serving} - {leaving})")
            if problems:
                for t in chosen:
                    self._event(t.machine, "PowerOffRefused", "; ".join(problems), True)
                    self.metrics.actions.labels(group_id, "graceful_shutdown", "refused").inc()
                raise ProviderError("FAILED_PRECONDITION", "; ".join(problems))
            if self.settings.shadow:
                for t in chosen:
                    self._shadow(t.machine, "graceful_shutdown", "would switch off (shadow mode)")
                raise ProviderError("FAILED_PRECONDITION", f"shadow mode: would switch off {', '.join(t.machine.node for t in chosen)}")
            failed = []
            for t in chosen:
                if t.state == FAILED and t.power == OFF:  # a Reset On never performed: nothing to switch
                    self._enter(t, OFF_STATE, self.clock())
                    t.error = ""
                    continue
                kind, action = (RESET_FORCE, "force_off") if t.state in (BOOTING, FAILED) else (RESET_GRACEFUL, "graceful_shutdown")
                if self._reset(t.machine, kind, action):
                    self._enter(t, STOPPING, self.clock())
                    t.forced = kind == RESET_FORCE
                    self._event(t.machine, "PoweringOff", f"Reset {kind} asked for cluster-autoscaler (group {group_id})")
                else:
                    failed.append(t.machine.node)
            if failed:
                raise ProviderError("UNAVAILABLE", f"the BMC of {', '.join(failed)} refused or did not answer the Reset")
            return [t.machine.node for t in chosen]

    def decrease_target(self, group_id: str, delta: int) -> list[str]:
        """Give up `-delta` machines still booting whose Node has not registered."""
        group = self.group(group_id)
        if delta >= 0:
            raise ProviderError("INVALID_ARGUMENT", f"delta must be negative, got {delta}")
        with self._lock:
            booting = [self.tracked[m.node] for m in group.machines
                       if self.tracked[m.node].state == BOOTING and self._node(m) is None]
            if len(booting) < -delta:
                raise ProviderError("FAILED_PRECONDITION", f"{group_id}: only {len(booting)} machine(s) booting without a Node")
            return self.delete_nodes(group_id, [(t.machine.node, "") for t in booting[:-delta]])

    # -- helpers ------------------------------------------------------------------------------

    def _why_not_off(self, t: Tracked) -> str:
        m = t.machine
        if m.node not in self.settings.allow:
            return f"{m.node} is not on the allow-list"
        if t.unreachable:
            return f"{m.node}: BMC not answering ({t.unreachable})"
        if t.state == STOPPING:
            return f"{m.node} is already switching off"
        if t.state == OFF_STATE:
            return f"{m.node} is already off"
        node = self._node(m)
        if node is None:
            return ""
        if not cordoned(node):
            return f"{m.node} is not cordoned"
        blocking = blocking_pods(self.kube.pods_on(m.node))
        if blocking:
            return f"{m.node} still runs {len(blocking)} pod(s) other than DaemonSet and mirror pods: {', '.join(blocking[:5])}"
        return ""

    def _node(self, m: Machine) -> dict[str, object] | None:
        return self.kube.node(m.node)

    def _reset(self, m: Machine, kind: str, action: str) -> bool:
        try:
            self.backend.reset(m, kind)
        except BackendError as exc:
            self.metrics.actions.labels(m.group, action, "refused" if exc.refused else "failed").inc()
            log.warning("machine %s: Reset %s: %s", m.node, kind, exc)
            self._event(m, "PowerActionFailed", f"Reset {kind}: {exc}", True)
            return False
        self.metrics.actions.labels(m.group, action, "done").inc()
        log.info("machine %s: Reset %s asked", m.node, kind)
        return True

    def _shadow(self, m: Machine, action: str, what: str) -> None:
        self.metrics.actions.labels(m.group, action, "shadow").inc()
        log.info("shadow mode: machine %s %s", m.node, what)
        self._event(m, "ShadowPowerAction", what)
        if self._node(m) is not None:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self.kube.annotate(m.node, {SHADOW_ANNOTATION: f"{stamp} {what}"})

    def _enter(self, t: Tracked, state: str, now: float) -> None:
        t.state, t.since = state, now
        if state != STOPPING:
            t.forced = False

    def _fail(self, t: Tracked, why: str) -> None:
        self._enter(t, FAILED, self.clock())
        t.error = why
        log.warning("machine %s failed: %s", t.machine.node, why)
        self._event(t.machine, "PowerActionFailed", why, True)

    def _event(self, m: Machine, reason: str, message: str, warning: bool = False) -> None:
        node = self.kube.node(m.node) if reason != "PoweredOff" else None
        uid = str(subobject(node or {}, "metadata").get("uid") or "")
        self.kube.event(m.node, uid, reason, message, warning)
