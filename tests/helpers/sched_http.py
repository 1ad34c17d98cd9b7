"""Small real HTTP servers on 127.0.0.1 for the scheduler's tests: a fake agent exposition
(Prometheus text format, with the metric names of DESIGN.md) whose content the test changes;
and a plain client for the servers under test."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def agent_exposition(
    node: str,
    timestamp: float | None,
    watts: float | None = 150.0,
    source: str = "rapl",
    utilization: float | None = 0.4,
    curve: Sequence[float] | None = None,
    pods: Sequence[str] = ("uid-a", "uid-b"),
) -> str:
    """The kubejoule_* series an agent exposes for one node, as Prometheus text."""
    lines = []
    if watts is not None:
        lines += [
            "# HELP kubejoule_node_power_watts Node power.",
            "# TYPE kubejoule_node_power_watts gauge",
            f'kubejoule_node_power_watts{{node="{node}",source="{source}"}} {watts}',
        ]
        lines += ["# HELP kubejoule_pod_power_watts Pod power.", "# TYPE kubejoule_pod_power_watts gauge"]
        lines += [
            f'kubejoule_pod_power_watts{{namespace="ns",node="{node}",pod="p-{uid}",pod_uid="{uid}"}} 1.5'
            for uid in pods
        ]
    if utilization is not None:
        lines += [
            "# HELP kubejoule_node_cpu_utilization_ratio CPU utilization.",
            "# TYPE kubejoule_node_cpu_utilization_ratio gauge",
            f'kubejoule_node_cpu_utilization_ratio{{node="{node}"}} {utilization}',
        ]
    if curve is not None:
        lines += [
            "# HELP kubejoule_node_power_model_watts Calibration curve.",
            "# TYPE kubejoule_node_power_model_watts gauge",
        ]
        lines += [
            f'kubejoule_node_power_model_watts{{node="{node}",utilization="{i / 10:.1f}"}} {w}'
            for i, w in enumerate(curve)
        ]
    if timestamp is not None:
        lines += [
            "# HELP kubejoule_sample_timestamp_seconds Time of the sample.",
            "# TYPE kubejoule_sample_timestamp_seconds gauge",
            f'kubejoule_sample_timestamp_seconds{{node="{node}"}} {timestamp}',
        ]
    return "\n".join(lines) + "\n"


class TextServer:
    """Serves `pages[path]` as text/plain; a missing path is a 404; `status[path]` overrides."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        self.status: dict[str, int] = {}
        self.hits: dict[str, int] = {}
        pages, status, hits = self.pages, self.status, self.hits

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path = self.path.split("?", 1)[0]
                hits[path] = hits.get(path, 0) + 1
                code = status.get(path, 200 if path in pages else 404)
                body = pages.get(path, "not found\n").encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # quiet
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll interval: stop() waits for the loop to notice (0.5 s by default).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> TextServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def text_server(pages: Mapping[str, str] | None = None) -> Iterator[TextServer]:
    server = TextServer()
    server.pages.update(pages or {})
    server.start()
    try:
        yield server
    finally:
        server.stop()


def http_get(url: str, timeout_seconds: float = 5.0) -> tuple[int, str]:
    """(status, body) of a GET; status 0 when nothing answers (a server still starting)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_seconds) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError:
        return 0, ""
