"""The extender's surfaces stay bounded: Node objects that requests carry are remembered up to a
limit (100,000 unique names keep the memory of them at the limit; `make bench` measures the
RSS), there is no OpenAPI page, and a 500 tells nothing of the exception behind it."""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from scheduler.domain.model import NodeInfo, Resources
from scheduler.extender.app import create_app
from scheduler.extender.bounded import MAX_NODE_SPECS, BoundedSpecs
from scheduler.extender.remote import RemoteStates
from scheduler.extender.state import NodeStates
from scheduler.extender.wire import RememberedNodes
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.store import TelemetryStore
from tests.helpers.sched_extender import NOW, POD, make_extender, node_object

ROOT = Path(__file__).resolve().parents[3]
UNIQUE_NAMES = 100_000
PER_REQUEST = 1_000  # Nodes per /prioritize body, as kube-scheduler sends them


def test_bounded_specs_forget_the_least_recently_used_first() -> None:
    specs: BoundedSpecs[int] = BoundedSpecs(limit=2)
    assert specs.put("a", 1) == [] and specs.put("b", 2) == []
    specs.touch("a")
    assert specs.put("c", 3) == ["b"]
    assert list(specs) == ["a", "c"]
    with pytest.raises(ValueError):
        BoundedSpecs(limit=0)


def _fake_nodes(start: int) -> list[NodeInfo]:
    return [NodeInfo(f"fake-{i}", Resources(4000, 8 << 30, 110, 0)) for i in range(start, start + PER_REQUEST)]


def test_100000_unique_node_names_keep_the_refresher_side_at_its_limit() -> None:
    store = TelemetryStore([], node_cores=lambda: {}, clock=lambda: NOW)
    states = NodeStates(EnergyPlugin(delta_p_ref_watts=50.0), store, None)
    prepared = states.prepare({})
    for start in range(0, UNIQUE_NAMES, PER_REQUEST):
        infos = _fake_nodes(start)
        states.item_redo(infos, prepared, list(range(len(infos))))
        for info in infos[:10]:
            states.remember_spec(info, start + 1)
    assert len(states.node_infos) == MAX_NODE_SPECS
    assert len(states.spec_seq) <= MAX_NODE_SPECS
    assert states.has_spec(f"fake-{UNIQUE_NAMES - 1}") and not states.has_spec("fake-0")
    states.forget_spec(f"fake-{UNIQUE_NAMES - 1}")
    assert not states.has_spec(f"fake-{UNIQUE_NAMES - 1}")


def test_100000_unique_node_names_keep_the_request_side_at_its_limit() -> None:
    remote = RemoteStates(EnergyPlugin(delta_p_ref_watts=50.0), None)  # no refresher started
    prepared = remote.current()
    for start in range(0, UNIQUE_NAMES, PER_REQUEST):
        infos = _fake_nodes(start)
        remote.item_redo(infos, prepared, list(range(len(infos))))
    remembered = [i for i in range(UNIQUE_NAMES) if remote.has_spec(f"fake-{i}")]
    assert remembered == list(range(UNIQUE_NAMES - MAX_NODE_SPECS, UNIQUE_NAMES))
    assert len(remote.spec_redo([f"fake-{i}" for i in range(UNIQUE_NAMES)], prepared)) == 0


def test_remembered_node_objects_are_bounded_too() -> None:
    read = RememberedNodes()
    assert read.limit <= MAX_NODE_SPECS
    for i in range(MAX_NODE_SPECS + 5):
        node = node_object(f"n{i}")
        node["metadata"]["resourceVersion"] = "1"
        read(json.dumps(node).encode())
    assert len(read) <= MAX_NODE_SPECS


@pytest.fixture
def client() -> Any:
    with TestClient(create_app(make_extender("active"), manage_store=False)) as c:
        yield c


@pytest.mark.parametrize("path", ["/openapi.json", "/docs", "/redoc"])
def test_there_is_no_openapi_page(client: Any, path: str) -> None:
    assert client.get(path).status_code == 404


def test_an_internal_error_is_a_500_that_tells_nothing_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    extender = make_extender("active")

    def broken(args: Any) -> Any:
        raise RuntimeError("secret /var/lib/kubejoule/private token=abc")

    monkeypatch.setattr(extender, "prioritize", broken)
    with TestClient(create_app(extender, manage_store=False)) as client:
        response = client.post("/prioritize", json={"Pod": POD, "NodeNames": ["frugal"]})
    assert response.status_code == 500
    assert "secret" not in response.text and "RuntimeError" not in response.text
    assert response.json() == {"Error": "internal error (see the extender's log)"}


def test_the_extender_serves_https_when_given_a_certificate(tmp_path: Path) -> None:
    """kube-scheduler's enableHTTPS: the extender's verbs and probes over TLS, verified against
    the CA that signed its certificate; a certificate without its key is a configuration error."""
    from benchmarks.harness.expander_grpc import self_signed
    from benchmarks.harness.processes import free_port

    tls = self_signed(tmp_path, ("127.0.0.1",))
    config = tmp_path / "extender.yaml"
    config.write_text("refresh_seconds: 5\nextender: {watch_cluster: false}\n")
    port = free_port()
    base = [sys.executable, "-m", "scheduler.cmd.cli", "extender", "--config", str(config),
            "--listen", f"127.0.0.1:{port}", "--log-level", "warning"]
    half = subprocess.run([*base, "--tls-cert", str(tls.cert_path)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert half.returncode == 2 and "--tls-key" in half.stderr
    proc = subprocess.Popen([*base, "--tls-cert", str(tls.cert_path), "--tls-key", str(tls.key_path)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        context = ssl.create_default_context(cafile=str(tls.cert_path))
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=2) as r:
                    assert r.status == 200
                    break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None and time.monotonic() < deadline, "the extender did not start"
                time.sleep(0.2)
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)  # no plain HTTP
    finally:
        proc.terminate()
        proc.wait(20)
