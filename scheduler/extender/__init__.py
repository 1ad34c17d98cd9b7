"""kube-scheduler extender (v1 JSON) serving the energy scorer: `POST /filter`, `POST /prioritize`.

* `wire` — kube-scheduler's extender/v1 JSON: request parsing, the HostPriorityList encoder;
* `decisions` — one `ExtenderCall` per call (what the decision log records of it), recorders, the recommendation;
* `state` — node states from the TelemetryStore (and the cluster view), the prepared batch;
* `caps` — power caps (`/filter`);
* `metrics` — the extender's Prometheus metrics;
* `core` — `Extender`: the verbs, shadow and active modes;
* `app` — the HTTP app.

May import every part below the entry points: domain/, framework/, plugins/, lifetimes/, learning/, telemetry/,
cluster/, decisionlog/, service/, config/."""

from scheduler.extender.app import create_app
from scheduler.extender.core import MODE_ACTIVE, MODE_SHADOW, Extender
from scheduler.extender.decisions import DecisionRecorder, ExtenderCall, MemoryRecorder

__all__ = [
    "MODE_ACTIVE",
    "MODE_SHADOW",
    "ExtenderCall",
    "DecisionRecorder",
    "Extender",
    "MemoryRecorder",
    "create_app",
]
