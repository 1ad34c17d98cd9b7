"""The lifetime predictor (scheduler/lifetimes): workload keys, priors, the conditional
(mean residual life) prediction and its blending, learning, bad input, the state file and the
metrics. Expected values are computed by hand from the package docstring's rules."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.domain.model import PodInfo, Resources
from scheduler.lifetimes import (
    FALLBACK_CLOCK_JUMP,
    FALLBACK_NO_HISTORY,
    FALLBACK_NO_OWNER,
    FALLBACK_STATE_CORRUPT,
    FALLBACK_STATE_VERSION,
    LEVEL_CONTROLLER,
    LEVEL_NAMESPACE,
    LEVEL_PRIOR,
    STATE_SCHEMA,
    LifetimeCollector,
    LifetimePredictor,
    WorkloadKey,
    load_state,
    save_state,
)


def pod(
    kind: str | None = "Job",
    owner: str | None = "etl",
    namespace: str = "batch",
    name: str = "p",
    labels: tuple[tuple[str, str], ...] = (),
) -> PodInfo:
    return PodInfo(
        namespace, name, f"uid-{name}", Resources(cpu_millicores=500, pods=1),
        owner_kind=kind, owner_name=owner if kind else None, labels=labels,
    )


def test_owner_name_is_read_from_the_controlling_owner_reference() -> None:
    info = pod_info_from_k8s({
        "metadata": {"name": "w-1", "ownerReferences": [
            {"kind": "Node", "name": "n1"},
            {"kind": "ReplicaSet", "name": "web-5d8f", "controller": True},
        ]},
        "spec": {"containers": []},
    })
    assert (info.owner_kind, info.owner_name) == ("ReplicaSet", "web-5d8f")
    bare = pod_info_from_k8s({"metadata": {"name": "b"}, "spec": {"containers": []}})
    assert (bare.owner_kind, bare.owner_name) == (None, None)


def test_workload_key_strips_generated_suffixes() -> None:
    cron = pod("Job", "backup-28391234")
    assert WorkloadKey.of(cron) == WorkloadKey("batch", "Job", "backup")
    assert WorkloadKey.of(pod("Job", "backup-v2")).controller == "backup-v2"
    deployment = pod("ReplicaSet", "web-5d8f7c9b4", labels=(("pod-template-hash", "5d8f7c9b4"),))
    assert WorkloadKey.of(deployment).controller == "web"
    # Without the label (or another value) the name is kept: no guessing at hashes.
    assert WorkloadKey.of(pod("ReplicaSet", "web-5d8f7c9b4")).controller == "web-5d8f7c9b4"
    assert WorkloadKey.of(pod(None)) == WorkloadKey("batch", None, None)


def test_priors_are_lomax_mean_residual_lives_by_owner_kind() -> None:
    p = LifetimePredictor()
    assert p.predict_remaining(pod("Job"), 0.0) == 1800.0
    assert p.predict_remaining(pod("Job"), 600.0) == 2400.0  # scale + age
    assert p.predict_remaining(pod("ReplicaSet"), 0.0) == 86_400.0
    assert p.predict_remaining(pod("CronWorkflow"), 10.0) == 3610.0  # another kind: 1 h
    assert p.fallbacks[FALLBACK_NO_HISTORY] == 4
    bare = p.predict(pod(None), 5.0)
    assert (bare.remaining_s, bare.level) == (3605.0, LEVEL_PRIOR)
    assert p.fallbacks[FALLBACK_NO_OWNER] == 1
    assert LifetimePredictor(priors={"Job": 60.0}).predict_remaining(pod("Job"), 0.0) == 60.0
    with pytest.raises(ValueError):
        LifetimePredictor(priors={"Job": 0.0})


def test_history_is_blended_level_by_level() -> None:
    p = LifetimePredictor()
    for _ in range(10):
        assert p.observe_end(pod("Job", "etl"), 100.0)
    # namespace level: (10 × 100 + 3 × 1800) / 13; controller: (10 × 100 + 3 × that) / 13
    namespace = (10 * 100 + 3 * 1800) / 13
    expected = (10 * 100 + 3 * namespace) / 13
    got = p.predict(pod("Job", "etl"), 0.0)
    assert got.remaining_s == pytest.approx(expected)
    assert (got.level, got.samples) == (LEVEL_CONTROLLER, 10)
    # Another Job of the namespace has only the namespace's history.
    other = p.predict(pod("Job", "report"), 0.0)
    assert other.remaining_s == pytest.approx(namespace)
    assert other.level == LEVEL_NAMESPACE
    # Another namespace: the prior.
    assert p.predict(pod("Job", "etl", namespace="web"), 0.0).level == LEVEL_PRIOR
    assert p.version == 10 and p.observed == 10


def test_prediction_is_conditioned_on_age() -> None:
    p = LifetimePredictor(blend=0.0)  # no blending: the empirical mean residual life itself
    for lifetime in [100.0] * 10 + [1000.0] * 10:
        p.observe_end(pod("Job", "etl"), lifetime)
    assert p.predict_remaining(pod("Job", "etl"), 0.0) == pytest.approx(550.0)
    # Past 100 s only the 1,000 s pods are left: 500 s to go at age 500.
    assert p.predict_remaining(pod("Job", "etl"), 500.0) == pytest.approx(500.0)
    # Outliving every lifetime seen: the prior at that age, and said.
    before = p.fallbacks[FALLBACK_NO_HISTORY]
    late = p.predict(pod("Job", "etl"), 1500.0)
    assert (late.remaining_s, late.level) == (1800.0 + 1500.0, LEVEL_PRIOR)
    assert p.fallbacks[FALLBACK_NO_HISTORY] == before + 1


def test_disrupted_bare_and_implausible_ends_are_not_learned() -> None:
    p = LifetimePredictor()
    assert not p.observe_end(pod("Job"), 100.0, disrupted=True)  # evicted: cut, not lived
    assert not p.observe_end(pod(None), 100.0)
    for bad in (-1.0, math.nan, 1e12):
        assert not p.observe_end(pod("Job"), bad)
    assert p.fallbacks[FALLBACK_CLOCK_JUMP] == 3
    assert p.observed == 0 and p.version == 0


def test_a_negative_or_nan_age_is_a_clock_jump_predicted_at_age_zero() -> None:
    p = LifetimePredictor()
    assert p.predict_remaining(pod("Job"), -30.0) == 1800.0
    assert p.predict_remaining(pod("Job"), math.nan) == 1800.0
    assert p.fallbacks[FALLBACK_CLOCK_JUMP] == 2


def test_windows_keep_the_most_recent_lifetimes_and_controllers() -> None:
    p = LifetimePredictor(controller_window=4, blend=0.0, max_controllers=2)
    for lifetime in (1000.0, 1000.0, 10.0, 10.0, 10.0, 10.0):
        p.observe_end(pod("Job", "etl"), lifetime)
    assert p.predict_remaining(pod("Job", "etl"), 0.0) == pytest.approx(10.0)
    p.observe_end(pod("Job", "a"), 50.0)
    p.observe_end(pod("Job", "b"), 70.0)  # the third controller: the least recent (etl) goes
    keys = [k.controller for k, _ in p.histories() if k.controller is not None]
    assert keys == ["a", "b"]


def test_the_error_histogram_counts_predicted_over_actual() -> None:
    p = LifetimePredictor()
    p.observe_end(pod("Job", "etl"), 1800.0)  # predicted 1800 by the prior: ratio 1
    p.observe_end(pod("Job", "etl"), 100.0)  # predicted (1800 + 3 × 1800) / 4 … by history
    assert sum(p.error_counts[LEVEL_PRIOR]) == 1
    assert p.error_counts[LEVEL_PRIOR][4] == 1  # 0.8 < 1.0 ≤ 1.25
    assert sum(p.error_counts[LEVEL_CONTROLLER]) == 1
    assert p.error_counts[LEVEL_CONTROLLER][-1] == 1  # 18× too long: past 8
    registry = CollectorRegistry()
    registry.register(LifetimeCollector(p))
    text = generate_latest(registry).decode()
    assert 'kubejoule_lifetime_prediction_ratio_bucket{le="1.25",level="prior"} 1.0' in text
    assert 'kubejoule_lifetime_prediction_ratio_count{level="controller"} 1.0' in text
    assert 'kubejoule_lifetime_observed_total 2.0' in text
    assert 'kubejoule_lifetime_fallbacks_total{reason="no_history"}' in text


def test_state_survives_a_restart(tmp_path) -> None:
    p = LifetimePredictor()
    for lifetime in (100.0, 200.0, 400.0):
        p.observe_end(pod("Job", "etl-28391234"), lifetime)
    p.observe_end(pod("ReplicaSet", "web", namespace="shop"), 7200.0)
    path = tmp_path / "lifetimes.json"
    save_state(p, path)
    assert json.loads(path.read_text())["schema"] == STATE_SCHEMA
    assert [f.name for f in tmp_path.iterdir()] == ["lifetimes.json"]  # no temporary left
    restarted = LifetimePredictor()
    assert load_state(restarted, path)
    for probe, age in ((pod("Job", "etl-28391299"), 0.0), (pod("Job", "other"), 150.0),
                       (pod("ReplicaSet", "web", namespace="shop"), 60.0)):
        assert restarted.predict_remaining(probe, age) == p.predict_remaining(probe, age)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", FALLBACK_STATE_CORRUPT),
        ('{"schema": "kubejoule.lifetimes/v0", "histories": []}', FALLBACK_STATE_VERSION),
        ('["a list"]', FALLBACK_STATE_CORRUPT),
        (json.dumps({"schema": STATE_SCHEMA, "histories": [
            {"namespace": "a", "kind": "Job", "controller": "x", "lifetimes": [5.0]},
            {"namespace": "a", "kind": "Job", "controller": "y", "lifetimes": [-5.0]},
        ]}), FALLBACK_STATE_CORRUPT),
        (json.dumps({"schema": STATE_SCHEMA, "histories": [
            {"namespace": "a", "kind": None, "controller": "x", "lifetimes": []}]}),
         FALLBACK_STATE_CORRUPT),
        (json.dumps({"schema": STATE_SCHEMA, "histories": [
            {"namespace": "a", "kind": "Job", "controller": "x", "lifetimes": ["5"]}]}),
         FALLBACK_STATE_CORRUPT),
    ],
)
def test_a_bad_state_file_falls_back_to_priors_and_says_so(tmp_path, content, reason, caplog) -> None:
    path = tmp_path / "state.json"
    path.write_text(content)
    p = LifetimePredictor()
    with caplog.at_level("INFO", logger="scheduler.lifetimes.predictor"):
        assert not load_state(p, path)
    assert p.fallbacks[reason] == 1
    assert reason in caplog.text
    assert list(p.histories()) == []  # nothing half-restored
    assert p.predict_remaining(pod("Job", "x", namespace="a"), 0.0) == 1800.0


def test_a_missing_state_file_is_a_quiet_first_start(tmp_path) -> None:
    p = LifetimePredictor()
    assert not load_state(p, tmp_path / "absent.json")
    assert p.fallbacks[FALLBACK_STATE_CORRUPT] == p.fallbacks[FALLBACK_STATE_VERSION] == 0


@settings(max_examples=200, deadline=None)
@given(
    lifetimes=st.lists(st.floats(0.0, 1e6), max_size=40),
    age=st.floats(-1e3, 1e7) | st.just(math.nan),
    kind=st.sampled_from(["Job", "ReplicaSet", None]),
)
def test_predictions_are_finite_and_non_negative(lifetimes, age, kind) -> None:
    p = LifetimePredictor()
    for lifetime in lifetimes:
        p.observe_end(pod(kind, "w"), lifetime)
    remaining = p.predict_remaining(pod(kind, "w"), age)
    assert math.isfinite(remaining) and remaining >= 0.0


# -- learned from the cluster cache: pods that end ---------------------------------------------


def _bound_pod(name: str, scheduled: str, **status: object) -> dict:
    return {
        "metadata": {"namespace": "batch", "name": name, "uid": f"u-{name}",
                     "ownerReferences": [{"kind": "Job", "name": "etl", "controller": True}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"conditions": [{"type": "PodScheduled", "status": "True",
                                   "lastTransitionTime": scheduled}], **status},
    }


def test_the_cluster_cache_teaches_lifetimes_of_pods_that_end() -> None:
    from scheduler.cluster.cache import ClusterCache

    now = [0.0]
    p = LifetimePredictor(blend=0.0)
    cache = ClusterCache("kubejoule-scheduler", lambda: now[0], lifetimes=p)
    start = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    cache.upsert_pod(_bound_pod("a", "2023-11-14T22:13:20Z"))
    cache.upsert_pod(_bound_pod("b", "2023-11-14T22:13:20Z"))
    cache.upsert_pod(_bound_pod("c", "2023-11-14T22:13:20Z"))
    # a: Succeeded, its container finished 300 s after scheduling (not when we heard of it).
    now[0] = start + 900.0
    cache.upsert_pod(_bound_pod("a", "2023-11-14T22:13:20Z", phase="Succeeded", containerStatuses=[
        {"name": "c", "state": {"terminated": {"finishedAt": "2023-11-14T22:18:20Z"}}}]))
    # b: deleted without a word on its containers: ends when the watch says.
    now[0] = start + 600.0
    cache.delete_pod(_bound_pod("b", "2023-11-14T22:13:20Z"))
    # c: evicted (DisruptionTarget): its lifetime was cut, not learned.
    evicted = _bound_pod("c", "2023-11-14T22:13:20Z")
    evicted["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True"})
    cache.delete_pod(evicted)
    assert p.observed == 2
    assert p.predict_remaining(pod("Job", "etl"), 0.0) == pytest.approx((300.0 + 600.0) / 2)
    # A wall clock that jumped back before the placement: a clock jump, not a lifetime.
    cache.upsert_pod(_bound_pod("d", "2023-11-14T22:13:20Z"))
    now[0] = start - 50.0
    cache.delete_pod(_bound_pod("d", "2023-11-14T22:13:20Z"))
    assert p.observed == 2 and p.fallbacks[FALLBACK_CLOCK_JUMP] == 1
