"""The lifetime predictor: a pod's remaining lifetime from its workload's finished pods, at its
age (the package docstring has the API and the rules)."""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from scheduler.domain.model import PodInfo
from scheduler.lifetimes.history import (
    BARE_POD_PRIOR_SECONDS,
    DEFAULT_PRIOR_SECONDS,
    OTHER_PRIOR_SECONDS,
    Durations,
    prior_remaining,
)

log = logging.getLogger(__name__)

LEVEL_CONTROLLER = "controller"  # finished pods of the same controller
LEVEL_NAMESPACE = "namespace"  # … of the same owner kind in the same namespace
LEVEL_PRIOR = "prior"  # the owner kind's prior alone
LEVELS = (LEVEL_CONTROLLER, LEVEL_NAMESPACE, LEVEL_PRIOR)

# Why a prediction (or the whole state) fell back to the priors.
FALLBACK_NO_OWNER = "no_owner"  # a bare pod: no workload to learn from
FALLBACK_NO_HISTORY = "no_history"  # no finished pod of its workload lived past its age
FALLBACK_CLOCK_JUMP = "clock_jump"  # a negative age or lifetime, or an absurd one
FALLBACK_STATE_CORRUPT = "state_corrupt"  # a state file that cannot be read
FALLBACK_STATE_VERSION = "state_version"  # a state file of another schema version
FALLBACK_REASONS = (
    FALLBACK_NO_OWNER,
    FALLBACK_NO_HISTORY,
    FALLBACK_CLOCK_JUMP,
    FALLBACK_STATE_CORRUPT,
    FALLBACK_STATE_VERSION,
)

# Prediction / actual lifetime of pods that ended, as predicted at age 0 just before learning
# from them: the error histogram's upper bounds (the last bucket is +Inf).
ERROR_BUCKETS = (0.125, 0.25, 0.5, 0.8, 1.25, 2.0, 4.0, 8.0, math.inf)

MAX_LIFETIME_SECONDS = 10 * 365 * 86_400.0  # longer is a clock jump, not a pod
CONTROLLER_WINDOW = 256  # lifetimes kept per controller
NAMESPACE_WINDOW = 1024  # … per owner kind and namespace
MAX_CONTROLLERS = 20_000  # controllers remembered (least recently ended dropped first)
BLEND = 3.0  # pseudo-count of the next level in a thin level's answer
LOG_EVERY_SECONDS = 60.0  # one log line per fallback reason at most this often

# A Job made by a CronJob is named <cronjob>-<scheduled minute since the epoch>; its pods share
# the CronJob's history. A ReplicaSet made by a Deployment is <deployment>-<pod-template-hash>;
# its pods share the Deployment's history across rollouts.
_CRONJOB_SUFFIX = re.compile(r"-\d{8,10}$")
POD_TEMPLATE_HASH = "pod-template-hash"


@dataclass(frozen=True)
class WorkloadKey:
    """Which history predicts a pod: its namespace, its controlling owner's kind and the
    controller (the owner's name without a CronJob's or Deployment's generated suffix)."""

    namespace: str
    kind: str | None  # None: a bare pod
    controller: str | None

    @classmethod
    def of(cls, pod: PodInfo) -> WorkloadKey:
        return cls(pod.namespace, pod.owner_kind, controller_name(pod))


def controller_name(pod: PodInfo) -> str | None:
    """The pod's controller for its history (WorkloadKey)."""
    name = pod.owner_name
    if name is None:
        return None
    if pod.owner_kind == "Job":
        return _CRONJOB_SUFFIX.sub("", name)
    if pod.owner_kind == "ReplicaSet":
        template_hash = dict(pod.labels).get(POD_TEMPLATE_HASH)
        if template_hash and name.endswith("-" + template_hash):
            return name[: -len(template_hash) - 1]
    return name


