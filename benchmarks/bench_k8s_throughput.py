"""Scheduling throughput on the real kube-scheduler, as kube-scheduler's scheduler_perf measures it:
pods/s binding a batch of pending pods onto KWOK nodes of a real control plane (rl/cluster,
`make k8s-tools`), for

* kube-scheduler alone (its default profile),
* kube-scheduler with kubejoule's extender configured as docs/scheduler.md recommends (weight 5,
  `nodeCacheCapable: true`, `ignorable: true`, `httpTimeout: 1s`), active mode, a power curve
  for every node,
* kubejoule's standalone scheduler (`kubejoule-scheduler run`, active mode, no leader election),

all in one run on one control plane, each as a ratio to kube-scheduler alone (this machine is
shared and noisy). Each scheduler is a process started after its batch of pods exists, named by
its own `schedulerName`; a watch on the batch's namespace records when each pod is bound. The
rate is the batch over the time from the first binding to the last. Beside it, the p99 of
kube-scheduler's own `scheduler_scheduling_algorithm_duration_seconds` (filter and score,
extender calls included: kube-scheduler 1.36 has no histogram of the extender call alone) and,
for the extender, its own request latency.

Anchors: kube-scheduler 680 pods/s at 5,000 nodes (scheduler_perf's threshold); extenders under
10 pods/s past 1,000 nodes (kubernetes/kubernetes#72634). Targets (issue 35): with the extender
≥ 0.3 × kube-scheduler alone; the standalone scheduler ≥ 1 ×.

Run: `python benchmarks/bench_k8s_throughput.py [--nodes 1000,5000] [--pods 5000] [--json]`, or
`python benchmarks/run_all.py k8s_throughput` (KUBEJOULE_K8S_BIN or tools/k8s/build.sh's cache).
`--schedulers` runs some of the three (`kube-scheduler,extender,standalone`, the default: all;
the ratios need kube-scheduler), `--settle S` waits S seconds after creating the nodes before the
first batch (KWOK makes them Ready, then heartbeats each once a minute; default 0).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness.components import k8s_bin_dir  # noqa: E402
from rl.cluster import kwok  # noqa: E402
from rl.cluster.api import Api, probe_http, probe_https_anonymous  # noqa: E402
from rl.cluster.controlplane import Cluster, ClusterOptions, down, up  # noqa: E402
from rl.cluster.processes import Process, free_port, start, stop, wait_ready  # noqa: E402

NODE_CORES = 32
NODE_GIB = 128
POWER = {"idle_watts": 100.0, "max_watts": 400.0}


def _node(i: int) -> dict[str, Any]:
    from rl.simulation.traces.scenario import parse_node_groups

    spec = parse_node_groups([{
        "name": "perf", "count": 1, "cpu_cores": NODE_CORES, "memory_gib": NODE_GIB,
        "power": {"idle_watts": POWER["idle_watts"] + (i % 7) * 5, "max_watts": POWER["max_watts"] - (i % 5) * 10},
    }])[0]
    obj = kwok.node_object(spec)
    obj["metadata"]["name"] = obj["metadata"]["labels"]["kubernetes.io/hostname"] = f"perf-{i}"
    return obj


def create_nodes(api: Api, count: int) -> None:
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: api.request("POST", "/api/v1/nodes", _node(i)), range(count)))


def create_pods(api: Api, namespace: str, scheduler: str, count: int) -> None:
    api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    _wait_for_account(api, namespace)

    def one(i: int) -> None:
        api.request("POST", f"/api/v1/namespaces/{namespace}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p-{i}"},
            "spec": {"schedulerName": scheduler, "containers": [{
                "name": "c", "image": "registry.invalid/none",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
        })

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(count)))


def _wait_for_account(api: Api, namespace: str) -> None:
    for _ in range(300):
        try:
            api.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
            return
        except Exception:
            time.sleep(0.1)
    raise RuntimeError(f"no default ServiceAccount in {namespace}")


class Bindings:
    """Watches a namespace's pods and notes when each is first seen bound: list, then watch from
    the list's resourceVersion, and list again whenever the server ends the watch (as an
    informer does; a watch can close at any time)."""

    def __init__(self, api: Api, namespace: str) -> None:
        self.times: dict[str, float] = {}
        self._api = api
        self._path = f"/api/v1/namespaces/{namespace}/pods"
        self._namespace = namespace
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _note(self, pod: dict[str, Any]) -> None:
        if pod.get("spec", {}).get("nodeName"):
            self.times.setdefault(pod["metadata"]["name"], time.monotonic())

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                listed = self._api.request("GET", self._path)
                for pod in listed.get("items", []):
                    self._note(pod)
                version = listed["metadata"]["resourceVersion"]
                for event in self._api.watch(f"{self._path}?resourceVersion={version}", timeout_seconds=300):
                    if event.get("type") == "ERROR":
                        break
                    self._note(event.get("object", {}))
            except Exception as exc:  # a broken watch is listed and watched again
                if self._stopped.is_set():
                    return
                print(f"bindings watch of {self._namespace}: {exc!r}; listing again", file=sys.stderr, flush=True)
                time.sleep(0.5)

    def wait(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.times) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(self.times)}/{count} pods bound in {self._namespace} after {timeout:g} s")
            time.sleep(0.2)

    def rate(self) -> float:
        values = sorted(self.times.values())
        return (len(values) - 1) / (values[-1] - values[0]) if len(values) > 1 and values[-1] > values[0] else math.nan


def _histogram_p99(text: str, name: str, selector: str = "") -> float:
    """p99 (upper bucket bound) of a Prometheus histogram summed over the series matching `selector`."""
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if not line.startswith(name + "_bucket") or selector not in line:
            continue
        le = line.split('le="', 1)[1].split('"', 1)[0]
        bound = math.inf if le == "+Inf" else float(le)
        buckets[bound] = buckets.get(bound, 0.0) + float(line.rsplit(" ", 1)[1])
    if not buckets or buckets.get(math.inf, 0.0) == 0:
        return math.nan
    total = buckets[math.inf]
    for bound in sorted(buckets):
        if buckets[bound] >= 0.99 * total:
            return bound
    return math.inf


def _metrics(url: str) -> str:
    import ssl

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, context=context, timeout=10) as answer:  # noqa: S310 (loopback)
        return answer.read().decode()


def kube_scheduler(cluster: Cluster, bins: Path, name: str, extender_port: int | None) -> tuple[Process, int]:
    profile: dict[str, Any] = {"schedulerName": name}
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(cluster.directory / "scheduler.kubeconfig"), "qps": 5000, "burst": 5000},
        "leaderElection": {"leaderElect": False}, "profiles": [profile],
    }
    if extender_port is not None:
        config["extenders"] = [{
            "urlPrefix": f"http://127.0.0.1:{extender_port}", "filterVerb": "filter", "prioritizeVerb": "prioritize",
            "weight": 5, "httpTimeout": "1s", "nodeCacheCapable": True, "ignorable": True,
        }]
    path = cluster.directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    process = start(name, [str(bins / "kube-scheduler"), f"--config={path}", "--bind-address=127.0.0.1",
                           f"--secure-port={port}", "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                           "--v=0"], cluster.directory / "logs")
    wait_ready(process, lambda: probe_https_anonymous("127.0.0.1", port, "/healthz"), 120)
    return process, port


def _python(module_args: list[str], name: str, cluster: Cluster, env: dict[str, str]) -> Process:
    argv = [sys.executable, "-c", "import sys; from scheduler.cmd.cli import main; raise SystemExit(main(sys.argv[1:]))",
            *module_args]
    return start(name, argv, cluster.directory / "logs", env={**os.environ, **env, "PYTHONPATH": str(ROOT)})


def extender(cluster: Cluster, nodes: int, work: Path) -> tuple[Process, int]:
    port = free_port()
    curves = {f"perf-{i}": {"idle_watts": POWER["idle_watts"] + (i % 7) * 5,
                            "max_watts": POWER["max_watts"] - (i % 5) * 10} for i in range(nodes)}
    config = work / "extender.yaml"
    config.write_text(yaml.safe_dump({
        "mode": "active", "curves": curves, "kubernetes": {"kubeconfig": str(cluster.kubeconfig)},
        "telemetry": {"node_cores": {name: NODE_CORES for name in curves}},
    }))
    process = _python(["extender", "--listen", f"127.0.0.1:{port}", "--mode", "active", "--config", str(config)],
                      "extender", cluster, {"KUBECONFIG": str(cluster.kubeconfig)})
    wait_ready(process, lambda: probe_http("127.0.0.1", port, "/readyz"), 120)
    return process, port


def standalone(cluster: Cluster, name: str, work: Path) -> tuple[Process, int]:
    port = free_port()
    config = work / "standalone.yaml"
    config.write_text(yaml.safe_dump({"kubernetes": {"kubeconfig": str(cluster.kubeconfig)}}))
    process = _python(["run", "--mode", "active", "--scheduler-name", name, "--no-leader-elect",
                       "--listen", f"127.0.0.1:{port}", "--config", str(config)], name, cluster,
                      {"KUBECONFIG": str(cluster.kubeconfig)})
    wait_ready(process, lambda: probe_http("127.0.0.1", port, "/readyz"), 120)
    return process, port


def measure(cluster: Cluster, name: str, pods: int, launch: Callable[[], list[Process]],
            metrics: Callable[[], dict[str, float]]) -> dict[str, float]:
    api = cluster.admin()
    namespace = f"bench-{name}"
    create_pods(api, namespace, name, pods)
    bindings = Bindings(api, namespace)
    started = time.monotonic()
    processes = launch()
    try:
        bindings.wait(pods, timeout=1500)
        result = {"pods_per_s": bindings.rate(), "seconds": time.monotonic() - started, **metrics()}
    finally:
        bindings.stop()
        for process in reversed(processes):
            stop(process)
    api.request("DELETE", f"/api/v1/namespaces/{namespace}")
    return result


SCHEDULERS = ("kube-scheduler", "extender", "standalone")  # --schedulers' names, in running order


def run(nodes: int, pods: int, schedulers: tuple[str, ...] = SCHEDULERS, settle: float = 0.0) -> dict[str, dict[str, float]]:
    bins = k8s_bin_dir()
    with tempfile.TemporaryDirectory(prefix="kj-throughput-") as tmp:
        work = Path(tmp)
        cluster = up(ClusterOptions(work / "plane", bins))
        try:
            print(f"creating {nodes} KWOK nodes", file=sys.stderr, flush=True)
            create_nodes(cluster.admin(), nodes)
            if settle > 0:
                print(f"letting the nodes settle for {settle:g} s", file=sys.stderr, flush=True)
                time.sleep(settle)
            results: dict[str, dict[str, float]] = {}
            ports: dict[str, int] = {}

            def launch_kube(name: str, with_extender: bool) -> Callable[[], list[Process]]:
                def launch() -> list[Process]:
                    started: list[Process] = []
                    extender_port = None
                    if with_extender:
                        ext, extender_port = extender(cluster, nodes, work)
                        started.append(ext)
                        ports["extender"] = extender_port
                    sched, ports[name] = kube_scheduler(cluster, bins, name, extender_port)
                    return [*started, sched]
                return launch

            def kube_metrics(name: str) -> Callable[[], dict[str, float]]:
                def read() -> dict[str, float]:
                    text = _metrics(f"https://127.0.0.1:{ports[name]}/metrics")
                    out = {"algorithm_p99_s": _histogram_p99(text, "scheduler_scheduling_algorithm_duration_seconds")}
                    if "extender" in ports and name == "with-extender":
                        own = urllib.request.urlopen(f"http://127.0.0.1:{ports['extender']}/metrics", timeout=10).read().decode()
                        out["extender_prioritize_p99_s"] = _histogram_p99(
                            own, "kubejoule_extender_request_duration_seconds", 'verb="prioritize"')
                    return out
                return read

            for label, name, with_extender in (("kube-scheduler", "alone", False),
                                               ("kube-scheduler + extender", "with-extender", True)):
                if ("extender" if with_extender else "kube-scheduler") not in schedulers:
                    continue
                print(f"{nodes} nodes: {label}", file=sys.stderr, flush=True)
                results[label] = measure(cluster, name, pods, launch_kube(name, with_extender), kube_metrics(name))

            def launch_standalone() -> list[Process]:
                process, ports["standalone"] = standalone(cluster, "standalone", work)
                return [process]

            if "standalone" in schedulers:
                print(f"{nodes} nodes: standalone", file=sys.stderr, flush=True)
                results["standalone"] = measure(cluster, "standalone", pods, launch_standalone, dict)
            return results
        finally:
            down(cluster)


def table(all_results: dict[int, dict[str, dict[str, float]]], pods: int) -> str:
    lines = [f"Binding {pods} pending pods on the real control plane (pods/s from the first binding to the last)", "",
             "| nodes | scheduler | pods/s | × kube-scheduler alone | kube-scheduler algorithm p99 | extender prioritize p99 |",
             "|---|---|---|---|---|---|"]
    for nodes, results in all_results.items():
        base = results.get("kube-scheduler", {}).get("pods_per_s", math.nan)
        for label, r in results.items():
            p99 = r.get("algorithm_p99_s", math.nan)
            ext = r.get("extender_prioritize_p99_s", math.nan)
            ratio = r["pods_per_s"] / base
            lines.append(f"| {nodes} | {label} | {r['pods_per_s']:.0f} | {'—' if math.isnan(ratio) else f'{ratio:.2f}'} | "
                         f"{'—' if math.isnan(p99) else f'{p99 * 1000:.0f} ms'} | {'—' if math.isnan(ext) else f'{ext * 1000:.0f} ms'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", default="1000,5000", help="comma-separated node counts (default 1000,5000)")
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS),
                        help=f"comma-separated, of {', '.join(SCHEDULERS)} (default: all three)")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="seconds to wait after creating the nodes, before the first pods (default 0)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv if argv is not None else [])
    schedulers = tuple(x.strip() for x in args.schedulers.split(",") if x.strip())
    unknown = sorted(set(schedulers) - set(SCHEDULERS))
    if unknown or not schedulers:
        parser.error(f"--schedulers: unknown {', '.join(unknown) or '(none given)'}; of {', '.join(SCHEDULERS)}")
    # A stopped run still stops its control plane (run()'s finally) instead of leaving it behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = {n: run(n, args.pods, schedulers, args.settle) for n in (int(x) for x in args.nodes.split(","))}
    if args.json:
        return json.dumps(results, indent=2)
    return table(results, args.pods)


if __name__ == "__main__":
    print(main(sys.argv[1:]))
