"""A learned model's file and its numpy forward pass (served by the `learned` Score plugin,
`scheduler.learning.plugin`, without torch).

A model file (`.npz`, written by `rl.learning.dqn`/`rl.learning.mlp` beside their `.pt` checkpoint) holds

* `layer{i}_weight` (out × in) and `layer{i}_bias` of a small MLP with ReLU between layers,
  applied to each candidate's row of the feature schema (node features then pod features) —
  the same weights for every row, so one model serves any cluster size and a node's output
  depends only on its own row;
* `mean`, `scale`: the input standardization fixed at training time, `x' = (x − mean) / scale`;
* `meta`: JSON — `kind` (`dqn`: output is a Q-value, higher is better; `mlp`: output is the
  predicted energy cost of the placement, lower is better), `feature_schema`, `score_map`
  `{center, spread, sign}` and the training metadata.

Score: `100 / (1 + exp(−sign × (output − center) / spread))`, a fixed map stored with the model,
so a score depends only on the node and the pod (the plugin scores rows without fresh telemetry
0: `scheduler.learning.plugin`). A model is built for feature schema v3 or v2 (SERVED_SCHEMAS;
the plugin computes the rows of the model's own schema, so models trained before v3 keep
serving); one built for another schema (v1) is refused with `ModelError` naming both.
"""

from __future__ import annotations

import json
import math
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scheduler.framework.interface import MAX_NODE_SCORE
from scheduler.learning.features import FeatureSchema, SchemaMismatch
from scheduler.learning.features_v2 import FEATURE_SCHEMA_V2
from scheduler.learning.features_v3 import FEATURE_SCHEMA_V3

KINDS = ("dqn", "mlp")


class ModelError(ValueError):
    """A model file that cannot be served (unreadable, malformed, or another feature schema)."""


