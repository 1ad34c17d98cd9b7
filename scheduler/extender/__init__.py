"""kube-scheduler extender (v1 JSON) serving the energy scorer: `POST /filter`, `POST /prioritize`.

* `body` — request bodies admitted: the per-request limit, the in-flight budget, `BadRequest`;
* `wire` — kube-scheduler's extender/v1 JSON: request parsing, the HostPriorityList encoder
  (`jsonwalk`: the syntax check of a large body);
* `calls` — one `ExtenderCall` per call (what the decision log records of it), recorders, the
  recommendation; `recorder` — the decision log's lines of them;
* `state` — node states from the TelemetryStore (and the cluster view), the prepared batch;
* `publish` — a prepared batch as columns in shared memory; `refresher` — the process that
  prepares and publishes them; `remote` — the request process's side (`RemoteStates`);
* `caps` — power caps (`/filter`);
* `metrics` — the extender's Prometheus metrics;
* `core` — `Extender`: the verbs, shadow and active modes;
* `wiring` — the extender built from the configuration (`kubejoule-scheduler extender`);
* `app` — the HTTP app.

Inside, imports go one way (no cycles, import-linter's acyclic-packages): `refresher` (a process
of its own) → `wiring` → `core` → `remote` → `state` → `wire` → `body`.

May import every part below the entry points: domain/, framework/, plugins/, lifetimes/, learning/, telemetry/,
cluster/, decisionlog/, service/, config/ (`wiring` builds the extender with it: config/ sits below
the four ways the scheduler runs and imports none of them); standalone/, autoscaler/, rebalancer/
never."""

from scheduler.extender.app import create_app
from scheduler.extender.calls import CallRecorder, ExtenderCall, MemoryRecorder
from scheduler.extender.core import MODE_ACTIVE, MODE_SHADOW, Extender

__all__ = [
    "MODE_ACTIVE",
    "MODE_SHADOW",
    "ExtenderCall",
    "CallRecorder",
    "Extender",
    "MemoryRecorder",
    "create_app",
]
