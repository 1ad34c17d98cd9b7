"""The MLP energy model: the energy a placement costs, learned from measured outcomes.

Data: decision-log JSONL (`scheduler/decisionlog/`), from a real cluster (the standalone
scheduler) or from the simulator (`kubejoule-rl benchmark --decision-log FILE`). A sample is a
decision line's chosen candidate (its feature schema v3 row) joined with its outcome line:

    target = (watts_after − watts_before) × window_seconds        joules over the window

— what the node drew more (or less) after the placement, as measured; never the heuristic's
score. Decisions without v3 features, or whose outcome has no power after, are skipped and
counted; a log holding only older schemas (v2 before issue 24, v1 from the extender before it)
is refused with a message saying so (exit 2): re-collect it.

Training: the same shared per-row network as the DQN (`rl.learning.dqn.network.RowMLP`), absolute error
on the standardized target (the measured target is heavy-tailed — other pods start and finish
in the window — and the evaluation reports mean absolute error; a first version trained on the
squared error was worse than the line fit on that measure), Adam, full passes over the data in
a seeded order. Every
training sample is also shown with its curve features blanked (`curve_known` = 0, idle, max and
ΔP unknown), so one model serves nodes with and without a calibration curve.

Evaluation on held-out nodes (a fixed 25 % of node names, by CRC-32): mean absolute error of the
model with and without the curve features, against the heuristic's own predictions — its ΔP from
the curve, and the line it fits online to the node's (utilization, watts) history (scheduler/
plugins/energy/history.py, fed with the telemetry each decision line saw), both × the window.
"""

from __future__ import annotations

import argparse
import math
import sys
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.decisionlog.logfile import read_records
from scheduler.learning.features import encode
from scheduler.learning.features_v3 import FEATURE_SCHEMA_V3
from scheduler.plugins.energy.history import NodeHistory

SCHEMA = FEATURE_SCHEMA_V3
NAMES = SCHEMA.node_features + SCHEMA.pod_features
CURVE_FEATURES = ("curve_known", "idle_watts", "max_watts", "delta_watts")
HELD_OUT_SHARE = 4  # 1 in 4 node names is held out


@dataclass
class Samples:
    rows: list[list[float]] = field(default_factory=list)
    joules: list[float] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    curve_joules: list[float | None] = field(default_factory=list)  # the heuristic's ΔP × window
    line_joules: list[float | None] = field(default_factory=list)  # online line fit × window
    skipped: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def held_out(node: str) -> bool:
    return zlib.crc32(node.encode()) % HELD_OUT_SHARE == 0


def load_samples(paths: Sequence[str | Path]) -> Samples:
    """Join decisions with outcomes, in time order per file (see the module docstring)."""
    out = Samples()
    for path in paths:
        records, bad = read_records(path)
        out.skipped["unreadable lines"] += bad
        outcomes = {r["id"]: r for r in records if r.get("type") == "outcome"}
        histories: dict[tuple[str, str], NodeHistory] = {}
        decisions = sorted(
            (r for r in records if r.get("type") == "decision"), key=lambda r: r["time"]
        )
        for record in decisions:
            run = str(record.get("run", ""))
            for c in record.get("candidates") or []:  # the telemetry the scheduler saw
                f = c.get("features") or {}
                if f.get("utilization") is not None and f.get("watts") is not None:
                    key = (run, c["node"])
                    history = histories.setdefault(key, NodeHistory())
                    age = f.get("telemetry_age_seconds") or 0.0
                    history.add(record["time"] - age, f["utilization"], f["watts"])
            _add_sample(
                out,
                record,
                outcomes.get(record["id"]),
                histories.get((run, record.get("chosen") or "")),
            )
    return out


def _add_sample(
    out: Samples,
    record: dict[str, Any],
    outcome: dict[str, Any] | None,
    history: NodeHistory | None,
) -> None:
    schema = record.get("feature_schema")
    if schema != SCHEMA.version:
        out.skipped[f"feature schema {schema or 'kubejoule.features/v1'}"] += 1
        return
    chosen = next(
        (c for c in record.get("candidates") or [] if c["node"] == record.get("chosen")), None
    )
    if chosen is None or not chosen.get("features"):
        out.skipped["no chosen candidate with features"] += 1
        return
    if outcome is None or outcome.get("watts_after") is None or outcome.get("watts_before") is None:
        out.skipped["no outcome with power before and after"] += 1
        return
    window = float(outcome["window_seconds"])
    features = chosen["features"]
    try:
        row = encode(features, NAMES)
    except (KeyError, TypeError, ValueError):
        out.skipped["features missing or not numbers"] += 1
        return
    if not all(math.isfinite(v) for v in row):
        out.skipped["features missing or not numbers"] += 1
        return
    out.rows.append(row)
    out.joules.append((outcome["watts_after"] - outcome["watts_before"]) * window)
    out.nodes.append(str(record["chosen"]))
    delta = features.get("delta_watts") if features.get("curve_known") else None
    out.curve_joules.append(delta * window if delta is not None else None)
    fit = history.fit() if history is not None else None
    du = features.get("pod_delta_utilization")
    out.line_joules.append(
        fit.slope_watts * du * window if fit is not None and du is not None else None
    )


def blank_curves(rows: np.ndarray) -> np.ndarray:
    """The rows as a node without a calibration curve shows them."""
    blanked = rows.copy()
    for name in CURVE_FEATURES:
        blanked[:, NAMES.index(name)] = 0.0
    return blanked


def _mae(predicted: np.ndarray, actual: np.ndarray) -> float:
    return float(np.mean(np.abs(predicted - actual))) if len(actual) else float("nan")


