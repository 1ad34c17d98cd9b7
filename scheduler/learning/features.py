"""Feature schema v1: what a learned scorer (and the decision log) sees of a pod and of
each candidate node. Versioned and ordered: a model checkpoint stores `FEATURE_SCHEMA.to_dict()`
and is refused when it does not match (`FeatureSchema.check`).

Missing data is never encoded as a plausible value. `node_features()` returns `None` for what is
unknown (the decision log writes `null`); `encode()` turns that into numbers for a model,
0.0 for the unknown value with the matching `*_known` / `telemetry_fresh` flag at 0, so a model can
tell "unknown" from "zero".

Node features (per candidate, in order):

| name | unit | meaning |
|---|---|---|
| `cpu_cores` | cores | node CPU cores (telemetry, else allocatable) |
| `cpu_requested_ratio` | 0..1+ | CPU requested by bound + assumed pods / allocatable |
| `memory_requested_ratio` | 0..1+ | memory requested / allocatable |
| `pod_count` | pods | pods bound or assumed on the node |
| `empty` | 0/1 | no pods on the node |
| `telemetry_fresh` | 0/1 | telemetry present and younger than the staleness limit |
| `telemetry_age_seconds` | s | age of the sample, capped at 3600; None without telemetry |
| `utilization` | 0..1 | measured CPU utilization at the sample |
| `cpu_since_sample_ratio` | 0..1+ | CPU requested since the sample / cores |
| `watts` | W | node power at the sample |
| `watts_measured` | 0/1 | that power came from RAPL |
| `curve_known` | 0/1 | a power curve is known (exported, configured or fitted) |
| `idle_watts` | W | curve at u = 0 |
| `max_watts` | W | curve at u = 1 |
| `pod_delta_utilization` | 0..1+ | the pod's CPU request / node cores |
| `delta_watts` | W | the heuristic's ΔP for this pod on this node |

Pod features (once per decision, in order): `cpu_request_cores` (cores, 0.1 when the pod
requests nothing, as kube-scheduler scores it), `memory_request_gib` (GiB).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from common.curves import PowerCurve
from scheduler.domain.model import REASON_OK, REASONS, NodeState, PodInfo
from scheduler.framework.batch import CandidateBatch
from scheduler.plugins.energy import CURVE_FROM_FIT, MAX_PREPARED_NODES, EnergyPlugin, EnergyScores
from scheduler.plugins.energy import request_cores as pod_request_cores

SCHEMA_VERSION = "kubejoule.features/v1"

NODE_FEATURES: tuple[str, ...] = (
    "cpu_cores",
    "cpu_requested_ratio",
    "memory_requested_ratio",
    "pod_count",
    "empty",
    "telemetry_fresh",
    "telemetry_age_seconds",
    "utilization",
    "cpu_since_sample_ratio",
    "watts",
    "watts_measured",
    "curve_known",
    "idle_watts",
    "max_watts",
    "pod_delta_utilization",
    "delta_watts",
)
POD_FEATURES: tuple[str, ...] = ("cpu_request_cores", "memory_request_gib")

MAX_AGE_SECONDS = 3600.0
GIB = 2.0**30
REASON_CODE_OK = REASONS.index(REASON_OK)

Features = dict[str, float | None]


class SchemaMismatch(ValueError):
    """A checkpoint was built for another feature schema."""


def _names(value: object) -> tuple[str, ...]:
    """A schema's feature names (each item as text); TypeError when `value` is not a list of them."""
    if not isinstance(value, Iterable):
        raise TypeError(f"{type(value).__name__!r} object is not iterable")
    return tuple(str(n) for n in value)


@dataclass(frozen=True)
class FeatureSchema:
    version: str
    node_features: tuple[str, ...]
    pod_features: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "version": self.version,
            "node_features": list(self.node_features),
            "pod_features": list(self.pod_features),
        }

    @classmethod
    def from_dict(cls, data: object) -> FeatureSchema:
        try:
            if not isinstance(data, Mapping):
                raise TypeError(f"{type(data).__name__!r} object is not a mapping")
            return cls(
                version=str(data["version"]),
                node_features=_names(data["node_features"]),
                pod_features=_names(data["pod_features"]),
            )
        except (KeyError, TypeError) as exc:
            raise SchemaMismatch(f"not a feature schema: {exc}") from exc

    def check(self, other: object) -> None:
        """Raise SchemaMismatch unless `other` (e.g. a checkpoint's schema) is this one."""
        theirs = other if isinstance(other, FeatureSchema) else FeatureSchema.from_dict(other)
        if theirs.version != self.version:
            raise SchemaMismatch(f"feature schema {theirs.version!r}, expected {self.version!r}")
        if theirs.node_features != self.node_features or theirs.pod_features != self.pod_features:
            raise SchemaMismatch(
                f"feature names or order differ from {self.version}: "
                f"node {list(theirs.node_features)}, pod {list(theirs.pod_features)}"
            )

    @property
    def width(self) -> int:
        """Length of one candidate's encoded vector (node features then pod features)."""
        return len(self.node_features) + len(self.pod_features)


