"""kube-scheduler's classification of node updates (scheduler/cluster/node_events.py): the cases
of k8s.io/kubernetes v1.36 pkg/scheduler/framework/events_test.go, translated — each names its Go
test — on Node objects as the API serves them."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cluster.node_events import (
    UPDATE_NODE_ALLOCATABLE,
    UPDATE_NODE_ANNOTATION,
    UPDATE_NODE_CONDITION,
    UPDATE_NODE_DECLARED_FEATURE,
    UPDATE_NODE_LABEL,
    UPDATE_NODE_TAINT,
    node_properties,
    node_scheduling_changes,
)


def make_node(
    *,
    unschedulable: bool = False,
    allocatable: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    conditions: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """st.MakeNode() of pkg/scheduler/testing/wrappers.go: an empty Node, as JSON."""
    meta: dict[str, Any] = {"name": ""}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"unschedulable": unschedulable} if unschedulable else {}
    if taints is not None:
        spec["taints"] = taints
    status: dict[str, Any] = {}
    if allocatable is not None:  # .Capacity(): capacity and allocatable alike
        status["capacity"] = status["allocatable"] = allocatable
    if conditions is not None:
        status["conditions"] = conditions
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def changes(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    return node_scheduling_changes(node_properties(new), node_properties(old))


# TestNodeAllocatableChange
@pytest.mark.parametrize(("changed", "old", "new"), [
    # the same quantity both sides in Go; here written two ways (Semantic.DeepEqual compares values)
    pytest.param(False, {"memory": "1Ki"}, {"memory": "1024"}, id="no allocatable resources changed"),
    pytest.param(True, {"memory": "1Ki"}, {"memory": "1Ki", "storage": "1Ki"},
                 id="new node has more allocatable resources"),
])
def test_node_allocatable_change(changed: bool, old: dict[str, str], new: dict[str, str]) -> None:
    got = changes(make_node(allocatable=new), make_node(allocatable=old))
    assert (UPDATE_NODE_ALLOCATABLE in got) is changed


# TestNodeLabelsChange
@pytest.mark.parametrize(("changed", "old", "new"), [
    pytest.param(False, {"foo": "bar"}, {"foo": "bar"}, id="no labels changed"),
    pytest.param(True, {"foo": "bar"}, {"foo": "bar", "test": "value"}, id="new object has more labels"),
])
def test_node_labels_change(changed: bool, old: dict[str, str], new: dict[str, str]) -> None:
    assert (changes(make_node(labels=new), make_node(labels=old)) == [UPDATE_NODE_LABEL]) is changed


# TestNodeTaintsChange
@pytest.mark.parametrize(("changed", "old", "new"), [
    pytest.param(False, [{"key": "key", "value": "value"}], [{"key": "key", "value": "value"}],
                 id="no taint changed"),
    pytest.param(True, [{"key": "key", "value": "value1"}], [{"key": "key", "value": "value2"}],
                 id="taint value changed"),
])
def test_node_taints_change(changed: bool, old: list[dict[str, str]], new: list[dict[str, str]]) -> None:
    assert (changes(make_node(taints=new), make_node(taints=old)) == [UPDATE_NODE_TAINT]) is changed


# TestNodeConditionsChange
@pytest.mark.parametrize(("changed", "old", "new"), [
    pytest.param(False, [{"type": "DiskPressure", "status": "True"}], [{"type": "DiskPressure", "status": "True"}],
                 id="no condition changed"),
    pytest.param(False, [{"type": "DiskPressure", "status": "True", "lastHeartbeatTime": "1970-01-01T00:00:01Z"}],
                 [{"type": "DiskPressure", "status": "True", "lastHeartbeatTime": "1970-01-01T00:00:02Z"}],
                 id="only LastHeartbeatTime changed"),
    pytest.param(True, [], [{"type": "Ready", "status": "True"}], id="new node has more healthy conditions"),
    pytest.param(True, [{"type": "DiskPressure", "status": "True"}], [], id="new node has less unhealthy conditions"),
    pytest.param(True, [{"type": "Ready", "status": "False"}], [{"type": "Ready", "status": "True"}],
                 id="condition status changed"),
])
def test_node_conditions_change(changed: bool, old: list[dict[str, str]], new: list[dict[str, str]]) -> None:
    got = changes(make_node(conditions=new), make_node(conditions=old))
    assert (got == [UPDATE_NODE_CONDITION]) is changed


# TestNodeSchedulingPropertiesChange
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


@pytest.mark.parametrize(("new", "old", "want"), [
    pytest.param(make_node(), make_node(), [], id="no specific changed applied"),
    pytest.param(make_node(), make_node(unschedulable=True), [UPDATE_NODE_TAINT],
                 id="only node spec unavailable changed"),
    pytest.param(make_node(allocatable={"cpu": "1000m", "memory": "100m", "example.com/foo": "1"}),
                 make_node(allocatable={"cpu": "1000m", "memory": "100m", "example.com/foo": "2"}),
                 [UPDATE_NODE_ALLOCATABLE], id="only node allocatable changed"),
    pytest.param(make_node(labels={"foo": "bar"}), make_node(labels={"foo": "fuz"}), [UPDATE_NODE_LABEL],
                 id="only node label changed"),
    pytest.param(make_node(taints=[{"key": UNSCHEDULABLE_TAINT, "value": "", "effect": "NoSchedule"}]),
                 make_node(taints=[{"key": UNSCHEDULABLE_TAINT, "value": "foo", "effect": "NoSchedule"}]),
                 [UPDATE_NODE_TAINT], id="only node taint changed"),
    pytest.param(make_node(annotations={"foo": "bar"}), make_node(annotations={"foo": "fuz"}),
                 [UPDATE_NODE_ANNOTATION], id="only node annotation changed"),
    pytest.param(make_node(), make_node(conditions=[{"type": "Ready", "status": "True", "reason": "Ready",
                                                     "message": "Ready"}]),
                 [UPDATE_NODE_CONDITION], id="only node condition changed"),
    pytest.param(make_node(labels={"foo": "bar"},
                           taints=[{"key": UNSCHEDULABLE_TAINT, "value": "", "effect": "NoSchedule"}]),
                 make_node(taints=[{"key": UNSCHEDULABLE_TAINT, "value": "foo", "effect": "NoSchedule"}]),
                 [UPDATE_NODE_LABEL, UPDATE_NODE_TAINT], id="both node label and node taint changed"),
])
def test_node_scheduling_properties_change(new: dict[str, Any], old: dict[str, Any], want: list[str]) -> None:
    assert changes(new, old) == want


# TestExtractNodeFeaturesChange
@pytest.mark.parametrize(("old", "new", "changed"), [
    pytest.param(["featA", "featB"], ["featA", "featB"], False, id="no features changed"),
    pytest.param(["featA"], ["featA", "featB"], True, id="features added"),
    pytest.param(["featA", "featB"], ["featA"], True, id="features removed"),
    pytest.param(["featA"], ["featC"], True, id="features different"),
    pytest.param(None, ["featA"], True, id="old features nil, new has features"),
    pytest.param([], ["featA"], True, id="old features empty, new has features"),
    pytest.param(["featA"], None, True, id="old has features, new is nil"),
    pytest.param(None, None, False, id="both nil"),
])
def test_extract_node_features_change(old: list[str] | None, new: list[str] | None, changed: bool) -> None:
    def with_features(features: list[str] | None) -> dict[str, Any]:
        obj = make_node()
        if features is not None:
            obj["status"]["declaredFeatures"] = features
        return obj

    got = changes(with_features(new), with_features(old))
    assert got == ([UPDATE_NODE_DECLARED_FEATURE] if changed else [])


def test_a_node_cordoned_is_no_event() -> None:
    """extractNodeSpecUnschedulableChange: only a node made schedulable again is an event (no
    Go case of its own: the reverse of "only node spec unavailable changed")."""
    assert changes(make_node(unschedulable=True), make_node()) == []
