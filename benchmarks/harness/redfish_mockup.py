"""A Redfish service on loopback serving mockup bodies, for the vendor shapes sushy-emulator does
not serve (it has no power readings) and for the ways a BMC misbehaves.

The bodies are minimal resources in the shapes of DMTF's published mockups (DSP2043: the
service root, the Chassis collection, a chassis, its Power and EnvironmentMetrics) with the
chassis ids vendors use: Dell iDRAC `System.Embedded.1` (beside an `Enclosure.Internal.0-1`
without power), HPE iLO `1` (paths with trailing slashes), Lenovo `Tray_1` (a server entry and
CPU / memory sub-system entries in PowerControl), and a DMTF 2020.4+ chassis with
EnvironmentMetrics (PowerWatts, EnergykWh) beside the older Power resource.

`serve(bodies)` answers GET PATH with `bodies[PATH]`: a dict (JSON), or a `Fault` — a status, a
raw body (HTML), a huge body (with or without Content-Length), or a body trickled a byte at a time.
HTTP Basic credentials are checked on every request; with `tls` the service is HTTPS.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USERNAME, PASSWORD = "kubejoule", "s3cret-bmc-password"


@dataclass
class Fault:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    huge_bytes: int = 0  # send this many bytes of JSON-looking filler
    declare_length: bool = True  # with huge_bytes: a Content-Length, or a body until the connection closes
    trickle_seconds: float = 0.0  # send the body one byte per this many seconds


def _ref(path: str) -> dict[str, str]:
    return {"@odata.id": path}


def service(chassis: dict[str, dict[str, Any]], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Service root, Chassis collection and the given chassis (id → body) plus other resources."""
    bodies: dict[str, Any] = {
        "/redfish/v1/": {"@odata.id": "/redfish/v1/", "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot",
                         "Id": "RootService", "RedfishVersion": "1.15.0", "Chassis": _ref("/redfish/v1/Chassis"),
                         "Systems": _ref("/redfish/v1/Systems")},
        "/redfish/v1/Chassis": {"@odata.type": "#ChassisCollection.ChassisCollection", "Name": "Chassis Collection",
                                "Members": [_ref(f"/redfish/v1/Chassis/{cid}") for cid in chassis],
                                "Members@odata.count": len(chassis)},
    }
    for cid, body in chassis.items():
        bodies[f"/redfish/v1/Chassis/{cid}"] = {"@odata.id": f"/redfish/v1/Chassis/{cid}",
                                                "@odata.type": "#Chassis.v1_23_0.Chassis", "Id": cid, **body}
    bodies.update(extra or {})
    return bodies


def power(path: str, *entries: tuple[str, Any]) -> dict[str, Any]:
    return {"@odata.id": path, "@odata.type": "#Power.v1_7_1.Power", "Id": "Power", "Name": "Power",
            "PowerControl": [{"@odata.id": f"{path}#/PowerControl/{i}", "MemberId": str(i), "Name": name,
                              "PowerConsumedWatts": watts, "PowerCapacityWatts": 1600,
                              "PowerMetrics": {"IntervalInMin": 1, "AverageConsumedWatts": watts}}
                             for i, (name, watts) in enumerate(entries)]}


def dell(watts: Any) -> dict[str, Any]:
    system = "/redfish/v1/Chassis/System.Embedded.1/Power"
    return service({
        "System.Embedded.1": {"ChassisType": "RackMount", "Power": _ref(system),
                              "Links": {"ComputerSystems": [_ref("/redfish/v1/Systems/System.Embedded.1")]}},
        "Enclosure.Internal.0-1": {"ChassisType": "Enclosure", "Links": {"ComputerSystems": []}},
    }, {system: power(system, ("System Power Control", watts))})


def hpe(watts: Any) -> dict[str, Any]:
    path = "/redfish/v1/Chassis/1/Power/"
    bodies = service({"1": {"ChassisType": "RackMount", "Power": _ref(path),
                            "Links": {"ComputerSystems": [_ref("/redfish/v1/Systems/1/")]}}}, {path: power(path, ("", watts))})
    bodies["/redfish/v1/Chassis"]["Members"] = [_ref("/redfish/v1/Chassis/1/")]
    bodies["/redfish/v1/Chassis/1/"] = bodies.pop("/redfish/v1/Chassis/1")
    return bodies


