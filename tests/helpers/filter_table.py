"""The table of kube-scheduler's default filters on whole pods and nodes, shared by
tests/scheduler/domain/test_standalone_filters*.py: each module holds the cases of one subject."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from benchmarks.harness.standalone_objects import node_state
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.domain.filters import node_failures

# (id, pod, node, pods already bound, expected reasons)
FilterCase = tuple[str, dict[str, Any], dict[str, Any], list[dict[str, Any]], tuple[str, ...]]
F = TypeVar("F", bound=Callable[..., None])


def filter_table(cases: list[FilterCase]) -> Callable[[F], F]:
    """Parametrize a test over `cases`, one test id per case id."""
    return pytest.mark.parametrize(
        ("pod_obj", "node_obj", "bound", "expected"),
        [c[1:] for c in cases],
        ids=[c[0] for c in cases],
    )


def check_filter_case(
    pod_obj: dict[str, Any],
    node_obj: dict[str, Any],
    bound: list[dict[str, Any]],
    expected: tuple[str, ...],
) -> None:
    assert node_failures(pod_info_from_k8s(pod_obj), node_state(node_obj, bound)) == expected
