"""The lifetime predictor's state file: what it learned, so a restart does not start from the
priors.

JSON, written atomically (a temporary file in the same directory, flushed, then renamed over
the old one):

    {"schema": "kubejoule.lifetimes/v1", "saved_at": <epoch seconds>,
     "histories": [{"namespace": str, "kind": str, "controller": str | null,
                    "lifetimes": [seconds, …]}, …]}

A history with a `controller` is that controller's; one with `controller: null` is its owner
kind's in that namespace. Reading a file that is missing starts from the priors quietly (a first
start); one that cannot be parsed, holds a wrong value anywhere, or carries another schema starts
from the priors too, and says so (a fallback counted under `state_corrupt` or `state_version`
and a log line) — never half a state, never an exception.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import threading
import time
from pathlib import Path

from scheduler.lifetimes.predictor import (
    FALLBACK_STATE_CORRUPT,
    FALLBACK_STATE_VERSION,
    MAX_LIFETIME_SECONDS,
    LifetimePredictor,
    WorkloadKey,
)

STATE_SCHEMA = "kubejoule.lifetimes/v1"


def state_document(predictor: LifetimePredictor, now: float | None = None) -> dict[str, object]:
    return {
        "schema": STATE_SCHEMA,
        "saved_at": time.time() if now is None else now,
        "histories": [
            {
                "namespace": key.namespace,
                "kind": key.kind,
                "controller": key.controller,
                "lifetimes": [round(v, 3) for v in values],
            }
            for key, values in predictor.histories()
        ],
    }


def save_state(predictor: LifetimePredictor, path: str | Path) -> None:
    """Write the predictor's state to `path` atomically (OSError when the directory is not
    writable)."""
    target = Path(path)
    text = json.dumps(state_document(predictor), separators=(",", ":"))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class StateError(ValueError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _histories(document: object) -> list[tuple[WorkloadKey, list[float]]]:
    if not isinstance(document, dict):
        raise StateError(FALLBACK_STATE_CORRUPT, "not a JSON object")
    if document.get("schema") != STATE_SCHEMA:
        raise StateError(
            FALLBACK_STATE_VERSION, f"schema {document.get('schema')!r}, expected {STATE_SCHEMA}"
        )
    items = document.get("histories")
    if not isinstance(items, list):
        raise StateError(FALLBACK_STATE_CORRUPT, "histories: expected a list")
    out = []
    for i, item in enumerate(items):
        where = f"histories[{i}]"
        if not isinstance(item, dict):
            raise StateError(FALLBACK_STATE_CORRUPT, f"{where}: expected an object")
        namespace, kind, controller = item.get("namespace"), item.get("kind"), item.get("controller")
        if not isinstance(namespace, str) or not isinstance(kind, str) or not kind:
            raise StateError(FALLBACK_STATE_CORRUPT, f"{where}: namespace and kind must be strings")
        if controller is not None and not isinstance(controller, str):
            raise StateError(FALLBACK_STATE_CORRUPT, f"{where}.controller: expected a string")
        lifetimes = item.get("lifetimes")
        if not isinstance(lifetimes, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool)
            and math.isfinite(v) and 0 <= v <= MAX_LIFETIME_SECONDS
            for v in lifetimes
        ):
            raise StateError(FALLBACK_STATE_CORRUPT, f"{where}.lifetimes: expected seconds")
        out.append((WorkloadKey(namespace, kind, controller), [float(v) for v in lifetimes]))
    return out


def load_state(predictor: LifetimePredictor, path: str | Path) -> bool:
    """Fill `predictor` from the state file; False (priors kept, and said) when it cannot be
    used. A missing file is a first start: False, and nothing to say."""
    target = Path(path)
    try:
        text = target.read_text()
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError) as exc:
        predictor.fallback(FALLBACK_STATE_CORRUPT, f"cannot read {target}: {exc}")
        return False
    try:
        histories = _histories(json.loads(text))
    except json.JSONDecodeError as exc:
        predictor.fallback(FALLBACK_STATE_CORRUPT, f"{target} is not JSON: {exc}")
        return False
    except StateError as exc:
        predictor.fallback(exc.reason, f"{target}: {exc}")
        return False
    for key, lifetimes in histories:
        predictor.restore(key, lifetimes)
    return True


_log = logging.getLogger(__name__)


def save_quietly(predictor: LifetimePredictor, path: str | Path) -> bool:
    """save_state(), a failure logged instead of raised (a full disk must not stop a scheduler)."""
    try:
        save_state(predictor, path)
    except OSError as exc:
        _log.warning("could not write the lifetime state file: %s", exc)
        return False
    return True


def saving_thread(
    predictor: LifetimePredictor, path: str | Path, stop: threading.Event, every_seconds: float
) -> threading.Thread:
    """A daemon thread (not started) that writes the state every `every_seconds` until `stop`
    is set; the caller writes it once more on its way out."""

    def run() -> None:
        while not stop.wait(every_seconds):
            save_quietly(predictor, path)

    return threading.Thread(target=run, daemon=True, name="lifetime-state")
