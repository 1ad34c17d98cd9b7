"""descheduler's DefaultEvictor, its own Go test tables translated (rl/simulation/controllers/descheduler/evictor.py).

Source: kubernetes-sigs/descheduler at 7d2b28bf2b6a12810317936d909af0270ff38fa3,
pkg/framework/plugins/defaultevictor/defaultevictor_test.go — TestDefaultEvictorFilter,
TestDefaultEvictorPreEvictionFilter, TestGetEffectivePodProtections_TableDriven. Each case keeps
its Go description. Left out, with the features they test (not modelled, see the module):
the namespace-label-selector cases and the protected-storage-class cases of PodsWithPVC.
The Go helpers: `buildTestNode` is 1000 m / 2000 B / 13 pods, `buildTestPod` 400 m / 0 B."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from rl.simulation.controllers.descheduler.evictor import (
    DAEMONSET_PODS,
    DEFAULT_PROTECTIONS,
    FAILED_BARE_PODS,
    PODS_WITH_LOCAL_STORAGE,
    PODS_WITH_PVC,
    PODS_WITH_RESOURCE_CLAIMS,
    PODS_WITHOUT_PDB,
    SYSTEM_CRITICAL_PODS,
    DefaultEvictor,
    DefaultEvictorArgs,
    effective_protections,
)
from rl.simulation.controllers.descheduler.model import Node, Pod
from tests.helpers.descheduler_objects import (
    MIRROR_ANNOTATIONS,
    annotations,
    ds_owner,
    local_storage,
    node_json,
    node_labels,
    node_selector,
    node_taint,
    normal_owner,
    owner,
    pod_json,
    priority,
    rs_owner,
    ss_owner,
    tolerations,
)

Obj = dict[str, Any]
EVICT = {"descheduler.alpha.kubernetes.io/evict": "true"}
NO_EVICTION = {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}
CRITICAL = 2_000_000_000
LOW, HIGH = 800, 900  # TestDefaultEvictorFilter's lowPriority, highPriority
NOW = 1_000_000.0


def pod(name: str, *apply: Callable[[Obj], None], cpu: int = 400, memory: int = 0,
        node: str = "node1") -> Obj:
    return pod_json(name, cpu, memory, node, *apply)


def node(name: str, *apply: Callable[[Obj], None], cpu: int = 1000, memory: int = 2000,
         pods: int = 13) -> Obj:
    return node_json(name, cpu, memory, pods, *apply)


def failed(p: Obj) -> None:
    p["status"]["phase"] = "Failed"


def pvc(p: Obj) -> None:
    p["spec"]["volumes"] = [{"name": "pvc", "persistentVolumeClaim": {"claimName": "foo"}}]


def empty_dir(p: Obj) -> None:
    p["spec"]["volumes"] = [{"name": "local-storage", "emptyDir": {}}]


def claims(p: Obj) -> None:
    p["spec"]["resourceClaims"] = [{"name": "test-claim", "resourceClaimName": "test-resource-claim"}]


def started(minutes_ago: float) -> Callable[[Obj], None]:
    def apply(p: Obj) -> None:
        p["status"]["startTime"] = _rfc3339(NOW - 60 * minutes_ago)

    return apply


def labels(values: dict[str, str]) -> Callable[[Obj], None]:
    def apply(p: Obj) -> None:
        p["metadata"]["labels"] = dict(values)

    return apply


def _rfc3339(seconds: float) -> str:
    from scheduler.cluster.kubejson import rfc3339

    return rfc3339(seconds)


@dataclass(frozen=True)
class Case:
    description: str
    pods: list[Obj]
    result: bool
    args: DefaultEvictorArgs = field(default_factory=DefaultEvictorArgs)
    nodes: list[Obj] = field(default_factory=list)
    pdb_app: str | None = None  # a PodDisruptionBudget selecting app=<this>


SHARED_OWNER = owner("Pod", "", "owner-uid")


def two_owners(p: Obj) -> None:
    p["metadata"]["ownerReferences"] = [{"kind": "Pod", "uid": "owner-uid"}, {"kind": "Pod"}]


FILTER = [
    Case("Failed pod eviction with no ownerRefs", [pod("bare_pod_failed", failed)], False),
    Case("Normal pod eviction with no ownerRefs and evictFailedBarePods enabled",
         [pod("bare_pod")], False, DefaultEvictorArgs(evict_failed_bare_pods=True)),
    Case("Failed pod eviction with no ownerRefs (evictFailedBarePods enabled)",
         [pod("bare_pod_failed_but_can_be_evicted", failed)], True,
         DefaultEvictorArgs(evict_failed_bare_pods=True)),
    Case("Normal pod eviction with normal ownerRefs", [pod("p1", normal_owner)], True),
    Case("Normal pod eviction with normal ownerRefs and evict annotation",
         [pod("p2", annotations(EVICT), normal_owner)], True),
    Case("Normal pod eviction with normal ownerRefs and prefer-no-eviction annotation (preference)",
         [pod("p2", annotations(NO_EVICTION), normal_owner)], True),
    Case("Normal pod eviction with normal ownerRefs and prefer-no-eviction annotation (mandatory)",
         [pod("p2", annotations(NO_EVICTION), normal_owner)], False,
         DefaultEvictorArgs(no_eviction_policy="Mandatory")),
    Case("Normal pod eviction with replicaSet ownerRefs", [pod("p3", normal_owner)], True),
    Case("Normal pod eviction with replicaSet ownerRefs and evict annotation",
         [pod("p4", annotations(EVICT), rs_owner)], True),
    Case("Normal pod eviction with statefulSet ownerRefs", [pod("p18", normal_owner)], True),
    Case("Normal pod eviction with statefulSet ownerRefs and evict annotation",
         [pod("p19", annotations(EVICT), ss_owner)], True),
    Case("Pod not evicted because it is bound to a PV and evictLocalStoragePods = false",
         [pod("p5", normal_owner, local_storage)], False),
    Case("Pod is evicted because it is bound to a PV and evictLocalStoragePods = true",
         [pod("p6", normal_owner, local_storage)], True,
         DefaultEvictorArgs(evict_local_storage_pods=True)),
    Case("Pod is evicted because it is bound to a PV and evictLocalStoragePods = false, but it "
         "has scheduler.alpha.kubernetes.io/evict annotation",
         [pod("p7", annotations(EVICT), normal_owner, local_storage)], True),
    Case("Pod not evicted because it is part of a daemonSet", [pod("p8", ds_owner)], False),
    Case("Pod is evicted because it is part of a daemonSet, but it has "
         "scheduler.alpha.kubernetes.io/evict annotation",
         [pod("p9", annotations(EVICT), ds_owner)], True),
    Case("Pod not evicted because it is a mirror poddsa",
         [pod("p10", normal_owner, annotations(MIRROR_ANNOTATIONS))], False),
    Case("Pod is evicted because it is a mirror pod, but it has "
         "scheduler.alpha.kubernetes.io/evict annotation",
         [pod("p11", normal_owner, annotations({**MIRROR_ANNOTATIONS, **EVICT}))], True),
    Case("Pod not evicted because it has system critical priority",
         [pod("p12", normal_owner, priority(CRITICAL))], False),
    Case("Pod is evicted because it has system critical priority, but it has "
         "scheduler.alpha.kubernetes.io/evict annotation",
         [pod("p13", normal_owner, priority(CRITICAL), annotations(EVICT))], True),
    Case("Pod not evicted because it has a priority higher than the configured priority threshold",
         [pod("p14", normal_owner, priority(HIGH))], False,
         DefaultEvictorArgs(priority_threshold=LOW)),
    Case("Pod is evicted because it has a priority higher than the configured priority "
         "threshold, but it has scheduler.alpha.kubernetes.io/evict annotation",
         [pod("p15", normal_owner, annotations(EVICT), priority(HIGH))], True,
         DefaultEvictorArgs(priority_threshold=LOW)),
    Case("Pod is evicted because it has system critical priority, but evictSystemCriticalPods = true",
         [pod("p16", normal_owner, priority(CRITICAL))], True,
         DefaultEvictorArgs(evict_system_critical_pods=True)),
    Case("Pod is evicted because it has system critical priority, but evictSystemCriticalPods = "
         "true and it has scheduler.alpha.kubernetes.io/evict annotation",
         [pod("p16", normal_owner, annotations(EVICT), priority(CRITICAL))], True,
         DefaultEvictorArgs(evict_system_critical_pods=True)),
    Case("Pod is evicted because it has a priority higher than the configured priority "
         "threshold, but evictSystemCriticalPods = true",
         [pod("p17", normal_owner, priority(HIGH))], True,
         DefaultEvictorArgs(evict_system_critical_pods=True, priority_threshold=LOW)),
    Case("Pod is evicted because it has a priority higher than the configured priority "
         "threshold, but evictSystemCriticalPods = true and it has "
         "scheduler.alpha.kubernetes.io/evict annotation",
         [pod("p17", normal_owner, annotations(EVICT), priority(HIGH))], True,
         DefaultEvictorArgs(evict_system_critical_pods=True, priority_threshold=LOW)),
    Case("Pod with no tolerations running on normal node, all other nodes tainted, no "
         "PreEvictionFilter, should ignore nodeFit",
         [pod("p1", normal_owner)], True, DefaultEvictorArgs(node_fit=True),
         [node("node2", node_taint("hardware", "gpu")), node("node3", node_taint("hardware", "gpu"))]),
    Case("minReplicas of 2, owner with 2 replicas, evicts",
         [pod("p1", SHARED_OWNER, cpu=1, memory=1), pod("p2", SHARED_OWNER, cpu=1, memory=1)],
         True, DefaultEvictorArgs(min_replicas=2)),
    Case("minReplicas of 3, owner with 2 replicas, no eviction",
         [pod("p1", SHARED_OWNER, cpu=1, memory=1), pod("p2", SHARED_OWNER, cpu=1, memory=1)],
         False, DefaultEvictorArgs(min_replicas=3)),
    Case("minReplicas of 2, multiple owners, no eviction",
         [pod("p1", two_owners, cpu=1, memory=1), pod("p2", normal_owner, cpu=1, memory=1)],
         True, DefaultEvictorArgs(min_replicas=2)),
    Case("minPodAge of 50, pod created 10 minutes ago, no eviction",
         [pod("p1", normal_owner, started(10), cpu=1, memory=1)], False,
         DefaultEvictorArgs(min_pod_age_s=50 * 60)),
    Case("minPodAge of 50, pod created 60 minutes ago, evicts",
         [pod("p1", normal_owner, started(60), cpu=1, memory=1)], True,
         DefaultEvictorArgs(min_pod_age_s=50 * 60)),
    Case("nil minPodAge, pod created 60 minutes ago, evicts",
         [pod("p1", normal_owner, started(60), cpu=1, memory=1)], True),
    Case("ignorePodsWithoutPDB, pod with no PDBs, no eviction",
         [pod("p1", normal_owner, labels({"app": "foo"}), cpu=1, memory=1)], False,
         DefaultEvictorArgs(ignore_pods_without_pdb=True)),
    Case("ignorePodsWithoutPDB, pod with PDBs, evicts",
         [pod("p1", normal_owner, labels({"app": "foo"}), cpu=1, memory=1)], True,
         DefaultEvictorArgs(ignore_pods_without_pdb=True), pdb_app="foo"),
    Case("ignorePvcPods is set, pod with PVC, not evicts", [pod("p15", normal_owner, pvc)], False,
         DefaultEvictorArgs(ignore_pvc_pods=True)),
    Case("ignorePvcPods is not set, pod with PVC, evicts", [pod("p15", normal_owner, pvc)], True),
    Case("Pod with local storage is evicted because 'PodsWithLocalStorage' is in DefaultDisabled",
         [pod("p18", normal_owner, empty_dir)], True,
         DefaultEvictorArgs(default_disabled=(PODS_WITH_LOCAL_STORAGE,))),
    Case("DaemonSet pod is evicted because 'DaemonSetPods' is in DefaultDisabled",
         [pod("p19", owner("DaemonSet", "daemonset-test", "daemonset-uid"))], True,
         DefaultEvictorArgs(default_disabled=(DAEMONSET_PODS,))),
    Case("Pod with PVC is not evicted because 'PodsWithPVC' is in ExtraEnabled",
         [pod("p20", normal_owner, pvc)], False, DefaultEvictorArgs(extra_enabled=(PODS_WITH_PVC,))),
    Case("Pod without PDB is not evicted because 'PodsWithoutPDB' is in ExtraEnabled",
         [pod("p21", normal_owner)], False, DefaultEvictorArgs(extra_enabled=(PODS_WITHOUT_PDB,))),
    Case("Pod with ResourceClaims is not evicted because 'PodsWithResourceClaims' is in ExtraEnabled",
         [pod("p20", normal_owner, claims)], False,
         DefaultEvictorArgs(extra_enabled=(PODS_WITH_RESOURCE_CLAIMS,))),
]


def evictor_for(case: Case) -> tuple[DefaultEvictor, list[Pod]]:
    pods = [Pod.from_k8s(p) for p in case.pods]
    nodes = [Node.from_k8s(n) for n in case.nodes]
    owners: dict[str, int] = {}
    for p in pods:
        for o in p.facts.owners:
            owners[o.uid] = owners.get(o.uid, 0) + 1
    evictor = DefaultEvictor(
        case.args,
        replicas=lambda uid: owners.get(uid, 0),
        covered_by_pdb=lambda p: case.pdb_app is not None
        and dict(p.info.labels).get("app") == case.pdb_app,
        nodes=lambda: nodes,
        pods_on=lambda name: [p for p in pods if p.node == name],
        now=NOW,
    )
    return evictor, pods


@pytest.mark.parametrize("case", FILTER, ids=[f"TestDefaultEvictorFilter: {c.description}" for c in FILTER])
def test_filter(case: Case) -> None:
    evictor, pods = evictor_for(case)
    assert evictor.filter(pods[0]) is case.result


TAINTED = node_taint("hardware", "gpu")
EAST = {"datacenter": "east"}
PRE_EVICTION = [
    Case("Pod with no tolerations running on normal node, all other nodes tainted",
         [pod("p1", normal_owner)], False, DefaultEvictorArgs(node_fit=True),
         [node("node2", TAINTED), node("node3", TAINTED)]),
    Case("Pod with correct tolerations running on normal node, all other nodes tainted",
         [pod("p1", normal_owner, tolerations({"key": "hardware", "value": "gpu",
                                                "effect": "NoSchedule"}))],
         True, DefaultEvictorArgs(node_fit=True), [node("node2", TAINTED), node("node3", TAINTED)]),
    Case("Pod with incorrect node selector",
         [pod("p1", normal_owner, node_selector({"datacenter": "fail"}))], False,
         DefaultEvictorArgs(node_fit=True),
         [node("node2", node_labels(EAST)), node("node3", node_labels(EAST))]),
    Case("Pod with correct node selector", [pod("p1", normal_owner, node_selector(EAST))], True,
         DefaultEvictorArgs(node_fit=True),
         [node("node2", node_labels(EAST)), node("node3", node_labels(EAST))]),
    Case("Pod with correct node selector, but only available node doesn't have enough CPU",
         [pod("p1", normal_owner, node_selector(EAST), cpu=12, memory=8)], False,
         DefaultEvictorArgs(node_fit=True),
         [node("node2-TEST", node_labels(EAST), cpu=10, memory=16, pods=10),
          node("node3-TEST", node_labels(EAST), cpu=10, memory=16, pods=10)]),
    Case("Pod with correct node selector, and one node has enough memory",
         [pod("p1", normal_owner, node_selector(EAST), cpu=12, memory=8),
          pod("node2-pod-10GB-mem", labels({"test": "true"}), cpu=20, memory=10, node="node2"),
          pod("node3-pod-10GB-mem", labels({"test": "true"}), cpu=20, memory=10, node="node3")],
         True, DefaultEvictorArgs(node_fit=True),
         [node("node2", node_labels(EAST), cpu=100, memory=16, pods=10),
          node("node3", node_labels(EAST), cpu=100, memory=20, pods=10)]),
    Case("Pod with correct node selector, but both nodes don't have enough memory",
         [pod("p1", normal_owner, node_selector(EAST), cpu=12, memory=8),
          pod("node2-pod-10GB-mem", labels({"test": "true"}), cpu=10, memory=10, node="node2"),
          pod("node3-pod-10GB-mem", labels({"test": "true"}), cpu=10, memory=10, node="node3")],
         False, DefaultEvictorArgs(node_fit=True),
         [node("node2", node_labels(EAST), cpu=100, memory=16, pods=10),
          node("node3", node_labels(EAST), cpu=100, memory=16, pods=10)]),
    Case("Pod with incorrect node selector, but nodefit false, should still be evicted",
         [pod("p1", normal_owner, node_selector({"datacenter": "fail"}))], True,
         DefaultEvictorArgs(), [node("node2", node_labels(EAST)), node("node3", node_labels(EAST))]),
]


@pytest.mark.parametrize(
    "case", PRE_EVICTION, ids=[f"TestDefaultEvictorPreEvictionFilter: {c.description}" for c in PRE_EVICTION]
)
def test_pre_eviction_filter(case: Case) -> None:
    evictor, pods = evictor_for(case)
    assert evictor.pre_eviction_filter(pods[0]) is case.result


DEFAULTS = list(DEFAULT_PROTECTIONS)
PROTECTIONS = [  # TestGetEffectivePodProtections_TableDriven (compared as sets, as Go does)
    ("NewConfig_EmptyConfig_ReturnsDefault", (), (), DEFAULTS),
    ("NewConfig_DisableOneDefault_ReturnsDefaultMinusOne", (PODS_WITH_LOCAL_STORAGE,), (),
     [DAEMONSET_PODS, SYSTEM_CRITICAL_PODS, FAILED_BARE_PODS]),
    ("NewConfig_DisableMultipleDefaults_ReturnsDefaultMinusMultiple",
     (DAEMONSET_PODS, SYSTEM_CRITICAL_PODS), (), [PODS_WITH_LOCAL_STORAGE, FAILED_BARE_PODS]),
    ("NewConfig_EnableOneExtra_ReturnsDefaultPlusOne", (), (PODS_WITH_PVC,), [*DEFAULTS, PODS_WITH_PVC]),
    ("NewConfig_EnableMultipleExtra_ReturnsDefaultPlusMultiple", (), (PODS_WITH_PVC, PODS_WITHOUT_PDB),
     [*DEFAULTS, PODS_WITH_PVC, PODS_WITHOUT_PDB]),
    ("NewConfig_DisableAndEnable_ReturnsModifiedSet", (FAILED_BARE_PODS, DAEMONSET_PODS),
     (PODS_WITH_PVC,), [PODS_WITH_LOCAL_STORAGE, SYSTEM_CRITICAL_PODS, PODS_WITH_PVC]),
    ("NewConfig_EnableOneExtra(PodsWithResourceClaims)_ReturnsDefaultPlusOne", (),
     (PODS_WITH_RESOURCE_CLAIMS,), [*DEFAULTS, PODS_WITH_RESOURCE_CLAIMS]),
]


@pytest.mark.parametrize("name,disabled,extra,expected", PROTECTIONS, ids=[p[0] for p in PROTECTIONS])
def test_effective_protections(name: str, disabled: tuple[str, ...], extra: tuple[str, ...],
                               expected: list[str]) -> None:
    args = DefaultEvictorArgs(default_disabled=disabled, extra_enabled=extra)
    assert sorted(effective_protections(args)) == sorted(expected)


def test_legacy_flags_apply_only_without_pod_protections() -> None:
    """getEffectivePodProtections: the deprecated booleans are read only when podProtections is
    empty (then evictLocalStoragePods=true drops that protection; with a list it does not)."""
    legacy = DefaultEvictorArgs(evict_local_storage_pods=True)
    assert PODS_WITH_LOCAL_STORAGE not in effective_protections(legacy)
    mixed = DefaultEvictorArgs(evict_local_storage_pods=True, extra_enabled=(PODS_WITH_PVC,))
    assert PODS_WITH_LOCAL_STORAGE in effective_protections(mixed)


def test_unknown_protection_is_refused() -> None:
    with pytest.raises(ValueError, match="PodsWithPVC"):
        DefaultEvictorArgs(default_disabled=(PODS_WITH_PVC,))
