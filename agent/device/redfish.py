"""Platform power from the node's BMC over Redfish (DMTF DSP0266; resources as in DSP2043's mockups).

The reading is found by walking from the service root, never from a vendor's path (Dell calls
its server's chassis `System.Embedded.1`, HPE `1`, others `Tray_1` or `Self`):
`/redfish/v1` → its `Chassis` collection → each chassis → the chassis' `EnvironmentMetrics`
(`PowerWatts.Reading`, and `EnergykWh.Reading` where the BMC keeps one: Redfish 2020.4 and
later) or its `Power` resource (`PowerControl[].PowerConsumedWatts`, the older schema). The
chassis that holds the node (its `Links.ComputerSystems` is not empty) is preferred over
enclosures and racks, EnvironmentMetrics over Power; the first that gives a reading is kept.

Every request is bounded, because a BMC is a small, slow, sometimes broken computer: one
connection kept open, HTTP Basic authentication (the credentials come from a file, never from a
flag, an environment variable or a log line), TLS verified against the system's CAs or a given
bundle, a deadline for the whole request that closes the socket when it passes (a BMC that
trickles its answer a byte at a time cannot hold the agent), and at most 1 MiB of body. Each
failure is a `RedfishError` whose message says what went wrong and what to do about it.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import math
import socket
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from agent.device.gaps import GAP_IMPLAUSIBLE, GAP_UNREADABLE
from common.jsonvalue import JsonObject, subobject, subobjects

SERVICE_ROOT = "/redfish/v1/"
MAX_BODY_BYTES = 1024 * 1024
MAX_MEMBERS = 64  # chassis looked at in one walk
DEFAULT_TIMEOUT_SECONDS = 5.0
# No single server draws more (an 8-GPU HGX node is about 10 kW): above, the reading is not one.
PLATFORM_CEILING_WATTS = 20_000.0
READING_ENVIRONMENT = "EnvironmentMetrics"
READING_POWER_CONTROL = "PowerControl"
# PowerControl entries that are a part of the system, never the whole (Lenovo's "CPU Sub-system Power")
_PART_NAMES = ("sub-system", "subsystem", "cpu", "memory", "gpu", "fan", "storage")


class RedfishError(Exception):
    """A BMC request or answer that gives no reading; `kind` is the gap kind."""

    def __init__(self, reason: str, kind: str = GAP_UNREADABLE, rediscover: bool = False, refused: bool = False) -> None:
        super().__init__(reason)
        self.kind = kind
        self.rediscover = rediscover  # the resource may have moved: walk from the root again
        self.refused = refused  # the credentials were refused: no other resource will do better


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)

    @classmethod
    def load(cls, directory: Path, node: str | None = None) -> Credentials:
        """`username` and `password` files, as a Kubernetes `kubernetes.io/basic-auth` Secret is
        mounted; NODE's own in the subdirectory named after it when there is one (one account
        per node: a Secret's items mapped to `<node>/username`, or a read-only hostPath that
        holds only that node's). ValueError saying what is missing (never what the files hold)."""
        if node and (directory / node).is_dir():
            directory = directory / node
        values = {}
        for key in ("username", "password"):
            try:
                values[key] = (directory / key).read_text().rstrip("\r\n")
            except OSError as exc:
                raise ValueError(f"cannot read {directory / key}: {exc.strerror or exc}") from None
            if not values[key]:
                raise ValueError(f"{directory / key} is empty")
        return cls(values["username"], values["password"])


@dataclass(frozen=True)
class PowerSource:
    path: str  # the resource read: a chassis' EnvironmentMetrics or Power
    reading: str  # READING_ENVIRONMENT or READING_POWER_CONTROL
    chassis: str


@dataclass(frozen=True)
class Reading:
    watts: float
    energy_kwh: float | None
    source: PowerSource


def _number(value: object, where: str) -> float:
    """A reading the BMC gave as a number: finite, positive, at most a platform's ceiling."""
    if value is None:
        raise RedfishError(f"{where} is null: the BMC has no value for it")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RedfishError(f"{where} is not a number: {json.dumps(value)[:60]}", GAP_IMPLAUSIBLE)
    watts = float(value)
    if not math.isfinite(watts) or not 0.0 < watts <= PLATFORM_CEILING_WATTS:
        raise RedfishError(f"{where} is {watts:g}: not a server's power (0 < watts ≤ "
                           f"{PLATFORM_CEILING_WATTS:g})", GAP_IMPLAUSIBLE)
    return watts


