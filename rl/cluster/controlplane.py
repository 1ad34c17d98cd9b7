"""A real Kubernetes control plane on loopback: etcd, kube-apiserver (RBAC, service-account
tokens, the default admission plugins), kube-controller-manager (Deployments, Jobs, garbage
collection, the disruption controller that PodDisruptionBudgets need), kube-scheduler, KWOK
for fake nodes and, on request, metrics-server behind the aggregation layer
(rl/cluster/aggregation.py) — each started, waited for and stopped by `up()` and `down()`.
`ClusterOptions.disabled_controllers` leaves some of kube-controller-manager's controllers off
(the benchmark's replay stands in for the workload controllers: `REPLAYED_CONTROLLERS`).

Everything lives in one directory: certificates, kubeconfigs, etcd's data, each component's log
(`logs/<name>.log`) and `cluster.json` (what runs, for `down`; a component started beside them,
such as cluster-autoscaler by rl/cluster/autoscaled_plane.py, is added with `add_process`). Ports
are the kernel's free picks; a component that loses its port to a race is started again on
another."""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from common.jsonvalue import JsonObject, subobject, subobjects
from rl.cluster import aggregation, kwok, pki
from rl.cluster.api import Api, ApiError, probe_http, probe_https_anonymous
from rl.cluster.processes import (
    ComponentError,
    Process,
    free_port,
    port_in_use,
    start,
    stop,
    wait_ready,
)
from rl.simulation.traces.scenario import NodeSpec, load_node_groups

STATE_FILE = "cluster.json"
READY_TIMEOUT_S = 180.0
SERVICE_CIDR = "10.0.0.0/24"
ISSUER = "https://kubernetes.default.svc.cluster.local"
# The controllers that create and delete a workload's pods: the benchmark's replay creates them
# instead (rl/evaluation/owners.py), with the trace's lifetimes, which no controller can replay.
REPLAYED_CONTROLLERS = ("replicaset-controller", "replicationcontroller-controller", "statefulset-controller",
                        "job-controller", "deployment-controller", "cronjob-controller")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
METRICS_SERVER = "metrics-server"  # built with the others, started on request


class ClusterError(RuntimeError):
    """The cluster could not be brought up, or its directory is not one `up` made."""


@dataclass(frozen=True)
class ClusterOptions:
    directory: Path
    bin_dir: Path
    nodes_file: Path | None = None
    scheduler_config: Path | None = None
    ready_timeout_s: float = READY_TIMEOUT_S
    metrics_server: bool = False  # off by default: it adds a process and 10 s scrapes
    # kube-controller-manager's controllers to leave off (names as its --controllers lists them):
    # the benchmark's replay stands in for the workload controllers (REPLAYED_CONTROLLERS).
    disabled_controllers: tuple[str, ...] = ()


@dataclass
class Cluster:
    """A running control plane: where its files are and how to reach its API."""

    directory: Path
    api_port: int
    processes: dict[str, Process] = field(default_factory=dict)
    kwok_port: int = 0  # KWOK's server: the fake nodes' kubelet endpoint (TLS, on 127.0.0.1)

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def pki(self) -> Path:
        return self.directory / "pki"

    def admin(self) -> Api:
        return Api("127.0.0.1", self.api_port, self.pki / "ca.crt", self.pki / "admin.crt", self.pki / "admin.key")

    def api_as(self, token: str) -> Api:
        """The API as whoever `token` (a ServiceAccount's) is."""
        return Api("127.0.0.1", self.api_port, self.pki / "ca.crt", token=token)

    def log(self, name: str) -> Path:
        return self.directory / "logs" / f"{name}.log"

    def dead(self) -> list[str]:
        """The components that have exited."""
        return [name for name, p in self.processes.items() if not p.alive()]


