"""kube-scheduler's default filters on plain data: resources, pod count, init containers,
sidecars and overhead, table-driven."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.standalone_objects import container, node, pod
from scheduler.domain.filters import (
    REASON_TOO_MANY_PODS,
)
from tests.helpers.filter_table import FilterCase, check_filter_case, filter_table

# --- resources, pod count, init containers and overhead ----------------------------------------

FILTER_CASES: list[FilterCase] = [
    # (id, pod, node, pods already bound, expected reasons)
    ("cpu exceeds", pod(requests={"cpu": "5"}), node("n", cpu="4"), [], ("Insufficient cpu",)),
    (
        "cpu exactly fits",
        pod(requests={"cpu": "3"}),
        node("n", cpu="4"),
        [pod("b", requests={"cpu": "1"}, node_name="n")],
        (),
    ),
    (
        "cpu taken by bound pods",
        pod(requests={"cpu": "1500m"}),
        node("n", cpu="4"),
        [pod("b", requests={"cpu": "2600m"}, node_name="n")],
        ("Insufficient cpu",),
    ),
    (
        "cpu and memory both short",
        pod(requests={"cpu": "8", "memory": "16Gi"}),
        node("n"),
        [],
        ("Insufficient cpu", "Insufficient memory"),
    ),
    (
        "ephemeral storage",
        pod(requests={"ephemeral-storage": "2Gi"}),
        node("n", ephemeral_storage="1Gi"),
        [],
        ("Insufficient ephemeral-storage",),
    ),
    (
        "zero request fits an over-committed node",
        pod(requests={}),
        node("n", cpu="1"),
        [pod("b", requests={"cpu": "2"}, node_name="n")],
        (),
    ),
    (
        "too many pods",
        pod(),
        node("n", pods="1"),
        [pod("b", node_name="n")],
        (REASON_TOO_MANY_PODS,),
    ),
    # init containers: max(Σ app containers + sidecars, each init + sidecars before it)
    (
        "init container larger than app",
        pod(
            containers=[container(requests={"cpu": "1"})],
            init_containers=[container("init", {"cpu": "3"})],
        ),
        node("n", cpu="2"),
        [],
        ("Insufficient cpu",),
    ),
    (
        "init container smaller than app",
        pod(
            containers=[container(requests={"cpu": "2"})],
            init_containers=[container("init", {"cpu": "1"})],
        ),
        node("n", cpu="2"),
        [],
        (),
    ),
    (
        "sidecar adds to app containers",
        pod(
            containers=[container(requests={"cpu": "1500m"})],
            init_containers=[container("sidecar", {"cpu": "600m"}, restart_policy="Always")],
        ),
        node("n", cpu="2"),
        [],
        ("Insufficient cpu",),
    ),
    (
        # app 500m + sidecar 1 = 1.5; the init container runs beside the sidecar started
        # before it: 1 + 1.5 = 2.5 > 2.
        "init container after a sidecar runs beside it",
        pod(
            containers=[container(requests={"cpu": "500m"})],
            init_containers=[
                container("sidecar", {"cpu": "1"}, restart_policy="Always"),
                container("init", {"cpu": "1500m"}),
            ],
        ),
        node("n", cpu="2"),
        [],
        ("Insufficient cpu",),
    ),
    (
        # The same containers, init first: it runs alone (1.5), then app + sidecar (1.5).
        "init container before a sidecar runs alone",
        pod(
            containers=[container(requests={"cpu": "500m"})],
            init_containers=[
                container("init", {"cpu": "1500m"}),
                container("sidecar", {"cpu": "1"}, restart_policy="Always"),
            ],
        ),
        node("n", cpu="2"),
        [],
        (),
    ),
    (
        "the largest init container counts, not their sum",
        pod(
            containers=[container(requests={"memory": "1Gi"})],
            init_containers=[
                container("a", {"memory": "6Gi"}),
                container("b", {"memory": "6Gi"}),
            ],
        ),
        node("n", memory="8Gi"),
        [],
        (),
    ),
    (
        "init containers and overhead together",
        pod(
            containers=[container(requests={"cpu": "1"})],
            init_containers=[container("init", {"cpu": "1800m"})],
            overhead={"cpu": "250m"},
        ),
        node("n", cpu="2"),
        [],
        ("Insufficient cpu",),
    ),
    (
        "overhead counted",
        pod(requests={"cpu": "1800m"}, overhead={"cpu": "250m"}),
        node("n", cpu="2"),
        [],
        ("Insufficient cpu",),
    ),
]


@filter_table(FILTER_CASES)
def test_filter_table(
    pod_obj: dict[str, Any],
    node_obj: dict[str, Any],
    bound: list[dict[str, Any]],
    expected: tuple[str, ...],
) -> None:
    check_filter_case(pod_obj, node_obj, bound, expected)