FEATURE_SCHEMA = FeatureSchema(SCHEMA_VERSION, NODE_FEATURES, POD_FEATURES)


def pod_features(pod: PodInfo) -> Features:
    return {
        "cpu_request_cores": pod_request_cores(pod),
        "memory_request_gib": pod.requests.memory_bytes / GIB,
    }



# -- the node features of a whole batch at once ------------------------------------------------
#
# One implementation: `node_columns()` computes every candidate's node features as float64
# columns (NaN where unknown) from the batch's core columns, the energy plugin's batch
# evaluation and per-node values cached per NodeState; a model row encodes NaN as 0.0 (the
# `*_known` flags say it is unknown), a decision log's feature dict as None. A single node is a
# batch of one (`node_features()`).

_NAN = float("nan")
# A node's pod-independent values (`NodeValues.row`), in this order.
_VALUE_NAMES = (
    "cores", "has_telemetry", "sample_time", "utilization", "watts", "measured",
    "cpu_since", "pod_count", "curve_known", "idle_watts", "max_watts",
)
VALUES_KEY = "kubejoule.features"  # the owner of the derived columns (with the energy plugin)
MAX_CURVES = 65_536  # curves whose end points are kept before the table is emptied
_NO_CHECK = object()  # a row whose curve cannot change while its NodeState stays the same


class NodeValues:
    """Per-node, pod-independent values of one energy plugin's nodes, cached per NodeState (and
    per fitted line, for nodes whose curve is the line fitted to their history)."""

    def __init__(self, energy: EnergyPlugin) -> None:
        # weakly: the cache is the value of a WeakKeyDictionary keyed by the plugin
        self._energy = weakref.ref(energy)
        self._rows: dict[str, tuple[NodeState, object, tuple[float, ...]]] = {}
        self._ends: dict[int, tuple[PowerCurve, float, float]] = {}  # id → curve, P(0), P(1)
        self.last_workloads: tuple[Sequence[object], dict[str, np.ndarray]] | None = None

    @property
    def energy(self) -> EnergyPlugin:
        energy = self._energy()
        assert energy is not None, "the energy plugin is gone"
        return energy

    def row(self, node: NodeState, energy: EnergyPlugin) -> tuple[float, ...]:
        name = node.info.name
        entry = self._rows.get(name)
        if entry is not None and entry[0] is node and (
            entry[1] is _NO_CHECK or entry[1] is energy.fitted(name)
        ):
            return entry[2]
        telemetry = node.telemetry
        cores = node.cores or None
        found = energy.curve_for(name, telemetry)
        check = _NO_CHECK
        if found is None or found[1] == CURVE_FROM_FIT:
            check = energy.fitted(name)  # the curve changes when the fit does
        idle = top = _NAN
        if found is not None:
            ends = self._ends.get(id(found[0]))
            if ends is None or ends[0] is not found[0]:
                if len(self._ends) >= MAX_CURVES:
                    self._ends.clear()
                ends = self._ends[id(found[0])] = (found[0], found[0].watts(0.0), found[0].watts(1.0))
            idle, top = ends[1], ends[2]
        values = (
            float(cores) if cores is not None else _NAN,
            1.0 if telemetry is not None else 0.0,
            telemetry.sample_time if telemetry is not None else 0.0,
            _number(telemetry.utilization if telemetry is not None else None),
            _number(telemetry.watts if telemetry is not None else None),
            1.0 if telemetry is not None and telemetry.source == "rapl" else 0.0,
            float(node.cpu_since_sample_cores),
            float(node.pod_count),
            1.0 if found is not None else 0.0,
            idle,
            top,
        )
        if len(self._rows) >= MAX_PREPARED_NODES and name not in self._rows:
            self._rows.clear()  # the names come from callers: bounded as the plugin's rows
        self._rows[name] = (node, check, values)
        return values

    def columns(self, states: Sequence[NodeState]) -> dict[str, np.ndarray]:
        energy, row = self.energy, self.row
        table = np.array([row(s, energy) for s in states], dtype=np.float64).reshape(
            len(states), len(_VALUE_NAMES)
        )
        return {name: table[:, k].copy() for k, name in enumerate(_VALUE_NAMES)}


def _number(value: float | None) -> float:
    return _NAN if value is None else float(value)


_VALUES: weakref.WeakKeyDictionary[EnergyPlugin, NodeValues] = weakref.WeakKeyDictionary()


def node_values(energy: EnergyPlugin) -> NodeValues:
    """The per-node value cache of `energy` (one per plugin, shared by its callers)."""
    values = _VALUES.get(energy)
    if values is None:
        values = _VALUES.setdefault(energy, NodeValues(energy))
    return values


def feature_values(batch: CandidateBatch, energy: EnergyPlugin) -> dict[str, np.ndarray]:
    """The batch's per-node, pod-independent values (`_VALUE_NAMES`: cores, the sample's time,
    utilization, watts…) as derived columns, computed once per batch (a published snapshot
    carries them)."""
    return batch.derived((VALUES_KEY, energy), node_values(energy).columns)


