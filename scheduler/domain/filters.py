"""kube-scheduler's default node filters, on plain data.

The standalone scheduler, the extender and the simulator (`rl/`) all decide feasibility with
these checks, so a pod that the simulator places is a pod the real scheduler could place. Each
check is written once: the framework's Filter plugins (`scheduler/plugins/`) run the same
functions over a candidate batch — the spec checks once per pod shape, the resource checks
(`too_many_pods`, `lacks`) on arrays — and `filter_nodes` runs them node by node with each
node's reasons.

What is reproduced, in kube-scheduler's order (the first failing filter decides a node's
reasons, as in the scheduling framework):

1. NodeUnschedulable: `spec.unschedulable` unless the pod tolerates
   `node.kubernetes.io/unschedulable:NoSchedule` → "node(s) were unschedulable".
2. TaintToleration: the first NoSchedule/NoExecute taint no toleration matches →
   "node(s) had untolerated taint {key: value}". A node that is not Ready is treated as carrying
   `node.kubernetes.io/not-ready:NoSchedule`, which is what the node lifecycle controller puts on
   it in a real cluster (kube-scheduler itself has no Ready check; it relies on that taint), so
   pods that tolerate it (DaemonSet-like pods) still fit.
3. NodeAffinity: `nodeSelector` and required node affinity →
   "node(s) didn't match Pod's node affinity/selector".
4. NodeResourcesFit: pods, cpu, memory, ephemeral-storage against allocatable minus the
   requests of bound and assumed pods → "Too many pods", "Insufficient cpu", …

`failure_summary()` builds the FailedScheduling message: "0/12 nodes are available: 3
Insufficient cpu, 9 node(s) didn't match Pod's node affinity/selector." ("no nodes available to
schedule pods" when there is no node at all).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, overload

from scheduler.domain.model import (
    NodeInfo,
    NodeState,
    PodInfo,
    Resources,
    SelectorRequirement,
    SelectorTerm,
    Taint,
    Toleration,
)

if TYPE_CHECKING:
    import numpy as np  # the vectorized filter's columns, as a type only: the domain imports no array library

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS = "Too many pods"

TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_DO_NOT_SCHEDULE = ("NoSchedule", "NoExecute")

FIELD_NODE_NAME = "metadata.name"


def reason_insufficient(resource: str) -> str:
    """kube-scheduler's reason for a resource the node lacks ("Insufficient cpu")."""
    return f"Insufficient {resource}"


