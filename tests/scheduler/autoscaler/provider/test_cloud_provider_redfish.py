"""The Redfish power backend against sushy-tools' emulator (a real Redfish service; its fake
driver applies a Reset 1–11 s after accepting it, as hardware does), and the faults a BMC can
give: credentials refused (401), no answer (timeout), a Reset refused (the emulator with power-off
disabled answers 400), a Reset accepted but never performed (a stub BMC). Each ends in a clear
state and an Event; none leaves a machine off with pods on it."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.harness.expander_grpc import self_signed
from scheduler.autoscaler.provider.backend import OFF, ON, RESET_GRACEFUL, RESET_ON, BackendError
from scheduler.autoscaler.provider.machines import FAILED, OFF_STATE, RUNNING, Fleet, ProviderError
from scheduler.autoscaler.provider.redfish import RedfishBackend
from scheduler.autoscaler.provider.settings import parse_settings
from tests.helpers.cloud_provider import FakeKube, node
from tests.helpers.sushy import PASSWORD, USERNAME, Emulator, emulator

pytestmark = pytest.mark.slow


def secret(directory: Path, password: str = PASSWORD) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "username").write_text(USERNAME)
    (directory / "password").write_text(password)
    return str(directory)


def system_url(bmc: Emulator, ca: str | None) -> str:
    verify = ssl.create_default_context(cafile=ca) if ca else False
    with httpx.Client(auth=(USERNAME, PASSWORD), verify=verify) as client:
        members = client.get(bmc.url + "/redfish/v1/Systems").json()["Members"]
    return bmc.url + members[0]["@odata.id"]


@pytest.fixture(scope="module")
def tls_bmc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Emulator, str]]:
    directory = tmp_path_factory.mktemp("sushy")
    tls = self_signed(directory)
    with emulator(directory, tls.cert_path, tls.key_path) as bmc:
        yield bmc, str(tls.cert_path)


def settings_for(url: str, credentials: str, ca: str = "", **overrides: Any) -> Any:
    raw: dict[str, Any] = {
        "allow": ["bm-0"], "power_state_deadline_seconds": 30, "graceful_shutdown_seconds": 30,
        "bmc_timeout_seconds": 2,
        "groups": [{"id": "rack", "min": 0, "max": 1, "machines": [
            {"node": "bm-0", "bmc": url, "credentials": credentials, "ca_file": ca,
             "insecure_http": url.startswith("http:")}]}],
    }
    raw.update(overrides)
    return parse_settings(raw)


def until(fleet: Fleet, state: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while fleet.tracked["bm-0"].state != state:
        assert time.monotonic() < deadline, f"bm-0 not {state} within {timeout:g} s: {fleet.tracked['bm-0']}"
        time.sleep(0.5)
        fleet.refresh()


def test_power_on_and_off_through_the_emulators_reset(tls_bmc: tuple[Emulator, str], tmp_path: Path) -> None:
    bmc, ca = tls_bmc
    settings = settings_for(system_url(bmc, ca), secret(tmp_path / "bmc"), ca)
    backend, kube = RedfishBackend(2.0), FakeKube()
    (machine,) = settings.machines()
    assert backend.power_state(machine) == OFF
    fleet = Fleet(settings, backend, kube)
    fleet.refresh()
    assert fleet.increase("rack", 1) == ["bm-0"]
    deadline = time.monotonic() + 20
    while backend.power_state(machine) != ON:  # the emulator applies it 1–11 s later
        assert time.monotonic() < deadline
        time.sleep(0.5)
    kube.nodes["bm-0"] = node("bm-0")  # its kubelet registers
    until(fleet, RUNNING)
    kube.nodes["bm-0"] = node("bm-0", cordoned=True)
    fleet.delete_nodes("rack", [("bm-0", "kubejoule://bm-0")])
    until(fleet, OFF_STATE)
    assert backend.power_state(machine) == OFF and kube.deleted == ["bm-0"]
    assert kube.reasons("bm-0") == ["PoweringOn", "PoweredOn", "PoweringOff", "PoweredOff"]


def test_credentials_refused_and_a_reset_type_the_bmc_does_not_offer(tls_bmc: tuple[Emulator, str], tmp_path: Path) -> None:
    bmc, ca = tls_bmc
    url = system_url(bmc, ca)
    settings = settings_for(url, secret(tmp_path / "wrong", "not-the-password"), ca)
    (machine,) = settings.machines()
    with pytest.raises(BackendError, match=r"credentials refused \(HTTP 401\)") as raised:
        RedfishBackend(2.0).power_state(machine)
    assert raised.value.refused
    good = settings_for(url, secret(tmp_path / "good"), ca).machines()[0]
    with pytest.raises(BackendError, match="ResetType PowerCycle is not one the BMC allows"):
        RedfishBackend(2.0).reset(good, "PowerCycle")
    untrusted = settings_for(url, secret(tmp_path / "good"), "").machines()[0]
    with pytest.raises(BackendError, match="ConnectError"):  # its certificate is not trusted
        RedfishBackend(2.0).power_state(untrusted)


def test_a_refused_power_off_leaves_the_machine_on_and_says_so(tmp_path: Path) -> None:
    with emulator(tmp_path, extra=["SUSHY_EMULATOR_DISABLE_POWER_OFF = True"]) as bmc:
        settings = settings_for(system_url(bmc, None), secret(tmp_path / "bmc"))
        backend, kube = RedfishBackend(2.0), FakeKube()
        (machine,) = settings.machines()
        backend.reset(machine, RESET_ON)
        deadline = time.monotonic() + 20
        while backend.power_state(machine) != ON:
            assert time.monotonic() < deadline
            time.sleep(0.5)
        kube.nodes["bm-0"] = node("bm-0", cordoned=True)
        fleet = Fleet(settings, backend, kube)
        fleet.refresh()
        with pytest.raises(ProviderError) as raised:
            fleet.delete_nodes("rack", [("bm-0", "")])
        assert raised.value.code == "UNAVAILABLE"
        assert fleet.tracked["bm-0"].state == RUNNING and backend.power_state(machine) == ON
        (event,) = [e for e in kube.events if e[1] == "PowerActionFailed"]
        assert "Reset GracefulShutdown refused: HTTP 400" in event[2] and event[3]


class _StaysOff(BaseHTTPRequestHandler):
    """A BMC that accepts every Reset (204) and performs none."""

    def do_GET(self) -> None:  # noqa: N802
        body = json.dumps({"PowerState": "Off", "Actions": {"#ComputerSystem.Reset": {
            "target": "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        pass


def test_a_reset_accepted_but_not_performed_and_a_bmc_that_never_answers(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StaysOff)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never answers
    try:
        url = f"http://127.0.0.1:{server.server_port}/redfish/v1/Systems/1"
        settings = settings_for(url, secret(tmp_path / "bmc"), power_state_deadline_seconds=1)
        kube = FakeKube()
        fleet = Fleet(settings, RedfishBackend(2.0), kube)
        fleet.refresh()
        fleet.increase("rack", 1)
        time.sleep(1.2)
        fleet.refresh()
        assert fleet.tracked["bm-0"].state == FAILED
        assert "accepted Reset On but the machine is still off" in fleet.tracked["bm-0"].error
        quiet = settings_for(f"http://127.0.0.1:{silent.getsockname()[1]}/redfish/v1/Systems/1", secret(tmp_path / "bmc"))
        started = time.monotonic()
        with pytest.raises(BackendError, match="no answer within 2 s") as raised:
            RedfishBackend(2.0).reset(quiet.machines()[0], RESET_GRACEFUL)
        assert not raised.value.refused and time.monotonic() - started < 5
    finally:
        server.shutdown()
        silent.close()
