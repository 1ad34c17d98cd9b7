"""`kubejoule-agent run`: a background sampler and an HTTP server for /metrics, /healthz, /readyz.

* The sampler thread reads the host every interval (on a fixed schedule, not "sleep after
  work", so the rate does not drift), computes a Snapshot from the last two reads, and adds it
  to the collector's accounts (agent/monitor/accounts.py); the collector only reads them. A
  read or compute that fails is logged and counted (errors_total
  kind="sample"); the loop goes on.
* `/metrics` renders the collector (Prometheus text format); `/healthz` is 200 while the
  sampler loop is alive and not stuck; `/readyz` is 200 once the first complete sample (two
  reads) is published. Both answer with a small JSON body (sample count, age of the latest).
* SIGTERM or SIGINT stops the server and the sampler and exits 0.
* Logs are structured: one JSON object per line on stderr (`--log-format text` for people).
  Gaps are logged when they appear and when they clear, not every interval.
"""

from __future__ import annotations

import contextlib
import json
import logging
import resource
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from agent.exporter.prometheus import SnapshotCollector
from agent.monitor.raw_sample import RawSample
from agent.monitor.sampler import Sampler
from agent.monitor.snapshot import Snapshot

# The longest a SIGTERM delivered to another thread waits for the main thread to see it.
SIGNAL_CHECK_SECONDS = 5.0

log = logging.getLogger("kubejoule.agent")

