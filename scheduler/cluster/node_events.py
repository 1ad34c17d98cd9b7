"""Which Node updates can make a waiting pod fit: kube-scheduler's classification of a node
update into cluster events, on the API's JSON.

kube-scheduler's node informer handler (k8s.io/kubernetes v1.36, pkg/scheduler/eventhandlers.go
`updateNodeInCache`) applies every Node update to its cache, but moves the unschedulable pods
only for the events `NodeSchedulingPropertiesChange` (pkg/scheduler/framework/events.go) finds
between the old object and the new: an update that changes none of those properties — a kubelet's
(or KWOK's) status heartbeat, which renews only the conditions' times — moves no pod. The
standalone scheduler's cache does the same (`ClusterCache.upsert_node`): at 5,000 nodes,
heartbeating once a minute, moving every parked pod on each heartbeat would retry them ~80 times
a second.

`NodeProperties` keeps, of one Node, what the classification compares (and nothing else, so a
cache can keep it for every node): `node_scheduling_changes(new, old)` gives the events, in
kube-scheduler's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from common.jsonvalue import subobject, subobjects
from common.quantity import parse_quantity

# kube-scheduler's ActionTypes of a node update (k8s.io/kube-scheduler/framework, types.go).
UPDATE_NODE_ALLOCATABLE = "UpdateNodeAllocatable"
UPDATE_NODE_LABEL = "UpdateNodeLabel"
UPDATE_NODE_TAINT = "UpdateNodeTaint"
UPDATE_NODE_CONDITION = "UpdateNodeCondition"
UPDATE_NODE_ANNOTATION = "UpdateNodeAnnotation"
UPDATE_NODE_DECLARED_FEATURE = "UpdateNodeDeclaredFeature"


@dataclass(frozen=True)
class NodeProperties:
    """What `node_scheduling_changes` compares of a Node. Maps are sorted item tuples (an
    absent map and an empty one are alike, as `equality.Semantic.DeepEqual` has them);
    quantities are their values (`1000m` is `1`); taints keep their order (a slice)."""

    unschedulable: bool
    allocatable: tuple[tuple[str, float | str], ...]
    labels: tuple[tuple[str, str], ...]
    taints: tuple[tuple[str, str, str, str], ...]
    conditions: tuple[tuple[str, str], ...]  # type → status, the last of a type winning
    annotations: tuple[tuple[str, str], ...]
    declared_features: tuple[str, ...]  # status.declaredFeatures (NodeDeclaredFeatures, beta in 1.36)


def _strings(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in value.items()))


def _quantity(value: object) -> float | str:
    if not isinstance(value, str | int | float):
        return str(value)  # not a quantity: compared as written
    try:
        return parse_quantity(value)
    except (TypeError, ValueError, ArithmeticError):
        return str(value)  # unreadable: compared as written


def node_properties(node: Mapping[str, object]) -> NodeProperties:
    """The properties of a Node (the API's JSON) that kube-scheduler's classification reads."""
    meta, spec, status = subobject(node, "metadata"), subobject(node, "spec"), subobject(node, "status")
    allocatable = status.get("allocatable")
    conditions = {str(c.get("type")): str(c.get("status")) for c in subobjects(status, "conditions")}
    return NodeProperties(
        unschedulable=bool(spec.get("unschedulable")),
        allocatable=tuple(sorted(
            (str(k), _quantity(v)) for k, v in allocatable.items()
        )) if isinstance(allocatable, Mapping) else (),
        labels=_strings(meta.get("labels")),
        taints=tuple(
            (str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")), str(t.get("timeAdded", "")))
            for t in subobjects(spec, "taints")
        ),
        conditions=tuple(sorted(conditions.items())),
        annotations=_strings(meta.get("annotations")),
        declared_features=tuple(str(f) for f in features) if isinstance(
            features := status.get("declaredFeatures"), list) else (),
    )


def node_scheduling_changes(new: NodeProperties, old: NodeProperties) -> list[str]:
    """The cluster events of a node update from `old` to `new` (kube-scheduler's
    `NodeSchedulingPropertiesChange`: its extractors, in its order); empty when no waiting pod
    can fit because of it."""
    events = []
    # extractNodeSpecUnschedulableChange: only a node made schedulable again (as a taint removed)
    if new.unschedulable != old.unschedulable and not new.unschedulable:
        events.append(UPDATE_NODE_TAINT)
    if new.allocatable != old.allocatable:  # extractNodeAllocatableChange
        events.append(UPDATE_NODE_ALLOCATABLE)
    if new.labels != old.labels:  # extractNodeLabelsChange
        events.append(UPDATE_NODE_LABEL)
    if new.taints != old.taints:  # extractNodeTaintsChange
        events.append(UPDATE_NODE_TAINT)
    # extractNodeConditionsChange: each condition's type and status, not its times or reason
    if new.conditions != old.conditions:
        events.append(UPDATE_NODE_CONDITION)
    if new.annotations != old.annotations:  # extractNodeAnnotationsChange
        events.append(UPDATE_NODE_ANNOTATION)
    # extractNodeFeaturesChange (its feature gate NodeDeclaredFeatures is on by default in 1.36)
    if new.declared_features != old.declared_features:
        events.append(UPDATE_NODE_DECLARED_FEATURE)
    return events
