"""Pod-level requests (`spec.resources`, PodLevelResources: beta and on by default since
Kubernetes 1.34) counted as kube-scheduler counts them (component-helpers' PodRequests): a cpu or
memory request set for the pod replaces its containers' total of it, overhead is added on top.
Found by tests/e2e/test_e2e_extender.py: the real API keeps such a pod as written, and the
extender priced a 2-CPU pod-level pod as one requesting nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.cluster.kubeobjects import effective_requests, nonzero_requests, pod_info_from_k8s
from scheduler.domain.model import (
    DEFAULT_MEMORY_REQUEST_BYTES,
    DEFAULT_MILLI_CPU_REQUEST,
    ShapeError,
)
from scheduler.extender.body import BadRequest
from scheduler.extender.wire import parse_args

GIB = 2**30


def spec(pod_level: dict[str, Any] | None, *containers: dict[str, str], **more: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(containers)],
        **more,
    }
    if pod_level is not None:
        found["resources"] = pod_level
    return found


def test_pod_level_cpu_and_memory_replace_the_containers_total() -> None:
    requests = effective_requests(spec({"requests": {"cpu": "2", "memory": "1Gi"}}, {}))
    assert (requests.cpu_millicores, requests.memory_bytes, requests.pods) == (2000, GIB, 1)
    # Larger or smaller than the containers' sum: the pod's own request wins either way.
    smaller = effective_requests(spec({"requests": {"cpu": "500m"}}, {"cpu": "1"}, {"cpu": "1"}))
    assert smaller.cpu_millicores == 500


def test_only_the_resources_the_pod_level_sets_are_replaced() -> None:
    requests = effective_requests(spec(
        {"requests": {"cpu": "3"}}, {"cpu": "1", "memory": "500Mi", "ephemeral-storage": "1Gi"},
    ))
    assert requests.cpu_millicores == 3000
    assert requests.memory_bytes == 500 * 2**20
    assert requests.ephemeral_storage_bytes == GIB  # not a pod-level resource: the containers'


def test_overhead_is_added_to_the_pod_level_request() -> None:
    requests = effective_requests(spec({"requests": {"cpu": "2"}}, {}, overhead={"cpu": "250m"}))
    assert requests.cpu_millicores == 2250


def test_pod_level_limits_alone_leave_the_containers_requests() -> None:
    requests = effective_requests(spec({"limits": {"cpu": "4"}}, {"cpu": "1"}))
    assert requests.cpu_millicores == 1000


def test_scoring_defaults_apply_to_containers_not_to_a_pod_level_request() -> None:
    # NodeResourcesFit's scoring: a container without requests counts 100m and 200 MiB; a
    # pod-level request replaces that default for its resource only.
    requests = nonzero_requests(spec({"requests": {"cpu": "2"}}, {}))
    assert (requests.cpu_millicores, requests.memory_bytes) == (2000, DEFAULT_MEMORY_REQUEST_BYTES)
    assert nonzero_requests(spec(None, {})).cpu_millicores == DEFAULT_MILLI_CPU_REQUEST


def test_the_extender_reads_pod_level_requests_from_its_body() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec({"requests": {"cpu": "2"}}, {})}
    for form in ({"NodeNames": ["n1"]}, {"Nodes": {"items": []}}):
        args = parse_args(json.dumps({"Pod": pod, **form}).encode())
        assert args.pod.requests.cpu_millicores == 2000
        assert args.pod.nonzero_requests is not None and args.pod.nonzero_requests.cpu_millicores == 2000


def test_a_bad_pod_level_quantity_is_named() -> None:
    with pytest.raises(ShapeError, match=r"spec\.resources\.requests\.cpu"):
        pod_info_from_k8s({"metadata": {"name": "p"}, "spec": spec({"requests": {"cpu": "two"}}, {})})
    body = {"Pod": {"metadata": {"name": "p"}, "spec": spec({"requests": {"cpu": [5]}}, {})}, "NodeNames": ["n"]}
    with pytest.raises(BadRequest, match=r"spec\.resources\.requests"):
        parse_args(json.dumps(body).encode())