def _link(document: JsonObject, key: str) -> str | None:
    path = subobject(document, key).get("@odata.id")
    return path if isinstance(path, str) and path.startswith("/") else None


def redact_url(url: str) -> str:
    """URL without the user and password it may carry (for logs, errors, metrics, snapshots):
    `https://root:secret@bmc` → `https://***@bmc`. Text that does not parse is cut to its
    scheme, so nothing after a malformed `@` is repeated."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return url.split("://", 1)[0] + "://(unparsable)" if "://" in url else "(unparsable)"
    if "@" not in parts.netloc:
        return url
    host = f"[{host}]" if ":" in host else host
    return parts._replace(netloc=f"***@{host}{port}").geturl()


class RedfishClient:
    """A Redfish client for one BMC. https only (Basic auth would cross the network in clear):
    `allow_http` is for labs and test benches, and the CLI says so in the log when it is on."""

    def __init__(self, url: str, credentials: Credentials, ca_bundle: Path | None = None,
                 timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS, max_body_bytes: int = MAX_BODY_BYTES,
                 allow_http: bool = False) -> None:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise ValueError(f"not a BMC URL (https://HOST[:PORT]): {redact_url(url)!r}") from None
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"not a BMC URL (https://HOST[:PORT]): {redact_url(url)!r}")
        if parts.username or parts.password:
            raise ValueError("the BMC URL must not carry credentials: give them in the credentials file")
        if parts.scheme == "http" and not allow_http:
            raise ValueError("http:// would send the BMC's password in clear: use https:// "
                             "(--bmc-insecure-http allows it, for labs only)")
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        self.url = f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
        self._host, self._port, self._tls = parts.hostname, parts.port, parts.scheme == "https"
        self._context = ssl.create_default_context(cafile=str(ca_bundle) if ca_bundle else None) if self._tls else None
        token = base64.b64encode(f"{credentials.username}:{credentials.password}".encode()).decode()
        self._headers = {"Authorization": f"Basic {token}", "Accept": "application/json", "OData-Version": "4.0"}
        self.timeout_seconds = timeout_seconds
        self.max_body_bytes = max_body_bytes
        self._connection: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            if self._tls:
                self._connection = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self.timeout_seconds, context=self._context)
            else:
                self._connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_seconds)
        return self._connection

    def get(self, path: str) -> JsonObject:
        """The JSON object at PATH, within the deadline and the size limit, or RedfishError."""
        connection = self._connect()
        expired = threading.Event()

        def expire() -> None:  # the deadline: whatever the BMC is doing, the socket is closed
            expired.set()
            sock = connection.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(self.timeout_seconds, expire)
        timer.daemon = True
        timer.start()
        try:
            status, headers, body = self._exchange(connection, path)
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            if expired.is_set():
                raise RedfishError(f"GET {path}: no complete answer within {self.timeout_seconds:g} s") from None
            if isinstance(exc, ssl.SSLCertVerificationError):
                raise RedfishError(f"GET {self.url}{path}: the BMC's TLS certificate is not trusted ({exc.verify_message}): "
                                   "give its CA with --bmc-ca-bundle") from None
            raise RedfishError(f"GET {self.url}{path}: {exc.__class__.__name__}: {exc}"[:300]) from None
        finally:
            timer.cancel()
        if expired.is_set():  # the socket was closed under a read that then saw an end of file
            self.close()
            raise RedfishError(f"GET {path}: no complete answer within {self.timeout_seconds:g} s")
        return self._decode(path, status, headers, body)

    def _exchange(self, connection: http.client.HTTPConnection, path: str) -> tuple[int, http.client.HTTPMessage, bytes]:
        connection.request("GET", path, headers=self._headers)
        response = connection.getresponse()
        length = response.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            self.close()
            raise RedfishError(f"GET {path}: an answer of {int(length):,} bytes, above the {self.max_body_bytes:,} "
                               "bytes a Redfish resource needs")
        chunks, size = [], 0
        while chunk := response.read1(65536):
            size += len(chunk)
            if size > self.max_body_bytes:
                self.close()
                raise RedfishError(f"GET {path}: an answer above the {self.max_body_bytes:,} bytes a Redfish "
                                   "resource needs")
            chunks.append(chunk)
        response.close()  # read to its end: the connection is kept for the next request
        if response.will_close:
            self.close()
        return response.status, response.headers, b"".join(chunks)

    def _decode(self, path: str, status: int, headers: http.client.HTTPMessage, body: bytes) -> JsonObject:
        if status in (401, 403):
            raise RedfishError(f"GET {path}: the BMC refused the credentials (HTTP {status}): check the username and "
                               "password in the credentials file, and the account's Redfish privileges", refused=True)
        if status == 404:
            raise RedfishError(f"GET {path}: HTTP 404 Not Found", rediscover=True)
        if status != 200:
            raise RedfishError(f"GET {path}: HTTP {status}" + (" (a BMC error)" if status >= 500 else ""),
                               rediscover=status < 500)
        try:
            document = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            kind = headers.get_content_type()
            html = " (an HTML page: a login portal or a proxy in front of the BMC?)" if body.lstrip()[:1] == b"<" else ""
            raise RedfishError(f"GET {path}: the answer is not JSON ({kind}){html}") from None
        if not isinstance(document, dict):
            raise RedfishError(f"GET {path}: the answer is not a JSON object")
        return document


def find_sources(client: RedfishClient, chassis_id: str | None = None) -> list[PowerSource]:
    """Every place a platform reading may be, best first (see the module docstring)."""
    root = client.get(SERVICE_ROOT)
    collection_path = _link(root, "Chassis")
    if collection_path is None:
        raise RedfishError(f"{SERVICE_ROOT} links no Chassis collection: this BMC serves no power readings")
    members = client.get(collection_path).get("Members")
    if not isinstance(members, list):
        raise RedfishError(f"{collection_path} has no Members list")
    ranked: list[tuple[int, str, list[PowerSource]]] = []
    for member in members[:MAX_MEMBERS]:
        path = member.get("@odata.id") if isinstance(member, Mapping) else None
        if not isinstance(path, str) or not path.startswith("/"):
            continue
        if chassis_id is not None and path.rstrip("/").rsplit("/", 1)[-1] != chassis_id:
            continue
        chassis = client.get(path)
        sources = [PowerSource(link, kind, path) for key, kind in
                   (("EnvironmentMetrics", READING_ENVIRONMENT), ("Power", READING_POWER_CONTROL))
                   if (link := _link(chassis, key)) is not None]
        systems = subobject(chassis, "Links").get("ComputerSystems")
        ranked.append((0 if systems else 1, path, sources))
    ranked.sort(key=lambda item: item[:2])
    sources = [source for _, _, found in ranked for source in found]
    if not sources:
        which = f"chassis {chassis_id!r}" if chassis_id is not None else f"{len(ranked)} chassis"
        raise RedfishError(f"the BMC serves no power reading: {which} under {collection_path} link neither "
                           "EnvironmentMetrics nor Power")
    return sources


def _power_control(document: JsonObject, where: str) -> object:
    """PowerConsumedWatts of the entry for the whole system: the one named for the system, server
    or chassis where several are listed (some BMCs add CPU and memory sub-systems), else the first."""
    listed = document.get("PowerControl")
    entries = subobjects(document, "PowerControl")
    if not isinstance(listed, list) or not entries or len(entries) != len(listed):
        raise RedfishError(f"{where} has no PowerControl entries")
    def name(entry: JsonObject) -> str:
        return str(entry.get("Name", "")).lower()

    whole = [e for e in entries if not any(part in name(e) for part in _PART_NAMES)] or entries
    named = [e for e in whole if any(word in name(e) for word in ("system", "server", "chassis"))]
    return (named or whole)[0].get("PowerConsumedWatts")


def read_source(client: RedfishClient, source: PowerSource) -> Reading:
    document = client.get(source.path)
    if source.reading == READING_ENVIRONMENT:
        power = document.get("PowerWatts")
        if not isinstance(power, Mapping):
            raise RedfishError(f"{source.path} has no PowerWatts", rediscover=True)
        watts = _number(power.get("Reading"), f"{source.path} PowerWatts.Reading")
        kwh = subobject(document, "EnergykWh").get("Reading")
        if not isinstance(kwh, (int, float)) or isinstance(kwh, bool) or not math.isfinite(kwh) or kwh < 0:
            kwh = None  # a counter it does not keep, or one that cannot be right: the watts stand alone
        return Reading(watts, None if kwh is None else float(kwh), source)
    watts = _number(_power_control(document, source.path), f"{source.path} PowerControl PowerConsumedWatts")
    return Reading(watts, None, source)


def read_platform(client: RedfishClient, sources: list[PowerSource]) -> Reading:
    """The first source that gives a reading; the best source's error when none does."""
    errors: list[RedfishError] = []
    for source in sources:
        try:
            return read_source(client, source)
        except RedfishError as exc:
            errors.append(exc)
            if exc.refused:
                break
    raise errors[0] if errors else RedfishError("no power source to read")