def telemetry_ages(batch: CandidateBatch, energy: EnergyPlugin) -> np.ndarray:
    """Each node's telemetry age at `batch.now` (≥ 0; NaN without telemetry)."""
    v = feature_values(batch, energy)
    return np.where(v["has_telemetry"] > 0.5, np.maximum(batch.now - v["sample_time"], 0.0), np.nan)


def _divide(top: np.ndarray | float, bottom: np.ndarray, valid: np.ndarray) -> np.ndarray:
    out = np.full(len(bottom), np.nan)
    np.divide(top, bottom, out=out, where=valid)
    return out


def node_columns(
    pod: PodInfo, batch: CandidateBatch, energy: EnergyPlugin, scores: EnergyScores | None = None
) -> dict[str, np.ndarray]:
    """Every candidate's node features (NODE_FEATURES) as float64 columns, NaN where unknown.
    The energy plugin supplies ΔP (`scores`: its evaluation of `pod` over `batch`, when
    already computed), curves and the staleness limit."""
    if scores is None:
        scores = energy.evaluate(pod, batch)  # first: pricing teaches the plugin the samples
    v = feature_values(batch, energy)
    cores = v["cores"]
    with_cores = cores > 0
    age = np.maximum(batch.now - v["sample_time"], 0.0)
    has_telemetry = v["has_telemetry"] > 0.5
    fresh = has_telemetry & ~np.isnan(v["utilization"]) & (age <= energy.max_staleness_seconds)
    request = pod_request_cores(pod)
    return {
        "cpu_cores": cores,
        "cpu_requested_ratio": _divide(batch.req_cpu, batch.alloc_cpu, batch.alloc_cpu > 0),
        "memory_requested_ratio": _divide(batch.req_mem, batch.alloc_mem, batch.alloc_mem > 0),
        "pod_count": v["pod_count"],
        "empty": (v["pod_count"] == 0).astype(np.float64),
        "telemetry_fresh": fresh.astype(np.float64),
        "telemetry_age_seconds": np.where(has_telemetry, np.minimum(age, MAX_AGE_SECONDS), np.nan),
        "utilization": v["utilization"],
        "cpu_since_sample_ratio": _divide(v["cpu_since"], cores, with_cores),
        "watts": v["watts"],
        "watts_measured": v["measured"],
        "curve_known": v["curve_known"],
        "idle_watts": v["idle_watts"],
        "max_watts": v["max_watts"],
        "pod_delta_utilization": _divide(request, cores, (cores != 0) & ~np.isnan(cores)),
        "delta_watts": np.where(scores.reason == REASON_CODE_OK, scores.delta_watts, np.nan),
    }


def encode_columns(
    columns: Mapping[str, np.ndarray], names: Sequence[str], pod_row: Sequence[float]
) -> np.ndarray:
    """Model rows (n × (len(names) + len(pod_row))): the columns in `names` order, unknown
    (NaN) → 0.0, then the pod's encoded features."""
    count = len(columns[names[0]])
    rows = np.empty((count, len(names) + len(pod_row)))
    for k, name in enumerate(names):
        rows[:, k] = columns[name]
    rows[:, len(names):] = pod_row
    np.nan_to_num(rows, copy=False, nan=0.0)
    return rows


def column_features(columns: Mapping[str, np.ndarray], row: int = 0) -> Features:
    """One row of the columns as a feature dict (NaN → None, as the decision log writes it)."""
    out: Features = {}
    for name, values in columns.items():
        value = float(values[row])
        out[name] = None if value != value else value
    return out


def node_features(pod: PodInfo, node: NodeState, now: float, energy: EnergyPlugin) -> Features:
    """The node features of one candidate (a batch of one; None where unknown)."""
    return column_features(node_columns(pod, CandidateBatch.of([node], now), energy))


def batch_features(pod: PodInfo, batch: CandidateBatch, energy: EnergyPlugin) -> list[Features]:
    """node_features() of every row of `batch` (at `batch.now`), from its columns."""
    columns = node_columns(pod, batch, energy)
    return [column_features(columns, row) for row in range(len(batch))]


def encode(features: Mapping[str, float | None], names: Sequence[str]) -> list[float]:
    """Features as numbers in schema order; unknown → 0.0 (its flag says it is unknown)."""
    return [0.0 if features[name] is None else float(features[name]) for name in names]  # type: ignore[arg-type]


def candidate_matrix(
    pod: PodInfo, nodes: Sequence[NodeState], now: float, energy: EnergyPlugin
) -> list[list[float]]:
    """One row per candidate: encoded node features followed by the pod's features."""
    columns = node_columns(pod, CandidateBatch.of(nodes, now), energy)
    pod_row = encode(pod_features(pod), POD_FEATURES)
    rows: list[list[float]] = encode_columns(columns, NODE_FEATURES, pod_row).tolist()
    return rows
