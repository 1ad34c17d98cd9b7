"""Fixtures shared by the agent's tests: an emulated API server and a client for it (the Kubernetes
tests), the uncorrupted record the fuzz tests compare with (truth)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.kube.client import KubeClient
from benchmarks.harness.agent_kube_emulator import EmulatedCluster
from tests.helpers.agent_cli import strict_json
from tests.helpers.fuzz_replay import BASE, NODE_WATTS, numbers, replay_in_child


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    with EmulatedCluster() as cluster:
        yield cluster


@pytest.fixture
def client(cluster: EmulatedCluster, tmp_path: Path) -> Iterator[KubeClient]:
    with cluster.client(tmp_path) as client:
        yield client


@pytest.fixture(scope="module")
def truth() -> dict[str, Any]:
    """The fuzz corpus' uncorrupted trees' record: what every number must be when it is not null."""
    outcome = replay_in_child(BASE / "before", BASE / "after", None, [])
    assert outcome.code == 0, outcome.err
    record = strict_json(outcome.out)
    assert record["gaps"] == [] and record["node_watts"] == pytest.approx(NODE_WATTS, rel=1e-12)
    return dict(numbers(record))
