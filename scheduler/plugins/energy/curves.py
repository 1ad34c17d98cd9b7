"""What the energy plugin knows of each node's power curve (scheduler/plugins/energy/plugin.py prices with
it): the curve its agent exports, else a curve configured for the node, else a line fitted online
to the node's own (u, P) history (`history.py`); and, for a node whose telemetry is
missing or stale, the curve and cores that price it at its worst (energy.py's docstring,
"Missing data never wins")."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from common.curves import PowerCurve
from scheduler.domain.model import NodeState, NodeTelemetry
from scheduler.plugins.energy.history import LinearFit, NodeHistory

CURVE_FROM_TELEMETRY = "telemetry"
CURVE_FROM_CONFIG = "config"
CURVE_FROM_FIT = "fit"


class NodeCurves:
    """The nodes' power curves, learned from their telemetry; thread-safe `observe()`."""

    def __init__(self, curves: Mapping[str, PowerCurve] | None, history_size: int) -> None:
        self._configured = dict(curves or {})
        self._history_size = history_size
        self._histories: dict[str, NodeHistory] = {}
        self._point_curves: dict[tuple[float, ...], PowerCurve] = {}
        self._fit_curves: dict[str, tuple[LinearFit, PowerCurve]] = {}
        # The last curve each node's agent exported, and its core count: what prices the node
        # when its telemetry goes missing (energy.py's docstring, "Missing data never wins").
        self._exported: dict[str, tuple[PowerCurve, float | None]] = {}
        self._learned: dict[str, int] = {}  # node → changes to its history or exported curve
        self._observing = threading.Lock()

    def observe(self, telemetry: NodeTelemetry) -> None:
        """Feed one telemetry sample into the node's (u, P) history (duplicates are ignored)
        and remember the curve its agent exports. Thread-safe (the standalone scheduler stages
        new node states in a thread of its own while it decides)."""
        with self._observing:
            self._observe(telemetry)

    def _observe(self, telemetry: NodeTelemetry) -> None:
        name = telemetry.node
        if telemetry.curve_points is not None:
            curve = self._points_curve(telemetry.curve_points)
            known = self._exported.get(name)
            if curve is not None and (known is None or known[0] is not curve or known[1] != telemetry.cores):
                self._exported[name] = (curve, telemetry.cores)
                self._learned[name] = self._learned.get(name, 0) + 1
        if telemetry.watts is None or telemetry.utilization is None or telemetry.source == "none":
            return
        history = self._histories.get(name)
        if history is None:
            history = self._histories[name] = NodeHistory(self._history_size)
        if history.add(telemetry.sample_time, telemetry.utilization, telemetry.watts):
            self._learned[name] = self._learned.get(name, 0) + 1

    def fitted(self, node: str) -> LinearFit | None:
        history = self._histories.get(node)
        return history.fit() if history is not None else None

    def _points_curve(self, points: tuple[float, ...]) -> PowerCurve | None:
        curve = self._point_curves.get(points)
        if curve is None:
            try:
                curve = PowerCurve.from_points(points)
            except ValueError:
                return None
            self._point_curves[points] = curve
        return curve

    def curve_for(self, node: str, telemetry: NodeTelemetry | None) -> tuple[PowerCurve, str] | None:
        """The node's power curve and where it came from, or None when unknown: the curve its
        agent exports, else a configured one, else the line fitted to its history."""
        if telemetry is not None and telemetry.curve_points is not None:
            curve = self._points_curve(telemetry.curve_points)
            if curve is not None:
                return curve, CURVE_FROM_TELEMETRY
        configured = self._configured.get(node)
        if configured is not None:
            return configured, CURVE_FROM_CONFIG
        fit = self.fitted(node)
        if fit is not None:
            cached = self._fit_curves.get(node)
            if cached is None or cached[0] is not fit:
                cached = self._fit_curves[node] = (fit, fit.curve())
            return cached[1], CURVE_FROM_FIT
        return None

    def _fallback(self, node: NodeState) -> tuple[PowerCurve | None, float]:
        """The curve and cores that price a node without fresh telemetry at its worst: the
        sample's curve, else the last one its agent exported, else configured, else fitted."""
        name = node.info.name
        telemetry = node.telemetry
        exported = self._exported.get(name)
        cores = node.cores
        if not cores and exported is not None:
            cores = exported[1] or 0.0
        curve: PowerCurve | None = None
        if telemetry is not None and telemetry.curve_points is not None:
            curve = self._points_curve(telemetry.curve_points)
        if curve is None and exported is not None:
            curve = exported[0]
        if curve is None:
            found = self.curve_for(name, None)
            curve = found[0] if found is not None else None
        return curve, float(cores) if cores and cores > 0 else 0.0

    def remembered_nodes(self) -> list[str]:
        """Nodes with an exported curve or a history remembered (not the configured ones)."""
        return list({**self._exported, **self._histories})

    def knows(self, node: str) -> bool:
        """Whether anything of `node`'s own (a configured or exported curve, a history) could
        price it without telemetry; a node it does not know scores as any unknown node."""
        return node in self._configured or node in self._exported or node in self._histories
