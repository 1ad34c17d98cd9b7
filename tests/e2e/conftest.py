"""End-to-end tests on real Kubernetes components (marker `e2e`; `make e2e` runs them alone):
etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK (and metrics-server, which
test_e2e_metrics_server.py adds for its module) built by tools/k8s/build.sh (`make k8s-tools`),
started on loopback by rl/cluster (the same code as `kubejoule-rl cluster up`).

One control plane serves the whole session. Before each test it is checked: a component that
died is reported by the test that was running (with its last log lines) and the plane is brought
up afresh for the next test. At the end of the session nothing of it may still be running: the
teardown looks for any process whose command line names the cluster's directory.

The binaries are found in $KUBEJOULE_K8S_BIN (the Makefile sets it) or the directory
`tools/k8s/build.sh --bin-dir` names. Missing binaries skip these tests on a developer's machine
and fail them in CI (benchmarks/harness/components.py). cluster-autoscaler is the exception
(`ca_bin`): no registry CI reaches can build it, so its tests are skipped wherever
$KUBEJOULE_CA_BIN names no binary, the proxy's refusal in the message."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.harness.components import component_missing, k8s_bin_dir
from rl.cluster.autoscaler import CA_BIN_ENV, CA_BLOCKED
from rl.cluster.controlplane import BINARIES, Cluster, ClusterOptions, down, up
from tests.helpers.e2e_cluster import leftover_processes


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def k8s_bin() -> Path:
    directory = k8s_bin_dir()
    missing = [b for b in BINARIES if not (directory / b).is_file()]
    if missing:
        component_missing(f"the real Kubernetes components {', '.join(missing)} are not built in {directory}: run `make k8s-tools`")
    return directory


@pytest.fixture(scope="session")
def ca_bin() -> Path:
    """A cluster-autoscaler built from its GitHub source ($KUBEJOULE_CA_BIN), else a skip naming
    the Go module proxy's 403 (module docstring)."""
    given = os.environ.get(CA_BIN_ENV)
    if not given or not Path(given).is_file():
        pytest.skip(f"no cluster-autoscaler (${CA_BIN_ENV} unset or missing): {CA_BLOCKED}; CI cannot build it — "
                    "build one from GitHub's source with tools/k8s/build-ca-from-source.sh")
    return Path(given)


class Plane:
    """The session's control plane, brought up again when a component of it has died."""

    def __init__(self, root: Path, bin_dir: Path) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.generation = 0
        self.cluster: Cluster | None = None

    def get(self) -> Cluster:
        if self.cluster is not None and not self.cluster.dead():
            return self.cluster
        if self.cluster is not None:
            down(self.cluster)
        self.generation += 1
        directory = self.root / f"plane-{self.generation}"
        self.cluster = up(ClusterOptions(directory, self.bin_dir))
        return self.cluster

    def close(self) -> None:
        if self.cluster is not None:
            down(self.cluster)
            self.cluster = None


@pytest.fixture(scope="session")
def plane(k8s_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    root = tmp_path_factory.mktemp("k8s")
    plane = Plane(root, k8s_bin)
    yield plane
    plane.close()
    left = leftover_processes(str(root))
    assert not left, f"processes of the test control plane still running after the suite: {left}"


@pytest.fixture
def cluster(plane: Plane) -> Iterator[Cluster]:
    current = plane.get()
    yield current
    dead = current.dead()
    if dead:
        logs = "\n".join(f"--- {n} ---\n{current.log(n).read_text(errors='replace')[-3000:]}" for n in dead)
        pytest.fail(f"control-plane components died during the test: {', '.join(dead)}\n{logs}", pytrace=False)