def lenovo(watts: Any) -> dict[str, Any]:
    path = "/redfish/v1/Chassis/Tray_1/Power"
    return service({"Tray_1": {"ChassisType": "RackMount", "Power": _ref(path),
                               "Links": {"ComputerSystems": [_ref("/redfish/v1/Systems/1")]}}},
                   {path: power(path, ("CPU Sub-system Power", 95), ("Server Power Control", watts),
                                ("Memory Sub-system Power", 21))})


def environment(watts: Any, kwh: Any = 325.675, power_watts: Any = 999) -> dict[str, Any]:
    """A DMTF 2020.4+ rack server: EnvironmentMetrics (preferred) beside the older Power resource."""
    metrics, old = "/redfish/v1/Chassis/1U/EnvironmentMetrics", "/redfish/v1/Chassis/1U/Power"
    return service({"1U": {"ChassisType": "RackMount", "EnvironmentMetrics": _ref(metrics), "Power": _ref(old),
                           "Links": {"ComputerSystems": [_ref("/redfish/v1/Systems/437XR1138R2")]}}}, {
        metrics: {"@odata.id": metrics, "@odata.type": "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics",
                  "Id": "EnvironmentMetrics", "Name": "Chassis Environment Metrics",
                  "PowerWatts": {"DataSourceUri": "/redfish/v1/Chassis/1U/Sensors/TotalPower", "Reading": watts},
                  "EnergykWh": {"DataSourceUri": "/redfish/v1/Chassis/1U/Sensors/TotalEnergy", "Reading": kwh}},
        old: power(old, ("System Power Control", power_watts)),
    })


@dataclass
class Mockup:
    bodies: dict[str, Any]
    url: str = ""
    requests: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: Any
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with self.server.mockup.lock:
            self.server.connections.add(self.request)

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        mockup: Mockup = self.server.mockup
        with mockup.lock:
            mockup.requests.append(self.path)
            body = mockup.bodies.get(self.path)
        expected = "Basic " + base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            return self._send(401, json.dumps({"error": {"code": "Base.1.0.NoValidSession"}}).encode())
        if body is None:
            return self._send(404, b'{"error": {"code": "Base.1.0.ResourceMissingAtURI"}}')
        if not isinstance(body, Fault):
            return self._send(200, json.dumps(body).encode())
        if body.huge_bytes:
            self.send_response(body.status)
            self.send_header("Content-Type", body.content_type)
            if body.declare_length:
                self.send_header("Content-Length", str(body.huge_bytes))
            else:
                self.send_header("Connection", "close")
            self.end_headers()
            chunk = b" " * 65536
            try:
                for _ in range(body.huge_bytes // len(chunk)):
                    self.wfile.write(chunk)
            except OSError:
                pass  # the client stopped reading, as it should
            self.close_connection = True
            return None
        if body.trickle_seconds:
            self.send_response(body.status)
            self.send_header("Content-Type", body.content_type)
            self.send_header("Content-Length", str(len(body.body)))
            self.end_headers()
            try:
                for byte in body.body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(body.trickle_seconds)
            except OSError:
                pass
            self.close_connection = True
            return None
        return self._send(body.status, body.body, body.content_type)

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the http.server API
        pass


@contextmanager
def serve(bodies: dict[str, Any], tls: Any = None) -> Iterator[Mockup]:
    """The mockup on 127.0.0.1 (a free port); `tls`: TLSFiles (benchmarks/harness/expander_grpc.self_signed)."""
    mockup = Mockup(bodies)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.mockup = mockup  # type: ignore[attr-defined]
    server.connections = set()  # type: ignore[attr-defined]
    scheme = "http"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls.cert_path, tls.key_path)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    mockup.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield mockup
    finally:  # gone: kept-alive connections too, as when a BMC reboots
        server.shutdown()
        server.server_close()
        with mockup.lock:
            for connection in server.connections:  # type: ignore[attr-defined]
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