DEFAULT_LISTEN = ":9102"
_STANDARD_RECORD_KEYS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "fields"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg, then the record's `fields`."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        # logging puts `extra`'s keys in the record's __dict__, only on the records that pass them
        fields = record.__dict__.get("fields")
        if isinstance(fields, dict):
            entry.update(fields)
        for key, value in record.__dict__.items():
            if key not in _STANDARD_RECORD_KEYS and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = f"{datetime.fromtimestamp(record.created).strftime('%H:%M:%S')} {record.levelname.lower():<7} {record.getMessage()}"
        # logging puts `extra`'s keys in the record's __dict__, only on the records that pass them
        fields = record.__dict__.get("fields")
        if isinstance(fields, dict) and fields:
            line += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(level: str = "info", fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def raise_open_files_limit() -> int:
    """Lift the soft open-files limit to the hard one (as Go programs do at start): the sampler
    keeps one descriptor per process. Returns the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return int(soft)


def parse_listen(text: str) -> tuple[str, int]:
    """`:9102`, `0.0.0.0:9102`, `127.0.0.1:0`, `[::]:9102` → (host, port); ValueError if not."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"--listen wants HOST:PORT or :PORT, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


HTTP_POLL_SECONDS = 5.0
# A connection that sends nothing for this long is closed: idle keep-alive connections would
# otherwise hold a thread each forever (692 idle connections once held 692 threads). Scrapes
# take milliseconds; Prometheus opens a new connection when its old one was closed.
HTTP_IDLE_TIMEOUT_SECONDS = 15.0
# Connections served at once; more are closed at once, unanswered (a scraper or two, the
# kubelet's probes and the schedulers' telemetry reads need a handful).
HTTP_MAX_CONNECTIONS = 32

# what socketserver hands a stream server per connection (its typeshed `_RequestType`)
_Request = socket.socket | tuple[bytes, socket.socket]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    service: AgentService
    idle_timeout_seconds = HTTP_IDLE_TIMEOUT_SECONDS

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 max_connections: int = HTTP_MAX_CONNECTIONS) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)
        self.refused = 0

    def process_request(self, request: _Request, client_address: object) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            self.shutdown_request(request)  # at the cap: closed, not queued
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: _Request, client_address: object) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.idle_timeout_seconds)  # idle: closed

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        service = self.server.service
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._reply(200, generate_latest(service.registry), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            healthy, body = service.health()
            self._reply(200 if healthy else 503, json.dumps(body).encode(), "application/json")
        elif path == "/readyz":
            ready, body = service.readiness()
            self._reply(200 if ready else 503, json.dumps(body).encode(), "application/json")
        else:
            self._reply(404, b"not found: try /metrics, /healthz or /readyz\n", "text/plain; charset=utf-8")

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the http.server API
        log.debug("http " + format % args)


class AgentService:
    """The sampler thread and the HTTP server, started and stopped together."""

    def __init__(
        self,
        sampler: Sampler,
        collector: SnapshotCollector,
        interval_seconds: float,
        listen: tuple[str, int] = ("", 9102),
        on_snapshot: Callable[[Snapshot], None] | None = None,
        stale_after_seconds: float | None = None,
        idle_timeout_seconds: float = HTTP_IDLE_TIMEOUT_SECONDS,
        max_connections: int = HTTP_MAX_CONNECTIONS,
    ) -> None:
        self.sampler = sampler
        self.idle_timeout_seconds = idle_timeout_seconds
        self.max_connections = max_connections
        # /healthz fails once the loop has not begun a read for this long: a hung read (a stuck
        # NFS-like mount, a frozen procfs) makes the liveness probe restart the agent
        self.stale_after_seconds = stale_after_seconds or max(30.0, 3 * interval_seconds)
        self.collector = collector
        self.accounts = collector.accounts  # what the loop adds to; the collector reads it
        self.interval = interval_seconds
        self.listen = listen
        self.on_snapshot = on_snapshot
        # Later parts add to each snapshot before it is published (pod names, Metrics Server,
        # network: see agent/cmd/cli.py) and stop their own threads with the service.
        self.enrichers: list[Callable[[Snapshot, RawSample], Snapshot]] = []
        self.stoppers: list[Callable[[], None]] = []
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.samples = 0
        self.started = time.monotonic()
        self._last_loop = time.monotonic()
        self._last_sample: float | None = None
        self._stop = threading.Event()
        self._gaps: set[tuple[str, str]] = set()
        self._thread = threading.Thread(target=self._sample_loop, name="sampler", daemon=True)
        self._httpd: _Server | None = None
        self._http_thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    def start(self) -> None:
        host, port = self.listen
        self._httpd = (_Server6 if ":" in host else _Server)((host, port), _Handler, self.max_connections)
        self._httpd.service = self
        self._httpd.idle_timeout_seconds = self.idle_timeout_seconds
        # serve_forever wakes every poll_interval to look for a shutdown: rarely (not its default
        # twice a second, which costs more than a scrape); stop() wakes it with a connection.
        self._http_thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": HTTP_POLL_SECONDS},
                                             name="http", daemon=True)
        self._http_thread.start()
        log.info("listening", extra={"fields": {"address": host or "0.0.0.0", "port": self.port}})
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._httpd is not None:
            shutdown = threading.Thread(target=self._httpd.shutdown, name="http-shutdown", daemon=True)
            shutdown.start()
            while shutdown.is_alive():
                self._wake_http()
                shutdown.join(0.05)
            self._httpd.server_close()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self.sampler.close()
        for stop in self.stoppers:
            stop()

    def _wake_http(self) -> None:
        """One connection to our own socket, so serve_forever's select returns and sees the shutdown."""
        assert self._httpd is not None
        address = self._httpd.server_address
        host = address[0]
        if host in ("", "0.0.0.0", "::"):
            host = "::1" if self._httpd.address_family == socket.AF_INET6 else "127.0.0.1"
        with contextlib.suppress(OSError), socket.socket(self._httpd.address_family, socket.SOCK_STREAM) as probe:
            probe.settimeout(0.2)
            probe.connect((host, address[1]))

    def health(self) -> tuple[bool, dict[str, object]]:
        last_sample = self._last_sample
        now = time.monotonic()
        age = now - self._last_loop
        healthy = self._thread.is_alive() and age <= self.stale_after_seconds
        body: dict[str, object] = {"status": "ok" if healthy else "stuck", "samples": self.samples,
                                "seconds_since_last_read": round(age, 3)}
        if last_sample is not None:
            # with the read's age: a read younger than the latest sample is in progress
            body["seconds_since_last_sample"] = round(now - last_sample, 3)
        return healthy, body

    def readiness(self) -> tuple[bool, dict[str, object]]:
        ready = self.samples > 0 and not self._stop.is_set()
        body: dict[str, object] = {"status": "ready" if ready else "not ready", "samples": self.samples}
        if self._last_sample is not None:
            body["seconds_since_last_sample"] = round(time.monotonic() - self._last_sample, 3)
        return ready, body

    def _read(self) -> RawSample | None:
        try:
            return self.sampler.read()
        except Exception:  # a sampler bug must not stop the agent: log, count, go on
            log.exception("reading the host failed")
            self.accounts.count_error("sample")
            return None

    def _sample_loop(self) -> None:
        before = self._read()
        due = time.monotonic() + self.interval
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            self._last_loop = time.monotonic()
            started = time.process_time()
            after = self._read()
            if after is not None and before is not None:
                try:
                    snapshot = self.sampler.compute(before, after)
                except Exception:
                    log.exception("computing the sample failed")
                    self.accounts.count_error("sample")
                else:
                    self._publish(self._enrich(snapshot, after), time.process_time() - started)
            if after is not None:
                before = after
            due += self.interval
            now = time.monotonic()
            if due < now:  # overran (a slow read, a suspended VM): skip the missed ticks
                log.warning("sampling fell behind; skipping missed intervals",
                            extra={"fields": {"behind_seconds": round(now - due, 3)}})
                due = now + self.interval
        self._last_loop = time.monotonic()

    def _enrich(self, snapshot: Snapshot, after: RawSample) -> Snapshot:
        for enrich in self.enrichers:
            try:
                snapshot = enrich(snapshot, after)
            except Exception:  # an extra's bug must not stop the energy series: publish without it
                log.exception("adding to the sample failed", extra={"fields": {"enricher": repr(enrich)}})
                self.accounts.count_error("sample")
        return snapshot

    def _publish(self, snapshot: Snapshot, cpu_seconds: float) -> None:
        self.accounts.add(snapshot)
        self.samples += 1
        self._last_sample = time.monotonic()
        if self.samples == 1:
            log.info("first sample ready", extra={"fields": {"source": snapshot.source, "node_watts": snapshot.node_watts,
                                                               "pods": len(snapshot.pods), "vms": len(snapshot.vms)}})
        log.debug("sample", extra={"fields": {
            "node_watts": snapshot.node_watts, "source": snapshot.source, "pods": len(snapshot.pods),
            "vms": len(snapshot.vms), "interval_seconds": round(snapshot.interval_seconds, 4),
            "sample_cpu_ms": round(cpu_seconds * 1000, 2),
        }})
        gaps = {(g.what, g.reason) for g in snapshot.gaps}
        for what, reason in sorted(gaps - self._gaps):
            log.warning("gap", extra={"fields": {"what": what, "reason": reason}})
        for what, reason in sorted(self._gaps - gaps):
            log.info("gap cleared", extra={"fields": {"what": what, "reason": reason}})
        self._gaps = gaps
        if snapshot.skew_scaled:
            log.info("pods' cgroup CPU exceeded busy time; pods scaled to fit (read skew)")
        if self.on_snapshot is not None:
            self.on_snapshot(snapshot)


def serve(service: AgentService) -> int:
    """Run until SIGTERM or SIGINT; returns the exit code."""
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            service.start()
        except OSError as exc:
            log.error("cannot listen", extra={"fields": {"listen": f"{service.listen[0]}:{service.listen[1]}",
                                                         "error": str(exc)}})
            return 1
        # A signal the kernel hands to this thread interrupts the wait at once (its handler runs
        # here and sets `stop`). One handed to another thread only marks the handler pending
        # until this thread next runs Python code: the wait is bounded so that happens within
        # SIGNAL_CHECK_SECONDS (one wake-up per 5 s costs nothing measurable).
        while not stop.wait(SIGNAL_CHECK_SECONDS):
            pass
        log.info("stopping", extra={"fields": {"signal": received[0] if received else None}})
        service.stop()
        log.info("stopped", extra={"fields": {"samples": service.samples}})
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
