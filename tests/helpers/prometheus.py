"""A real Prometheus (Debian's `prometheus` binary) for integration tests.

    with prometheus_server(scrape_urls=["http://127.0.0.1:9102/metrics"]) as prom:
        prom.wait_for_series("kubejoule_node_power_watts")
        prom.query("kubejoule_node_power_watts")

It listens on 127.0.0.1 on a free port, keeps its TSDB in a temporary directory, scrapes every
`scrape_interval`, and is stopped (and its directory removed) on exit. Tests using it are skipped
with a clear reason when the binary is missing (`make system-deps` installs it) — and fail in CI
(`CI=true`, benchmarks/harness/components.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from benchmarks.harness.processes import free_port

PROMETHEUS_BINARY = "prometheus"
SKIP_REASON = (
    "Debian's `prometheus` binary is not installed (run `make system-deps`, or "
    "`apt-get install prometheus` and `service prometheus stop`)"
)


def prometheus_binary() -> str | None:
    return shutil.which(PROMETHEUS_BINARY)


def require_prometheus() -> str:
    """The binary's path, or skip the calling test with the reason (in CI: fail it)."""
    from benchmarks.harness.components import require_binary

    return require_binary(PROMETHEUS_BINARY, SKIP_REASON)


def scrape_configs_for(urls: Sequence[str], job: str = "kubejoule") -> list[dict[str, Any]]:
    """One job per (scheme, path) group of `urls` (Prometheus sets the path per job)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        groups.setdefault((parts.scheme or "http", parts.path or "/metrics"), []).append(parts.netloc)
    return [
        {
            "job_name": f"{job}-{i}" if len(groups) > 1 else job,
            "scheme": scheme,
            "metrics_path": path,
            "static_configs": [{"targets": netlocs}],
        }
        for i, ((scheme, path), netlocs) in enumerate(sorted(groups.items()))
    ]


class PrometheusProcess:
    def __init__(self, url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.url = url
        self.process = process
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def api(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=5) as response:
            body = json.loads(response.read())
        if body.get("status") != "success":
            raise RuntimeError(f"prometheus {path}: {body}")
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's vector result."""
        return list(self.api("/api/v1/query", {"query": promql}).get("result") or [])

    def wait_for_series(
        self, promql: str, count: int = 1, timeout_seconds: float = 30.0
    ) -> list[dict[str, Any]]:
        """Poll until `promql` returns at least `count` series; fail with the log otherwise."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            result = self.query(promql)
            if len(result) >= count:
                return result
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{promql!r} gave {len(result)} series after {timeout_seconds} s; "
                    f"targets: {self.api('/api/v1/targets')}\nlog:\n{self.log()[-2000:]}"
                )
            time.sleep(0.2)


@contextmanager
def prometheus_server(
    scrape_urls: Sequence[str] = (),
    scrape_configs: Sequence[Mapping[str, Any]] = (),
    scrape_interval: str = "1s",
    startup_timeout_seconds: float = 30.0,
) -> Iterator[PrometheusProcess]:
    """Start Prometheus scraping `scrape_urls` (and/or raw `scrape_configs`); skip if missing."""
    binary = require_prometheus()
    workdir = Path(tempfile.mkdtemp(prefix="kubejoule-prom-"))
    config = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "scrape_configs": [*scrape_configs_for(scrape_urls), *map(dict, scrape_configs)],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log_path = workdir / "prometheus.log"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
                "--log.level=warn",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
    prom = PrometheusProcess(f"http://127.0.0.1:{port}", process, log_path)
    try:
        deadline = time.monotonic() + startup_timeout_seconds
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {process.returncode}:\n{prom.log()}")
            try:
                with urllib.request.urlopen(f"{prom.url}/-/ready", timeout=1) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"prometheus not ready after {startup_timeout_seconds} s")
            time.sleep(0.1)
        yield prom
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        shutil.rmtree(workdir, ignore_errors=True)