def mlp_forward(layers: Sequence[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
    """Rows (n × in) → outputs (n,): affine layers with ReLU between them.

    `einsum` rather than `@`: BLAS blocks a matrix product by the number of rows, so a row's
    result could differ in the last bit with the batch size; einsum's loop sums each row in the
    same order whatever the batch, so a node's score is bit-for-bit the same alone or among
    thousands (tested)."""
    for i, (weight, bias) in enumerate(layers):
        x = np.einsum("ij,kj->ik", x, weight) + bias
        if i < len(layers) - 1:
            np.maximum(x, 0.0, out=x)
    return np.asarray(x[:, 0], dtype=np.float64)


@dataclass(frozen=True)
class ScoreMap:
    """The fixed output → 0–100 map stored with a model."""

    center: float
    spread: float
    sign: float  # +1: higher output is better (Q-value); −1: lower is better (a cost)

    def __call__(self, outputs: np.ndarray) -> np.ndarray:
        z = np.clip(self.sign * (outputs - self.center) / self.spread, -60.0, 60.0)
        return MAX_NODE_SCORE / (1.0 + np.exp(-z))


@dataclass(frozen=True)
class NumpyModel:
    """An exported model: weights, standardization, score map, schema and metadata."""

    layers: tuple[tuple[np.ndarray, np.ndarray], ...]
    mean: np.ndarray
    scale: np.ndarray
    score_map: ScoreMap
    schema: FeatureSchema
    meta: Mapping[str, object]

    @property
    def kind(self) -> str:
        return str(self.meta["kind"])

    def outputs(self, rows: np.ndarray) -> np.ndarray:
        """One batched pass: raw model outputs for every row; NaN for a row the model cannot
        judge (`usable`)."""
        with np.errstate(over="ignore", invalid="ignore"):
            x = (np.asarray(rows, dtype=np.float64) - self.mean) / self.scale
            bad = ~usable(x)
            if bad.any():
                x[bad] = 0.0
            out = mlp_forward(self.layers, x)
        bad |= ~np.isfinite(out)
        if bad.any():
            out[bad] = math.nan
        return out

    def scores(self, rows: np.ndarray) -> np.ndarray:
        """0–100 per row; NaN where `outputs` is NaN (the plugin scores those UNMEASURED_SCORE)."""
        outputs = self.outputs(rows)
        scores = self.score_map(outputs)
        scores[~np.isfinite(outputs)] = math.nan
        return scores


# A standardized input farther than this from the training mean (in training scales) is no
# value the model has seen anything like: an agent's garbage (an infinite or 1e300-watt
# sample encodes as the largest float), not a measurement; its row is not judged.
MAX_STANDARDIZED = 1e6


def usable(standardized: np.ndarray) -> np.ndarray:
    """Rows (already standardized) a model may judge: every value finite and within
    MAX_STANDARDIZED training scales of the training mean."""
    with np.errstate(invalid="ignore"):
        return (np.abs(standardized) <= MAX_STANDARDIZED).all(axis=1)


def save_numpy_model(
    path: str | Path,
    layers: Sequence[tuple[np.ndarray, np.ndarray]],
    mean: np.ndarray,
    scale: np.ndarray,
    meta: Mapping[str, object],
) -> None:
    """Write the .npz a NumpyModel loads (`meta` needs kind, feature_schema and score_map)."""
    arrays: dict[str, np.ndarray] = {"mean": np.asarray(mean, np.float64)}
    arrays["scale"] = np.asarray(scale, np.float64)
    for i, (weight, bias) in enumerate(layers):
        arrays[f"layer{i}_weight"] = np.asarray(weight, np.float64)
        arrays[f"layer{i}_bias"] = np.asarray(bias, np.float64)
    arrays["meta"] = np.array(json.dumps(dict(meta), sort_keys=True))
    with open(path, "wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle


def numpy_model_path(path: str | Path) -> Path:
    """The exported weights of a checkpoint: PATH itself if .npz, else PATH with .npz."""
    p = Path(path)
    return p if p.suffix == ".npz" else p.with_suffix(".npz")


# The feature schemas a model may be built for (the plugin computes the rows of its schema).
SERVED_SCHEMAS: tuple[FeatureSchema, ...] = (FEATURE_SCHEMA_V3, FEATURE_SCHEMA_V2)


def _schema_for(
    theirs: object, schemas: FeatureSchema | Sequence[FeatureSchema]
) -> FeatureSchema:
    """The served schema named by a model's metadata; SchemaMismatch naming what is served."""
    served = (schemas,) if isinstance(schemas, FeatureSchema) else tuple(schemas)
    version = theirs.get("version") if isinstance(theirs, Mapping) else None
    for schema in served:
        if schema.version == version:
            schema.check(theirs)
            return schema
    if len(served) == 1:
        served[0].check(theirs)
    raise SchemaMismatch(
        f"feature schema {version!r}, expected one of {[s.version for s in served]}"
    )


def load_numpy_model(
    path: str | Path,
    schema: FeatureSchema | Sequence[FeatureSchema] = SERVED_SCHEMAS,
    kinds: Sequence[str] = KINDS,
) -> NumpyModel:
    """Load and check a model; ModelError with a clear message when it cannot be served: a
    file that is missing, not a zip, truncated or corrupt (`zipfile.BadZipFile`, a short
    member, a bad CRC), metadata that is not a model's, another kind or feature schema, layers
    that do not chain into one output, or any weight, bias, mean or scale that is not a finite
    number (a NaN weight would score every node NaN)."""
    file = numpy_model_path(path)
    try:
        with np.load(file, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as exc:
        raise ModelError(f"{file}: cannot read the model: {type(exc).__name__}: {exc}") from exc
    try:
        meta = json.loads(str(arrays.pop("meta")))
        kind = meta["kind"]
        theirs = meta["feature_schema"]
        score_map = ScoreMap(**{k: float(v) for k, v in meta["score_map"].items()})
        count = sum(1 for name in arrays if name.endswith("_weight"))
        layers = tuple((arrays[f"layer{i}_weight"], arrays[f"layer{i}_bias"]) for i in range(count))
        mean, scale = arrays["mean"], arrays["scale"]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelError(f"{file}: not a kubejoule model file: {exc}") from exc
    if not isinstance(kind, str) or kind not in kinds:
        raise ModelError(f"{file}: a {kind!r} model, expected one of {list(kinds)}")
    try:
        schema = _schema_for(theirs, schema)
    except SchemaMismatch as exc:
        raise ModelError(
            f"{file}: built for another feature schema ({exc}): retrain or export the model "
            "for one this scheduler serves"
        ) from exc
    _check_arrays(file, schema, layers, mean, scale)
    if not (math.isfinite(score_map.spread) and math.isfinite(score_map.center)):
        raise ModelError(f"{file}: bad score map {meta['score_map']}")
    if score_map.spread <= 0 or score_map.sign not in (-1.0, 1.0):
        raise ModelError(f"{file}: bad score map {meta['score_map']}")
    return NumpyModel(layers, mean, scale, score_map, schema, meta)


def _check_arrays(
    file: Path,
    schema: FeatureSchema,
    layers: Sequence[tuple[np.ndarray, np.ndarray]],
    mean: np.ndarray,
    scale: np.ndarray,
) -> None:
    """Shapes that chain (width → … → 1) and finite numbers everywhere, scales above 0."""
    if not layers or mean.shape != (schema.width,) or scale.shape != (schema.width,):
        raise ModelError(f"{file}: input width does not match {schema.version}")
    width = schema.width
    for i, (weight, bias) in enumerate(layers):
        if weight.ndim != 2 or weight.shape[1] != width or bias.shape != (weight.shape[0],):
            raise ModelError(
                f"{file}: layer{i} has weight {weight.shape} and bias {bias.shape}, "
                f"expected ({{out}}, {width}) and ({{out}},)"
            )
        width = weight.shape[0]
    if width != 1:
        raise ModelError(f"{file}: the last layer has {width} outputs, expected 1")
    named = [("mean", mean), ("scale", scale)]
    for i, (weight, bias) in enumerate(layers):
        named += [(f"layer{i}_weight", weight), (f"layer{i}_bias", bias)]
    for name, values in named:
        if not np.issubdtype(values.dtype, np.number) or not np.isfinite(values).all():
            raise ModelError(f"{file}: {name} holds values that are not finite numbers")
    if not (scale > 0).all():
        raise ModelError(f"{file}: scale must be above 0 for every feature")