def _kubeconfig(path: Path, port: int, ca: Path, pair: pki.KeyPair, user: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubejoule", "cluster": {"server": f"https://127.0.0.1:{port}", "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(pair.cert), "client-key": str(pair.key)}}],
        "contexts": [{"name": "kubejoule", "context": {"cluster": "kubejoule", "user": user}}],
        "current-context": "kubejoule",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def scheduler_config(kubeconfig: Path, source: Path | None) -> JsonObject:
    """The KubeSchedulerConfiguration to run: the user's (or a bare default), with our kubeconfig
    and, unless it says otherwise, no leader election (one replica on loopback)."""
    config: dict[str, object] = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    if source is not None:
        try:
            loaded = yaml.safe_load(source.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ClusterError(f"--scheduler-config {source}: {exc}") from exc
        if not isinstance(loaded, dict) or loaded.get("kind") != "KubeSchedulerConfiguration":
            raise ClusterError(f"--scheduler-config {source}: not a KubeSchedulerConfiguration")
        config = loaded
    config["clientConnection"] = {**subobject(config, "clientConnection"), "kubeconfig": str(kubeconfig)}
    config["leaderElection"] = {"leaderElect": False, **subobject(config, "leaderElection")}
    return config


class _Launcher:
    """Starts components one by one; on any failure stops all it started (nothing left running)."""

    def __init__(self, cluster: Cluster, bin_dir: Path, timeout: float) -> None:
        self.cluster = cluster
        self.bin_dir = bin_dir
        self.timeout = timeout

    def launch(
        self,
        name: str,
        argv_for: Callable[[int], Sequence[str]],
        probe_for: Callable[[int], Callable[[], bool]],
        *,
        binary: str | None = None,
        attempts: int = 3,
    ) -> int:
        """Start `name` on a free port (argv_for(port)); another port when the first was taken."""
        for attempt in range(attempts):
            port = free_port()
            argv = [str(self.bin_dir / (binary or name)), *argv_for(port)]
            process = start(name, argv, self.cluster.directory / "logs")
            self.cluster.processes[name] = process
            try:
                wait_ready(process, probe_for(port), self.timeout)
                return port
            except ComponentError:
                stop(process)
                if attempt + 1 < attempts and port_in_use(process):
                    continue
                raise
        raise AssertionError("unreachable")

    def stop_all(self) -> None:
        for process in reversed(list(self.cluster.processes.values())):
            stop(process)


def up(options: ClusterOptions, progress: Callable[[str], None] = lambda _m: None) -> Cluster:
    """Bring the control plane up in `options.directory`; every component ready on return."""
    wanted = BINARIES + ((METRICS_SERVER,) if options.metrics_server else ())
    missing = [b for b in wanted if not (options.bin_dir / b).is_file()]
    if missing:
        raise ClusterError(
            f"no {', '.join(missing)} in {options.bin_dir}: build the components first (`make k8s-tools`)"
        )
    specs: list[NodeSpec] = load_node_groups(options.nodes_file) if options.nodes_file else []
    directory = options.directory.resolve()
    if (directory / STATE_FILE).exists():
        raise ClusterError(f"{directory} already holds a cluster (`kubejoule-rl cluster down --dir {directory}` first)")
    for stale in ("pki", "etcd", "kwok"):
        shutil.rmtree(directory / stale, ignore_errors=True)
    (directory / "logs").mkdir(parents=True, exist_ok=True)
    authority = pki.Authority(directory / "pki")
    serving = authority.issue("apiserver", "kube-apiserver", server=True,
                              hosts=("127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "10.0.0.1"))
    admin = authority.issue("admin", "kubejoule-admin", groups=("system:masters",))
    kcm_pair = authority.issue("controller-manager", "system:kube-controller-manager")
    scheduler_pair = authority.issue("scheduler", "system:kube-scheduler")
    kwok_serving = authority.issue("kwok", "kwok", server=True, hosts=(kwok.NODE_IP, "localhost"))
    proxy = aggregation.front_proxy(directory / "pki" / "front-proxy")
    sa = pki.service_account_keys(directory / "pki")
    cluster = Cluster(directory, api_port=0)
    launcher = _Launcher(cluster, options.bin_dir, options.ready_timeout_s)
    try:
        progress("starting etcd")
        peer = free_port()
        etcd_port = launcher.launch(
            "etcd",
            lambda p: [
                "--name=kubejoule", f"--data-dir={directory / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{p}", f"--advertise-client-urls=http://127.0.0.1:{p}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=kubejoule=http://127.0.0.1:{peer}", "--unsafe-no-fsync", "--log-level=warn",
            ],
            lambda p: lambda: probe_http("127.0.0.1", p, "/health"),
        )
        progress("starting kube-apiserver")
        ca = authority.cert

        def api_ready(port: int) -> Callable[[], bool]:
            api = Api("127.0.0.1", port, ca, admin.cert, admin.key, timeout=5)
            return lambda: api.healthy("/readyz")

        cluster.api_port = launcher.launch(
            "kube-apiserver",
            lambda p: [
                f"--etcd-servers=http://127.0.0.1:{etcd_port}", "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1", f"--secure-port={p}",
                f"--tls-cert-file={serving.cert}", f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={ca}", f"--service-account-issuer={ISSUER}",
                f"--service-account-key-file={sa.cert}", f"--service-account-signing-key-file={sa.key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=Node,RBAC",
                "--allow-privileged=true", "--endpoint-reconciler-type=none",
                f"--cert-dir={directory / 'apiserver'}", "--profiling=false", "--v=1",
                *aggregation.apiserver_flags(proxy),
            ],
            api_ready,
        )
        kubeconfig = _kubeconfig(directory / "kubeconfig", cluster.api_port, ca, admin, "admin")
        kcm_kubeconfig = _kubeconfig(directory / "controller-manager.kubeconfig", cluster.api_port, ca, kcm_pair,
                                     "system:kube-controller-manager")
        sched_kubeconfig = _kubeconfig(directory / "scheduler.kubeconfig", cluster.api_port, ca, scheduler_pair,
                                       "system:kube-scheduler")
        progress("starting kube-controller-manager")
        launcher.launch(
            "kube-controller-manager",
            lambda p: [
                f"--kubeconfig={kcm_kubeconfig}", f"--authentication-kubeconfig={kcm_kubeconfig}",
                f"--authorization-kubeconfig={kcm_kubeconfig}", "--bind-address=127.0.0.1",
                f"--secure-port={p}", f"--root-ca-file={ca}", f"--service-account-private-key-file={sa.key}",
                "--use-service-account-credentials=true", "--leader-elect=false",
                f"--cert-dir={directory / 'controller-manager'}", "--profiling=false", "--v=1",
                *controllers_flag(options.disabled_controllers),
            ],
            lambda p: lambda: probe_https_anonymous("127.0.0.1", p, "/healthz"),
        )
        progress("starting kube-scheduler")
        config_path = directory / "scheduler-config.yaml"
        config_path.write_text(yaml.safe_dump(scheduler_config(sched_kubeconfig, options.scheduler_config)))
        launcher.launch(
            "kube-scheduler",
            lambda p: [f"--config={config_path}", "--bind-address=127.0.0.1", f"--secure-port={p}", "--v=1"],
            lambda p: lambda: probe_https_anonymous("127.0.0.1", p, "/healthz"),
        )
        progress("starting kwok")
        (directory / "kwok.yaml").write_text(kwok.configuration())
        cluster.kwok_port = launcher.launch(
            "kwok",
            lambda p: [f"--kubeconfig={kubeconfig}", f"--config={directory / 'kwok.yaml'}",
                       f"--server-address={kwok.NODE_IP}:{p}", f"--tls-cert-file={kwok_serving.cert}",
                       f"--tls-private-key-file={kwok_serving.key}"],
            lambda p: lambda: probe_https_anonymous(kwok.NODE_IP, p, "/healthz"),
        )
        _wait_for_default_namespace(cluster.admin(), options.ready_timeout_s)
        if options.metrics_server:
            progress("starting metrics-server")
            start_metrics_server(cluster, options.bin_dir, options.ready_timeout_s)
        if specs:
            progress(f"creating {len(specs)} KWOK nodes")
            create_nodes(cluster.admin(), specs)
            wait_nodes_ready(cluster.admin(), [s.name for s in specs], options.ready_timeout_s)
    except BaseException:
        launcher.stop_all()
        raise
    _save(cluster)
    return cluster


def controllers_flag(disabled: Sequence[str]) -> list[str]:
    """kube-controller-manager's --controllers: every default one but `disabled` (none: no flag)."""
    return [f"--controllers={','.join(['*', *(f'-{name}' for name in disabled)])}"] if disabled else []


def start_metrics_server(cluster: Cluster, bin_dir: Path, timeout: float = READY_TIMEOUT_S) -> None:
    """metrics-server on a running plane (`up` calls it for ClusterOptions.metrics_server; a test
    may add it later): its RBAC, the process, the APIService routing metrics.k8s.io to it —
    Available on return. It is one of the cluster's processes: `down` stops it."""
    if not (bin_dir / METRICS_SERVER).is_file():
        raise ClusterError(f"no {METRICS_SERVER} in {bin_dir}: build the components first (`make k8s-tools`)")
    authority = pki.Authority.load(cluster.pki)
    serving, client = aggregation.metrics_server_certificates(authority)
    kubeconfig = _kubeconfig(cluster.directory / "metrics-server.kubeconfig", cluster.api_port, authority.cert,
                             client, aggregation.METRICS_SERVER_USER)
    api = cluster.admin()
    aggregation.install(api, aggregation.metrics_server_rbac())
    port = _Launcher(cluster, bin_dir, timeout).launch(
        METRICS_SERVER,
        lambda p: aggregation.metrics_server_argv(p, kubeconfig, serving, authority.cert, cluster.kwok_port),
        lambda p: lambda: probe_https_anonymous("127.0.0.1", p, "/livez"),
    )
    try:
        aggregation.install(api, aggregation.metrics_server_route(port, authority.cert))
        aggregation.wait_available(api, timeout)
    except (ApiError, OSError, TimeoutError) as exc:
        stop_metrics_server(cluster)
        raise ComponentError(METRICS_SERVER, str(exc), cluster.log(METRICS_SERVER)) from exc
    if (cluster.directory / STATE_FILE).exists():
        _save(cluster)


def stop_metrics_server(cluster: Cluster) -> None:
    """Take metrics.k8s.io out of the API and stop metrics-server (the rest of the plane runs on)."""
    process = cluster.processes.pop(METRICS_SERVER, None)
    with contextlib.suppress(ApiError, OSError):  # the API itself is down: nothing routes there any more
        aggregation.uninstall(cluster.admin())
    if process is not None:
        stop(process)


def _wait_for_default_namespace(api: Api, timeout: float) -> None:
    """The API answers /readyz before its bootstrap RBAC and namespaces are all there; wait for
    the default ServiceAccount, which the controller manager makes once it can."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            api.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")
            return
        except (ApiError, OSError):
            time.sleep(0.3)
    raise ClusterError(f"the default ServiceAccount did not appear within {timeout:g} s")


def create_nodes(api: Api, specs: Sequence[NodeSpec]) -> None:
    for spec in specs:
        api.request("POST", "/api/v1/nodes", kwok.node_object(spec))


# The node lifecycle controller's taints while a node is not (yet) Ready: a node still carrying
# one is filtered out by kube-scheduler even after its Ready condition turned True.
NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


def node_ready(node: Mapping[str, object]) -> bool:
    """Its Ready condition is True."""
    conditions = subobjects(subobject(node, "status"), "conditions")
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def node_schedulable(node: Mapping[str, object]) -> bool:
    """Ready, and the controller has taken its not-ready taints away: pods can land on it."""
    taints = subobjects(subobject(node, "spec"), "taints")
    return node_ready(node) and not any(t.get("key") in NOT_READY_TAINTS for t in taints)


NODES_READY_TIMEOUT_S = 120.0  # the harness's wait for the nodes it creates to be schedulable (wall seconds)


def wait_nodes_ready(api: Api, names: Sequence[str], timeout: float) -> None:
    """Until every node in `names` is schedulable (`node_schedulable`): Ready is not enough, a pod
    created between Ready and the taint's removal would be placed elsewhere."""
    deadline = time.monotonic() + timeout
    waiting = set(names)
    while waiting:
        listed = api.request("GET", "/api/v1/nodes")
        for node in listed.get("items", []):
            if node_schedulable(node):
                waiting.discard(node["metadata"]["name"])
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"KWOK nodes not Ready after {timeout:g} s: {sorted(waiting)[:5]}")
        time.sleep(0.3)


def add_process(cluster: Cluster, process: Process) -> None:
    """Make `process` one of the cluster's (a component started beside `up`'s, such as
    cluster-autoscaler) and record it in the state file: `down` stops it too."""
    cluster.processes[process.name] = process
    _save(cluster)


def _save(cluster: Cluster) -> None:
    state = {
        "api_port": cluster.api_port,
        "kwok_port": cluster.kwok_port,
        "kubeconfig": str(cluster.kubeconfig),
        "components": {n: {"pid": p.pid, "argv": list(p.argv), "log": str(p.log)} for n, p in cluster.processes.items()},
    }
    (cluster.directory / STATE_FILE).write_text(json.dumps(state, indent=2))


def load(directory: Path) -> Cluster:
    """The cluster `up` left in `directory` (its processes by pid)."""
    path = directory.resolve() / STATE_FILE
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ClusterError(f"{directory}: no cluster here ({path}: {exc})") from exc
    cluster = Cluster(directory.resolve(), int(state["api_port"]), kwok_port=int(state.get("kwok_port", 0)))
    for name, entry in state["components"].items():
        cluster.processes[name] = Process(name, tuple(entry["argv"]), Path(entry["log"]), None, int(entry["pid"]))
    return cluster


def down(cluster: Cluster) -> list[str]:
    """Stop every component (last started first); the names of those that were still running."""
    running = [n for n, p in cluster.processes.items() if p.alive()]
    for process in reversed(list(cluster.processes.values())):
        stop(process)
    (cluster.directory / STATE_FILE).unlink(missing_ok=True)
    return running