def reason_untolerated_taint(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


# --- taints and tolerations -------------------------------------------------------------------


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether one toleration matches one taint (k8s.io/api core/v1 ToleratesTaint).

    An empty effect matches every effect; an empty key matches every key (valid only with
    Exists); Exists ignores the value; Equal (or an empty operator) compares values exactly;
    any other operator matches nothing.
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def is_tolerated(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def untolerated_taint(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration matches, or None.
    PreferNoSchedule taints never filter (they only lower the score)."""
    for taint in taints:
        if taint.effect in _DO_NOT_SCHEDULE and not is_tolerated(taint, tolerations):
            return taint
    return None


def effective_taints(node: NodeInfo) -> tuple[Taint, ...]:
    """The node's taints plus the not-ready taint a real cluster would have put on it."""
    if node.ready or any(t.key == TAINT_NOT_READY for t in node.taints):
        return node.taints
    return (*node.taints, Taint(TAINT_NOT_READY, "", "NoSchedule"))


# --- node selector and required node affinity -------------------------------------------------


def _parse_int64(text: str) -> int | None:
    # strconv.ParseInt(s, 10, 64): optional sign, decimal digits only, within int64.
    body = text[1:] if text[:1] in "+-" else text
    if not body.isdigit() or not body.isascii():
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def requirement_matches(req: SelectorRequirement, labels: Mapping[str, str]) -> bool | None:
    """Whether a label requirement holds; None when the requirement is invalid (then the whole
    term it belongs to matches nothing, as kube-scheduler's lazy-error selector does)."""
    op = req.operator
    present = req.key in labels
    if op in ("In", "NotIn"):
        if not req.values:
            return None
        inside = present and labels[req.key] in req.values
        return inside if op == "In" else not inside
    if op in ("Exists", "DoesNotExist"):
        if req.values:
            return None
        return present if op == "Exists" else not present
    if op in ("Gt", "Lt"):
        if len(req.values) != 1:
            return None
        bound = _parse_int64(req.values[0])
        if bound is None:
            return None
        if not present:
            return False
        value = _parse_int64(labels[req.key])
        if value is None:
            return False
        return value > bound if op == "Gt" else value < bound
    return None


def _field_matches(req: SelectorRequirement, node_name: str) -> bool | None:
    # Only metadata.name with In / NotIn and exactly one value is valid for matchFields.
    if req.key != FIELD_NODE_NAME or req.operator not in ("In", "NotIn") or len(req.values) != 1:
        return None
    inside = node_name in req.values
    return inside if req.operator == "In" else not inside


def term_matches(term: SelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    """Expressions and fields of one term are ANDed; an empty term matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return False
    for req in term.match_expressions:
        if requirement_matches(req, labels) is not True:
            return False
    return all(_field_matches(req, node_name) is True for req in term.match_fields)


def matches_node_selector(pod: PodInfo, node: NodeInfo) -> bool:
    """`nodeSelector` (every label equal) and required node affinity (terms ORed)."""
    labels = node.label_map
    for key, value in pod.node_selector:
        if labels.get(key) != value:
            return False
    if not pod.required_affinity:
        return True
    return any(term_matches(term, labels, node.name) for term in pod.required_affinity)


# --- resource fit ------------------------------------------------------------------------------


@overload
def too_many_pods(pods_on_node: int, allowed_pods: int) -> bool: ...
@overload
def too_many_pods(pods_on_node: np.ndarray, allowed_pods: np.ndarray) -> np.ndarray: ...
def too_many_pods(pods_on_node: int | np.ndarray, allowed_pods: int | np.ndarray) -> bool | np.ndarray:
    """NodeResourcesFit's pod count check: one more pod would pass allocatable `pods`.
    For ints or numpy arrays alike (the vectorized filter uses the same rule)."""
    return pods_on_node + 1 > allowed_pods


@overload
def lacks(want: int, allocatable: int, requested: int) -> bool: ...
@overload
def lacks(want: int, allocatable: np.ndarray, requested: np.ndarray) -> np.ndarray: ...
def lacks(want: int, allocatable: int | np.ndarray, requested: int | np.ndarray) -> bool | np.ndarray:
    """NodeResourcesFit's check of one resource: a request above what is free. A zero request
    never fails, even on an over-committed node. For ints or numpy arrays alike."""
    return (want > 0) & (want > allocatable - requested)


def insufficient_resources(
    pod_requests: Resources, allocatable: Resources, requested: Resources, pods_on_node: int
) -> list[str]:
    """NodeResourcesFit's reasons, in its order; the pod count is always checked."""
    reasons: list[str] = []
    if too_many_pods(pods_on_node, allocatable.pods):
        reasons.append(REASON_TOO_MANY_PODS)
    checks = (
        ("cpu", pod_requests.cpu_millicores, allocatable.cpu_millicores, requested.cpu_millicores),
        ("memory", pod_requests.memory_bytes, allocatable.memory_bytes, requested.memory_bytes),
        (
            "ephemeral-storage",
            pod_requests.ephemeral_storage_bytes,
            allocatable.ephemeral_storage_bytes,
            requested.ephemeral_storage_bytes,
        ),
    )
    for name, want, alloc, used in checks:
        if lacks(want, alloc, used):
            reasons.append(reason_insufficient(name))
    return reasons


def pods_on_node(node: NodeState) -> int:
    """Pods bound or assumed on the node, from whichever count the caller filled in."""
    return max(node.pod_count, node.requested.pods)


# --- the filter chain --------------------------------------------------------------------------


def static_failure(pod: PodInfo, info: NodeInfo) -> str | None:
    """The filters that depend only on the node's spec and the pod's constraints (not on the
    pods already there): NodeUnschedulable, TaintToleration, NodeAffinity. None if they pass."""
    if info.unschedulable and not is_tolerated(
        Taint(TAINT_UNSCHEDULABLE, "", "NoSchedule"), pod.tolerations
    ):
        return REASON_UNSCHEDULABLE
    taint = untolerated_taint(effective_taints(info), pod.tolerations)
    if taint is not None:
        return reason_untolerated_taint(taint)
    if not matches_node_selector(pod, info):
        return REASON_NODE_AFFINITY
    return None


def node_failures(pod: PodInfo, node: NodeState) -> tuple[str, ...]:
    """Why `pod` cannot go to `node` — empty when it fits. Stops at the first failing filter."""
    static = static_failure(pod, node.info)
    if static is not None:
        return (static,)
    return tuple(
        insufficient_resources(
            pod.requests, node.info.allocatable, node.requested, pods_on_node(node)
        )
    )


@dataclass
class FilterResult:
    feasible: list[NodeState] = field(default_factory=list)
    failures: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node → reasons

    @property
    def total(self) -> int:
        return len(self.feasible) + len(self.failures)

    def summary(self) -> str:
        return failure_summary(self.total, self.failures)


def filter_nodes(pod: PodInfo, nodes: Iterable[NodeState]) -> FilterResult:
    result = FilterResult()
    for node in nodes:
        reasons = node_failures(pod, node)
        if reasons:
            result.failures[node.info.name] = reasons
        else:
            result.feasible.append(node)
    return result


# kube-scheduler's ErrNoNodesAvailable: its message when the cluster has no node at all.
NO_NODES_AVAILABLE = "no nodes available to schedule pods"


def failure_summary(total_nodes: int, failures: Mapping[str, Sequence[str]]) -> str:
    """kube-scheduler's FitError message: each reason counted over nodes, "<count> <reason>"
    strings sorted as strings (so "10 …" sorts before "3 …", as kube-scheduler's does).
    Without any node, kube-scheduler's own "no nodes available to schedule pods"."""
    if total_nodes == 0:
        return NO_NODES_AVAILABLE
    counts: Counter[str] = Counter()
    for reasons in failures.values():
        counts.update(reasons)
    message = f"0/{total_nodes} nodes are available:"
    parts = sorted(f"{count} {reason}" for reason, count in counts.items())
    if parts:
        message += " " + ", ".join(parts) + "."
    return message
