"""Fixtures shared by the agent's Kubernetes tests: an emulated API server and a client for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.kube import KubeClient
from benchmarks.harness.agent_kube_emulator import EmulatedCluster


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    with EmulatedCluster() as cluster:
        yield cluster


@pytest.fixture
def client(cluster: EmulatedCluster, tmp_path: Path) -> Iterator[KubeClient]:
    with cluster.client(tmp_path) as client:
        yield client
