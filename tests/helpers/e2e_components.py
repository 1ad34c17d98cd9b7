"""Our own processes beside the session's control plane in the end-to-end tests: kubejoule's
commands and a second kube-scheduler, each in a process group of its own (rl.cluster.processes)
with its log in a directory under the cluster's, so that the suite's leftover check sees them;
KWOK nodes of a test's own, tainted so that no other test's pods land on them; a Prometheus
text scrape; and a TCP proxy that holds each chunk a client sends for a set delay."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from rl.cluster import kwok
from rl.cluster.api import Api, ApiError, probe_http, probe_https_anonymous
from rl.cluster.controlplane import wait_nodes_ready
from rl.cluster.processes import Process, free_port, start, stop, wait_ready
from rl.simulation.traces.scenario import NodeSpec
from tests.helpers.e2e_cluster import eventually

REPO = Path(__file__).resolve().parents[2]


def start_kubejoule(
    name: str, args: Sequence[str], log_dir: Path, ready_path: str, timeout: float = 60.0,
    tls: tuple[Path, Path] | None = None,
) -> tuple[Process, int]:
    """`python -m scheduler.cmd.cli ARGS --listen 127.0.0.1:PORT` from this checkout, ready when
    `ready_path` answers 2xx (over HTTPS with `tls`, a certificate and its key); (process, port)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "scheduler.cmd.cli", *args, "--listen", f"127.0.0.1:{port}"]
    if tls is not None:
        argv += ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]
    process = start(name, argv, log_dir, env=env)

    def ready() -> bool:
        if tls is not None:
            return probe_https_anonymous("127.0.0.1", port, ready_path)
        return probe_http("127.0.0.1", port, ready_path)

    try:
        wait_ready(process, ready, timeout)
    except BaseException:
        stop(process)
        raise
    return process, port


def start_kube_scheduler(bin_dir: Path, name: str, config: Path, log_dir: Path, timeout: float = 60.0) -> tuple[Process, int]:
    """A kube-scheduler of our own with `config`; /metrics readable without credentials
    (`--authorization-always-allow-paths`), as Prometheus scrapes it on clusters that allow it."""
    port = free_port()
    argv = [
        str(bin_dir / "kube-scheduler"), f"--config={config}", "--bind-address=127.0.0.1", f"--secure-port={port}",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics", "--v=2",
    ]
    process = start(name, argv, log_dir)
    try:
        wait_ready(process, lambda: probe_https_anonymous("127.0.0.1", port, "/healthz"), timeout)
    except BaseException:
        stop(process)
        raise
    return process, port


def create_tainted_nodes(api: Api, specs: Sequence[NodeSpec], taint: dict[str, str], timeout: float = 60.0) -> None:
    """KWOK nodes for `specs`, each with `taint` and the taint's key=value as a label; on return
    they are Ready and carry no other taint."""
    for spec in specs:
        node = kwok.node_object(spec)
        node["metadata"]["labels"][taint["key"]] = taint["value"]
        node["spec"]["taints"] = [taint]
        try:
            api.request("POST", "/api/v1/nodes", node)
        except ApiError as exc:
            if exc.status != 409:  # left by an earlier run of the same session: reused
                raise
    wait_nodes_ready(api, [s.name for s in specs], timeout)
    # The node lifecycle controller taints a new node not-ready until it has seen it Ready: only
    # then does a pod that tolerates our taint alone fit it.
    for spec in specs:
        eventually(lambda name=spec.name: _taints(api, name) == [taint["key"]], timeout, f"{spec.name} schedulable")


def _taints(api: Api, name: str) -> list[str]:
    return [t["key"] for t in api.request("GET", f"/api/v1/nodes/{name}")["spec"].get("taints") or []]


def delete_quietly(api: Api, path: str, now: bool = False) -> None:
    """DELETE `path`, gone already or not; `now`: no grace period (a pod's name is free at
    once, even on a node KWOK no longer plays)."""
    try:
        api.request("DELETE", path + ("?gracePeriodSeconds=0" if now else ""))
    except ApiError as exc:
        if exc.status != 404:
            raise


def ensure_namespace(api: Api, name: str) -> None:
    try:
        api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    except ApiError as exc:
        if exc.status != 409:
            raise


def scrape(url: str, insecure_tls: bool = False) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """{(sample name, its labels): value} of a Prometheus text page."""
    context = None
    if insecure_tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, timeout=10, context=context) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """The sum of the samples named `name` whose labels include `labels` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


class DelayProxy:
    """127.0.0.1:port → target: every chunk a client sends waits `delay` seconds before it is
    passed on (so every request through it takes at least that long); answers pass at once."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.delay = 0.0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()  # the extender is down: so is the proxy's answer
                continue
            upstream.settimeout(None)
            self._sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, delayed: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if delayed and self.delay:
                    time.sleep(self.delay)
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for s in self._sockets:
            s.close()


def pod(name: str, scheduler: str | None, taint: dict[str, str], cpu: str = "1", memory: str = "256Mi") -> dict[str, Any]:
    """A pod that only our tainted nodes accept (their label selected, their taint tolerated)."""
    spec: dict[str, Any] = {
        "nodeSelector": {taint["key"]: taint["value"]},
        "tolerations": [{"key": taint["key"], "operator": "Equal", "value": taint["value"], "effect": taint["effect"]}],
        "containers": [{"name": "c", "image": "registry.invalid/none",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