@dataclass(frozen=True)
class Prediction:
    remaining_s: float  # seconds the pod is expected to run on
    level: str  # the most specific level whose history answered (LEVELS)
    samples: int  # lifetimes of that level longer than the age


class LifetimePredictor:
    """Thread-safe: watch threads report ends while scoring threads predict."""

    def __init__(
        self,
        priors: Mapping[str, float] | None = None,
        controller_window: int = CONTROLLER_WINDOW,
        namespace_window: int = NAMESPACE_WINDOW,
        blend: float = BLEND,
        max_controllers: int = MAX_CONTROLLERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.priors = dict(DEFAULT_PRIOR_SECONDS if priors is None else priors)
        if any(not (v > 0 and math.isfinite(v)) for v in self.priors.values()):
            raise ValueError("lifetime priors must be positive seconds")
        self.controller_window = controller_window
        self.namespace_window = namespace_window
        self.blend = blend
        self.max_controllers = max_controllers
        self._clock = clock
        self._lock = threading.Lock()
        self._controllers: OrderedDict[WorkloadKey, Durations] = OrderedDict()
        self._namespaces: dict[tuple[str, str], Durations] = {}
        self.version = 0  # bumped by every lifetime learned
        self.fallbacks = dict.fromkeys(FALLBACK_REASONS, 0)
        self.predictions = dict.fromkeys(LEVELS, 0)
        self.observed = 0
        self.error_counts = {level: [0] * len(ERROR_BUCKETS) for level in LEVELS}
        self.error_sums = dict.fromkeys(LEVELS, 0.0)
        self._logged: dict[str, float] = {}

    # -- predicting -----------------------------------------------------------------------------

    def prior_seconds(self, kind: str | None) -> float:
        if kind is None:
            return BARE_POD_PRIOR_SECONDS
        return self.priors.get(kind, OTHER_PRIOR_SECONDS)

    def predict_remaining(self, pod: PodInfo, age_s: float) -> float:
        """Seconds `pod` is expected to run on, at `age_s` seconds since it started."""
        return self.predict(pod, age_s).remaining_s

    def predict(self, pod: PodInfo, age_s: float) -> Prediction:
        return self.predict_key(WorkloadKey.of(pod), age_s)

    def predict_key(self, key: WorkloadKey, age_s: float) -> Prediction:
        if not age_s >= 0.0 or age_s > MAX_LIFETIME_SECONDS:  # negative, NaN or absurd
            self.fallback(FALLBACK_CLOCK_JUMP, f"age {age_s!r} s of a pod of {_describe(key)}")
            age_s = 0.0 if not age_s > 0.0 else MAX_LIFETIME_SECONDS
        prior = prior_remaining(self.prior_seconds(key.kind), age_s)
        if key.kind is None:
            self._count(LEVEL_PRIOR)
            self.fallback(FALLBACK_NO_OWNER, f"pod without an owner in {key.namespace}")
            return Prediction(prior, LEVEL_PRIOR, 0)
        with self._lock:
            namespace = self._namespaces.get((key.namespace, key.kind))
            controller = self._controllers.get(key) if key.controller is not None else None
            ns_mean, ns_n = namespace.residual(age_s) if namespace is not None else (math.nan, 0)
            c_mean, c_n = controller.residual(age_s) if controller is not None else (math.nan, 0)
        value = self._blend(ns_mean, ns_n, prior)
        value = self._blend(c_mean, c_n, value)
        if c_n:
            level, samples = LEVEL_CONTROLLER, c_n
        elif ns_n:
            level, samples = LEVEL_NAMESPACE, ns_n
        else:
            level, samples = LEVEL_PRIOR, 0
            self.fallback(FALLBACK_NO_HISTORY, f"no lifetime of {_describe(key)} past {age_s:.0f} s")
        self._count(level)
        return Prediction(value, level, samples)

    def _blend(self, mean: float, n: int, parent: float) -> float:
        if n == 0:
            return parent
        return (n * mean + self.blend * parent) / (n + self.blend)

    def _count(self, level: str) -> None:
        self.predictions[level] += 1

    # -- learning -------------------------------------------------------------------------------

    def observe_end(self, pod: PodInfo, lifetime_s: float, disrupted: bool = False) -> bool:
        """A pod ended after running `lifetime_s` seconds. Learned from only when it ended on
        its own (`disrupted`: evicted, preempted — its lifetime was cut, not lived), has an
        owner and a plausible lifetime. Returns whether it was learned from."""
        key = WorkloadKey.of(pod)
        if disrupted or key.kind is None:
            return False
        if not 0.0 <= lifetime_s <= MAX_LIFETIME_SECONDS:  # also NaN
            self.fallback(FALLBACK_CLOCK_JUMP, f"lifetime {lifetime_s!r} s of {pod.key} ignored")
            return False
        self._record_error(self.predict_key(key, 0.0), lifetime_s)
        self.learn(key, lifetime_s)
        return True

    def learn(self, key: WorkloadKey, lifetime_s: float) -> None:
        """Add one lifetime to the key's histories (no checks: observe_end() and the state file
        reader check their input)."""
        assert key.kind is not None
        with self._lock:
            group = (key.namespace, key.kind)
            namespace = self._namespaces.get(group)
            if namespace is None:
                namespace = self._namespaces[group] = Durations(self.namespace_window)
            namespace.add(lifetime_s)
            if key.controller is not None:
                controller = self._controllers.get(key)
                if controller is None:
                    controller = self._controllers[key] = Durations(self.controller_window)
                    while len(self._controllers) > self.max_controllers:
                        self._controllers.popitem(last=False)
                else:
                    self._controllers.move_to_end(key)
                controller.add(lifetime_s)
            self.version += 1
            self.observed += 1

    def _record_error(self, predicted: Prediction, actual_s: float) -> None:
        ratio = predicted.remaining_s / actual_s if actual_s > 0 else math.inf
        counts = self.error_counts[predicted.level]
        for i, bound in enumerate(ERROR_BUCKETS):
            if ratio <= bound:
                counts[i] += 1
                break
        if math.isfinite(ratio):
            self.error_sums[predicted.level] += ratio

    # -- state ----------------------------------------------------------------------------------

    def histories(self) -> Iterator[tuple[WorkloadKey, list[float]]]:
        """Every controller's kept lifetimes, then every (kind, namespace)'s under a key
        without a controller (what the state file holds)."""
        with self._lock:
            controllers = [(k, d.values()) for k, d in self._controllers.items()]
            namespaces = [
                (WorkloadKey(ns, kind, None), d.values())
                for (ns, kind), d in self._namespaces.items()
            ]
        yield from controllers
        yield from namespaces

    def restore(self, key: WorkloadKey, lifetimes: list[float]) -> None:
        """Put back one history of histories() (a controller's, or a namespace's when
        `key.controller` is None) without touching the other level."""
        assert key.kind is not None
        window = self.controller_window if key.controller is not None else self.namespace_window
        durations = Durations(window, lifetimes)
        with self._lock:
            if key.controller is not None:
                self._controllers[key] = durations
            else:
                self._namespaces[(key.namespace, key.kind)] = durations
            self.version += 1

    # -- saying so ------------------------------------------------------------------------------

    def fallback(self, reason: str, detail: str) -> None:
        """Count a fall back to the priors, and log it (once a minute per reason at most)."""
        self.fallbacks[reason] += 1
        now = self._clock()
        last = self._logged.get(reason)
        if last is None or now - last >= LOG_EVERY_SECONDS:
            self._logged[reason] = now
            log.info(
                "lifetime prediction falls back to priors (%s): %s [%d so far]",
                reason, detail, self.fallbacks[reason],
            )


def _describe(key: WorkloadKey) -> str:
    return f"{key.kind}/{key.controller or '?'} in {key.namespace}"
