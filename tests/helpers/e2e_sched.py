"""What the end-to-end tests of our scheduler processes share: `kubejoule-scheduler` started as a
subprocess against the test control plane (and always stopped), a namespace and KWOK nodes of a
test module's own (labelled, so its pods land nowhere else and other tests' pods nowhere here),
and reading a process's /metrics."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from rl.cluster.api import Api, ApiError
from rl.cluster.controlplane import Cluster, wait_nodes_ready
from rl.cluster.kwok import node_object
from rl.cluster.processes import free_port
from rl.simulation.traces.scenario import parse_node_groups
from tests.helpers.e2e_cluster import eventually

ROOT = Path(__file__).resolve().parents[2]
TEST_LABEL = "kubejoule.io/e2e"  # nodes of one test module carry it with the module's value


class SchedulerProcess:
    """One `kubejoule-scheduler <command>` process, its output in a log file."""

    def __init__(self, argv: Sequence[str], log: Path, port: int) -> None:
        self.log = log
        self.port = port
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(log, "wb") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "scheduler.cmd.cli", *argv], stdout=out, stderr=subprocess.STDOUT,
                env=env, cwd=ROOT, start_new_session=True,
            )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as answer:
            return answer.read().decode()

    def metric(self, line_prefix: str) -> float:
        """The value of the sample whose line starts with `line_prefix` (0 when absent)."""
        for line in self.metrics().splitlines():
            if line.startswith(line_prefix):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would end it."""
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)

    def stop(self) -> int:
        """SIGTERM (a clean stop), SIGKILL after 15 s; the exit status."""
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
        return int(self.popen.returncode)


@contextmanager
def scheduler_processes(directory: Path) -> Iterator[Any]:
    """`start(command_args, name)` → a SchedulerProcess; every one started is stopped on exit."""
    started: list[SchedulerProcess] = []

    def start(args: Sequence[str], name: str) -> SchedulerProcess:
        port = free_port()
        process = SchedulerProcess([*args, "--listen", f"127.0.0.1:{port}"], directory / f"{name}.log", port)
        started.append(process)
        return process

    try:
        yield start
    finally:
        for process in started:
            process.stop()


def write_config(path: Path, cluster: Cluster, host: str | None = None, kubeconfig: Path | None = None,
                 **sections: Any) -> Path:
    """The scheduler's YAML configuration: `kubeconfig`, else the cluster's admin kubeconfig (or
    `host`, a proxy that adds the credentials: tests/helpers/e2e_proxy.py), and `sections`."""
    kubernetes = {"host": host} if host else {"kubeconfig": str(kubeconfig or cluster.kubeconfig)}
    path.write_text(yaml.safe_dump({"kubernetes": kubernetes, **sections}))
    return path


def wait_ready(process: SchedulerProcess, timeout: float = 60) -> None:
    def ready() -> bool:
        assert process.alive(), f"{process.log.name} exited:\n{process.text()[-3000:]}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{process.port}/readyz", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    eventually(ready, timeout, f"{process.log.name} ready", interval=0.2)


# -- namespaces, nodes, pods -----------------------------------------------------------------------


def create_namespace(api: Api, name: str) -> None:
    api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    eventually(lambda: api.exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"), 30,
               f"the default ServiceAccount of {name}")


def delete_namespace(api: Api, name: str) -> None:
    _delete(api, f"/api/v1/namespaces/{name}")


def create_test_nodes(api: Api, groups: list[dict[str, Any]], label: str) -> list[str]:
    """KWOK nodes for `groups` (the simulator's node groups), labelled TEST_LABEL=`label`."""
    names = []
    for spec in parse_node_groups(groups):
        node = node_object(spec)
        node["metadata"]["labels"][TEST_LABEL] = label
        _delete(api, f"/api/v1/nodes/{spec.name}")  # a leftover of an interrupted run
        api.request("POST", "/api/v1/nodes", node)
        names.append(spec.name)
    wait_nodes_ready(api, names, 60)
    return names


def delete_nodes(api: Api, names: Iterable[str]) -> None:
    for name in names:
        _delete(api, f"/api/v1/nodes/{name}")


def pod_object(name: str, cpu: str = "100m", *, scheduler: str | None = None, label: str | None = None,
               labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
               **spec: Any) -> dict[str, Any]:
    """A small pod; on the nodes labelled `label` only when given."""
    body: dict[str, Any] = {
        "containers": [{"name": "c", "image": "registry.invalid/none",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
        **spec,
    }
    if scheduler:
        body["schedulerName"] = scheduler
    if label:
        body["nodeSelector"] = {TEST_LABEL: label}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": body}


def create_pods(api: Api, namespace: str, pods: Sequence[dict[str, Any]], workers: int = 8) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda pod: api.request("POST", path, pod), pods))


def list_pods(api: Api, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    query = f"?labelSelector={selector}" if selector else ""
    return list(api.request("GET", f"/api/v1/namespaces/{namespace}/pods{query}")["items"])


def events(api: Api, namespace: str, reason: str) -> list[dict[str, Any]]:
    return list(api.request("GET", f"/api/v1/namespaces/{namespace}/events?fieldSelector=reason%3D{reason}")["items"])



def _delete(api: Api, path: str) -> None:
    try:
        api.request("DELETE", path)
    except ApiError as exc:
        if exc.status != 404:
            raise


# -- a process's own ServiceAccount ----------------------------------------------------------------

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def service_account_kubeconfig(cluster: Cluster, namespace: str, account: str, manifest: Path,
                               path: Path) -> tuple[list[str], str]:
    """A ServiceAccount `account` in `namespace` holding the rules of the shipped RBAC `manifest`
    (its ClusterRoles, and its Roles in `namespace`; renamed `<namespace>-<name>` so that they
    stand beside the manifests as deployed), and at `path` a kubeconfig with its token
    (TokenRequest). Returns the cluster-wide objects' paths, to delete afterwards, and the token."""
    api = cluster.admin()
    api.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}})
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    made = []
    for doc in yaml.safe_load_all(manifest.read_text()):
        if not doc or doc["kind"] not in ("ClusterRole", "Role"):
            continue
        name = f"{namespace}-{doc['metadata']['name']}"
        where = RBAC if doc["kind"] == "ClusterRole" else f"{RBAC}/namespaces/{namespace}"
        plural = "clusterroles" if doc["kind"] == "ClusterRole" else "roles"
        binding = "clusterrolebindings" if doc["kind"] == "ClusterRole" else "rolebindings"
        for stale in (f"{where}/{plural}/{name}", f"{where}/{binding}/{name}"):
            _delete(api, stale)  # a leftover of an interrupted run
        api.request("POST", f"{where}/{plural}", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": doc["kind"],
                                                  "metadata": {"name": name}, "rules": doc["rules"]})
        api.request("POST", f"{where}/{binding}", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": doc["kind"] + "Binding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": doc["kind"], "name": name},
            "subjects": subject})
        if doc["kind"] == "ClusterRole":
            made += [f"{where}/{plural}/{name}", f"{where}/{binding}/{name}"]
    token = api.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
                        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 3600}})["status"]["token"]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": f"https://127.0.0.1:{cluster.api_port}",
                                                 "certificate-authority": str(cluster.pki / "ca.crt")}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": account}}],
        "current-context": "e2e",
    }))
    return made, token


def delete_paths(api: Api, paths: Iterable[str]) -> None:
    for path in paths:
        _delete(api, path)