def evaluate(predict: Callable[[np.ndarray], np.ndarray], samples: Samples) -> dict[str, object]:
    """Errors (J over the window) on the held-out nodes; see the module docstring."""
    test = np.array([held_out(n) for n in samples.nodes], dtype=bool)
    rows = np.asarray(samples.rows, dtype=np.float64)[test]
    actual = np.asarray(samples.joules)[test]
    curve = [v for v, t in zip(samples.curve_joules, test, strict=True) if t]
    line = [v for v, t in zip(samples.line_joules, test, strict=True) if t]
    with_curve = predict(rows)
    without_curve = predict(blank_curves(rows))
    has_line = np.array([v is not None for v in line], dtype=bool)
    has_curve = np.array([v is not None for v in curve], dtype=bool)
    return {
        "held_out_nodes": sorted({n for n, t in zip(samples.nodes, test, strict=True) if t}),
        "samples": int(test.sum()),
        "mean_abs_target_joules": _mae(np.zeros(len(actual)), actual),
        "mlp_mae_joules": _mae(with_curve, actual),
        "mlp_without_curve_mae_joules": _mae(without_curve, actual),
        "heuristic_curve_mae_joules": _mae(
            np.array([v for v in curve if v is not None]), actual[has_curve]
        ),
        "heuristic_curve_coverage": float(has_curve.mean()) if len(actual) else 0.0,
        "line_fit_mae_joules": _mae(np.array([v for v in line if v is not None]), actual[has_line]),
        "mlp_without_curve_mae_where_line_fit_joules": _mae(
            without_curve[has_line], actual[has_line]
        ),
        "line_fit_coverage": float(has_line.mean()) if len(actual) else 0.0,
        "mlp_without_curve_mae_where_no_line_fit_joules": _mae(
            without_curve[~has_line], actual[~has_line]
        ),
        "mean_abs_target_where_no_line_fit_joules": _mae(
            np.zeros(int((~has_line).sum())), actual[~has_line]
        ),
    }


def train_mlp(
    samples: Samples, seed: int, epochs: int = 60, hidden: int = 64
) -> tuple[Any, list[float], float]:
    """(network with the target scale folded in, loss per epoch, target scale)."""
    import torch

    from rl.learning.dqn.network import RowMLP

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    train_mask = np.array([not held_out(n) for n in samples.nodes], dtype=bool)
    rows = np.asarray(samples.rows, dtype=np.float64)[train_mask]
    target = np.asarray(samples.joules)[train_mask]
    if len(rows) < 10:
        older = {k: v for k, v in samples.skipped.items() if k.startswith("feature schema")}
        hint = (
            f"; skipped decisions of other feature schemas {older}: this trainer reads "
            f"{SCHEMA.version} (re-collect the log with this version)"
            if older
            else ""
        )
        raise ValueError(
            f"too few training samples ({len(rows)}) in the decision files{hint}"
        )
    rows = np.concatenate([rows, blank_curves(rows)])
    target = np.concatenate([target, target])
    scale = float(np.std(target)) or 1.0
    net = RowMLP(rows.shape[1], hidden)
    net.set_standardization(rows)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    x, y = torch.as_tensor(rows), torch.as_tensor(target / scale)
    order = np.random.default_rng(seed)
    losses = []
    for _ in range(epochs):
        total = 0.0
        for batch in np.array_split(order.permutation(len(x)), max(1, len(x) // 256)):
            index = torch.as_tensor(batch)
            loss = torch.nn.functional.l1_loss(net(x[index]), y[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(batch)
        losses.append(total / len(x))
    last = [m for m in net.body if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():  # outputs in joules
        last.weight.mul_(scale)
        last.bias.mul_(scale)
    return net, losses, scale


def train_mlp_command(args: argparse.Namespace, curve: str, code_version: str) -> int:
    import torch

    from rl.learning.dqn.network import save_checkpoint

    try:
        samples = load_samples(args.decisions)
        net, losses, scale = train_mlp(samples, args.seed, epochs=args.epochs)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"kubejoule-rl train: {exc}", file=sys.stderr)
        return 2

    def predict(rows: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return net(torch.as_tensor(rows)).numpy()

    report = evaluate(predict, samples)
    train_rows = np.asarray(samples.rows, dtype=np.float64)
    outputs = predict(train_rows)
    low, mid, high = np.quantile(outputs, [0.1, 0.5, 0.9])
    meta = {
        "kind": "mlp",
        "feature_schema": SCHEMA.to_dict(),
        "score_map": {
            "center": float(mid),
            "spread": float(max((high - low) / 4, 1e-9)),
            "sign": -1.0,
        },
        "target": "joules over the outcome window: (watts_after − watts_before) × window_seconds",
        "training": {
            "decisions": [str(p) for p in args.decisions],
            "samples": len(samples.joules),
            "skipped": dict(samples.skipped),
            "seed": args.seed,
            "target_scale_joules": scale,
            "final_loss": losses[-1],
        },
        "evaluation": report,
        "code_version": code_version,
        "torch_version": torch.__version__,
    }
    settings = {"width": len(NAMES), "hidden": 64, "layers": 2}
    npz = save_checkpoint(args.out, net, settings, meta)
    _plot(losses, curve)
    print(f"wrote {args.out}, {npz}, {curve}: {len(samples.joules)} samples", file=sys.stderr)
    for key, value in report.items():
        if key != "held_out_nodes":
            print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    return 0


def _plot(losses: list[float], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(losses) + 1), losses)
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean absolute error (standardized joules)")
    ax.set_title("MLP energy model: training loss")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
