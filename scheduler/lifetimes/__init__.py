"""Lifetime prediction: how much longer a pod will run, from its workload's history, at its age.

One implementation, used by the energy plugin, the rebalancer, the simulator and the feature
rows. The API (stable):

    from scheduler.lifetimes import LifetimePredictor, load_state, save_state

    predictor = LifetimePredictor()                    # priors only (priors={kind: seconds})
    predictor.predict_remaining(pod, age_s) -> float   # seconds `pod` (a PodInfo) runs on
    predictor.predict(pod, age_s) -> Prediction        # .remaining_s, .level, .samples
    predictor.observe_end(pod, lifetime_s, disrupted=False) -> bool   # a pod ended
    predictor.version                                  # bumped by every lifetime learned
    load_state(predictor, path) -> bool / save_state(predictor, path) # the versioned state file
    LifetimeCollector(predictor)                       # its Prometheus metrics

`age_s` is the time since the pod started (its placement); `lifetime_s` the time from start to
end. A pod's *workload* is its controlling owner (`WorkloadKey`): namespace, owner kind, and the
owner's name without the suffix a CronJob gives its Jobs (`-<minute>`) or a Deployment its
ReplicaSets (`-<pod-template-hash>`), so a CronJob's runs and a Deployment's rollouts share one
history.

How it predicts (the mean residual life, as LAVA re-predicts: Google, MLSys 2025):
`E[D − a | D > a]` over the lifetimes `D` of finished pods that lived longer than the pod's age
`a` — of the same controller (its last 256), then of the same owner kind in the namespace (last
1,024), then the owner kind's prior (a Lomax distribution of shape 2, whose mean residual life is
`scale + a`: Job 30 min, ReplicaSet / StatefulSet / ReplicationController 1 day, a bare pod or
another kind 1 h). A level with `n` such lifetimes is blended with the next one's answer,
`(n × its mean + 3 × next) / (n + 3)`, so a thin history leans on the broader one. A pod that
outlives its prediction is predicted again at its new age, from the lifetimes longer than that:
conditioned on surviving, never a stale one-shot guess.

Where lifetimes come from: pods that end on their own — in a cluster the scheduler's cluster
cache (a pod that reaches Succeeded/Failed or is deleted, unless a `DisruptionTarget` condition
says it was evicted or preempted), in the simulator the pods that finish in the simulation.
Never from a trace's durations.

Bad input falls back to the priors and says so (a log line, at most one per minute per reason,
and `kubejoule_lifetime_fallbacks_total{reason}`): a pod without an owner (`no_owner`: always the
bare-pod prior, nothing learned), a workload without history past the age (`no_history`), a
negative, NaN or absurd (> 10 years) age or lifetime (`clock_jump`: the age is clamped, the
lifetime ignored), a state file that cannot be read or holds a wrong value (`state_corrupt`) or
is of another schema (`state_version`).

Errors are exported (`scheduler.lifetimes.metrics`): a histogram of predicted / actual lifetime
of every pod learned from, predicted at age 0 just before it was learned.

May import domain/ only."""

from scheduler.lifetimes.history import DEFAULT_PRIOR_SECONDS, prior_remaining
from scheduler.lifetimes.metrics import LifetimeCollector
from scheduler.lifetimes.predictor import (
    FALLBACK_CLOCK_JUMP,
    FALLBACK_NO_HISTORY,
    FALLBACK_NO_OWNER,
    FALLBACK_REASONS,
    FALLBACK_STATE_CORRUPT,
    FALLBACK_STATE_VERSION,
    LEVEL_CONTROLLER,
    LEVEL_NAMESPACE,
    LEVEL_PRIOR,
    LEVELS,
    LifetimePredictor,
    Prediction,
    WorkloadKey,
    controller_name,
)
from scheduler.lifetimes.state import STATE_SCHEMA, load_state, save_state

__all__ = [
    "DEFAULT_PRIOR_SECONDS",
    "FALLBACK_CLOCK_JUMP",
    "FALLBACK_NO_HISTORY",
    "FALLBACK_NO_OWNER",
    "FALLBACK_REASONS",
    "FALLBACK_STATE_CORRUPT",
    "FALLBACK_STATE_VERSION",
    "LEVELS",
    "LEVEL_CONTROLLER",
    "LEVEL_NAMESPACE",
    "LEVEL_PRIOR",
    "STATE_SCHEMA",
    "LifetimeCollector",
    "LifetimePredictor",
    "Prediction",
    "WorkloadKey",
    "controller_name",
    "load_state",
    "prior_remaining",
    "save_state",
]
