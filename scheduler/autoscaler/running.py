"""Curves of node groups from the nodes already running: the third curve source of the choice.

A group with no `node_groups:` entry may still have running nodes whose agents export their
calibration curve (`kubejoule_node_power_model_watts`, in the telemetry store as
`NodeTelemetry.curve_points`). A running node and a group's template node that carry the same
value of one of `node_group_labels` (e.g. the same `node.kubernetes.io/instance-type`) are taken
to be the same hardware, and the group gets the pointwise median of those nodes' curves (one
badly calibrated node does not decide; a median of non-decreasing curves is non-decreasing).

Everything is computed in the telemetry store's refresh thread (a store listener): the
BestOptions path only reads the last published mapping. Node labels come from the Kubernetes API
(`scheduler/cluster/kube.py`), re-listed at most every `labels_refresh_seconds`.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from common.curves import PowerCurve
from common.jsonvalue import subobject
from scheduler.telemetry.samples import NodeSample

if TYPE_CHECKING:
    from scheduler.cluster.kube import ApiClient

log = logging.getLogger("kubejoule.expander")

LabelKey = tuple[str, str]


def curves_by_label(
    samples: Mapping[str, NodeSample],
    node_labels: Mapping[str, Mapping[str, str]],
    label_keys: Sequence[str],
) -> dict[LabelKey, PowerCurve]:
    """(label key, value) → the pointwise median of the curves exported by the running nodes
    with that label value. Nodes without an exported curve or without labels are left out."""
    exported: dict[LabelKey, list[tuple[float, ...]]] = {}
    for node, sample in samples.items():
        points = sample.telemetry.curve_points
        labels = node_labels.get(node)
        if points is None or not labels:
            continue
        for key in label_keys:
            value = labels.get(key)
            if value:
                exported.setdefault((key, value), []).append(points)
    curves = {}
    for label, point_lists in exported.items():
        median = [statistics.median(values) for values in zip(*point_lists, strict=True)]
        try:
            curves[label] = PowerCurve.from_points(median)
        except ValueError:  # a malformed export (not 11 points): the store keeps such rows out
            continue
    return curves


class NodeLabelsFromKubernetes:
    """Every Node's labels, re-listed at most every `refresh_seconds` (call from a background
    thread: the listing is an API round trip)."""

    def __init__(self, api: ApiClient, refresh_seconds: float = 60.0) -> None:
        self._api = api
        self._refresh_seconds = refresh_seconds
        self._labels: dict[str, dict[str, str]] = {}
        self._listed_at: float | None = None

    def __call__(self) -> dict[str, dict[str, str]]:
        from scheduler.cluster import kube

        now = time.monotonic()
        if self._listed_at is None or now - self._listed_at >= self._refresh_seconds:
            labels = {}
            nodes, _ = kube.list_nodes(self._api, timeout_seconds=10.0)
            for node in nodes:
                meta = subobject(node, "metadata")
                name, node_labels = meta.get("name"), meta.get("labels") or {}
                if isinstance(name, str) and isinstance(node_labels, dict):
                    labels[name] = {str(k): str(v) for k, v in node_labels.items()}
            self._labels = labels
            self._listed_at = now
        return self._labels


class RunningCurves:
    """The published (label key, value) → curve mapping, recomputed by `update` (a telemetry
    store listener) and read by the expander with `current()`."""

    def __init__(
        self,
        node_labels: Callable[[], Mapping[str, Mapping[str, str]]],
        label_keys: Sequence[str],
    ) -> None:
        self._node_labels = node_labels
        self._label_keys = tuple(label_keys)
        self._curves: Mapping[LabelKey, PowerCurve] = {}
        self.updates = 0  # successful updates; the expander is ready after the first

    def update(self, samples: Mapping[str, NodeSample]) -> None:
        try:
            labels = self._node_labels()
        except Exception as exc:  # the API is down: keep the last mapping
            log.warning("running-node curves: cannot list node labels: %s", exc)
            return
        self._curves = curves_by_label(samples, labels, self._label_keys)
        self.updates += 1

    def current(self) -> Mapping[LabelKey, PowerCurve]:
        return self._curves
