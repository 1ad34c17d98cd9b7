"""The extender inside the real kube-scheduler (issue 32 item 3): `kubejoule-scheduler extender` as
a subprocess, called by kube-scheduler 1.36 processes of our own configured with docs/scheduler.md's
extender block (weight 5, `nodeCacheCapable: true`, `ignorable: true`, httpTimeout 1s) and with the
same block in the `Nodes.items` form (`nodeCacheCapable: false`), each its own profile
(schedulerName) beside the session's default kube-scheduler.

Two KWOK nodes of our own (tainted; our pods tolerate and select them): a small, lean one (8 cores,
40 → 100 W) and a big, hungry one (32 cores, 200 → 600 W). Their telemetry is what docs/scheduler.md says
the extender reads by default, agents' /metrics (a static `--agent NODE=URL` list), served by fake
agents with each node's calibration curve; the nodes' cores come from the API
(`node_capacity_from_kubernetes`). kube-scheduler's default scoring (LeastAllocated,
BalancedAllocation) puts a 1-CPU pod on the big node; the energy score (7.5 W on the lean node
against 12.5 W on the hungry one) puts it on the lean one, in both wire forms. A pod whose requests
are at pod level (`spec.resources`) is priced by them; a node that joins later is priced from the
extender's watch of the API within seconds, and chosen. A power cap (`/filter`) keeps a pod off a
node, with the extender's reason in the pod's condition. In shadow mode kube-scheduler places alone
while the extender records its recommendation. With the extender stopped, pods are still scheduled
(ignorable), by the default scoring. kube-scheduler 1.36 has no metric of its own per extender: an
extender's time is inside `scheduler_scheduling_algorithm_duration_seconds` (schedule_one.go: the
algorithm's filter and score phases call the extenders); a proxy holding each request 0.3 s shows
it there."""

from __future__ import annotations

import json
import ssl
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from rl.cluster import pki
from rl.cluster.api import Api
from rl.cluster.controlplane import Cluster
from rl.cluster.processes import Process, stop
from rl.simulation.traces.scenario import parse_node_groups
from tests.helpers.docs_blocks import BLOCKS
from tests.helpers.e2e_cluster import eventually
from tests.helpers.e2e_components import (
    DelayProxy,
    create_tainted_nodes,
    delete_quietly,
    ensure_namespace,
    pod,
    sample,
    scrape,
    start_kube_scheduler,
    start_kubejoule,
)
from tests.helpers.sched_http import TextServer, agent_exposition

if TYPE_CHECKING:
    from tests.e2e.conftest import Plane

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "e2e-extender"
TAINT = {"key": "kubejoule.io/e2e", "value": "extender", "effect": "NoSchedule"}
GROUPS = [
    {"name": "e2e-ext-lean", "count": 1, "cpu_cores": 8, "memory_gib": 16,
     "power": {"model": "linear", "idle_watts": 40, "max_watts": 100}},
    {"name": "e2e-ext-hungry", "count": 1, "cpu_cores": 32, "memory_gib": 64,
     "power": {"model": "linear", "idle_watts": 200, "max_watts": 600}},
]
LEAN, HUNGRY = "e2e-ext-lean-0", "e2e-ext-hungry-0"
# A node that joins after the extender started: its agent answers from the start.
JOINING = parse_node_groups([{"name": "e2e-ext-joining", "count": 1, "cpu_cores": 16, "memory_gib": 32,
                              "power": {"model": "linear", "idle_watts": 20, "max_watts": 80}}])[0]
FORMS = {"names": True, "items": False}  # profile suffix → nodeCacheCapable
DELAY_S = 0.3
CAP_W = 300


def documented_extender_block() -> dict[str, Any]:
    """The `extenders:` entry of the KubeSchedulerConfiguration example in docs/scheduler.md
    ("The extender beside kube-scheduler"), as a user copies it."""
    for block in BLOCKS:
        if block.path != ROOT / "docs" / "scheduler.md" or block.lang != "yaml":
            continue
        loaded = yaml.safe_load(block.text)
        if isinstance(loaded, dict) and loaded.get("kind") == "KubeSchedulerConfiguration" and loaded.get("extenders"):
            [entry] = loaded["extenders"]
            return dict(entry)
    raise AssertionError("docs/scheduler.md has no KubeSchedulerConfiguration with an extenders block")


@dataclass
class Setup:
    api: Api
    directory: Path
    extender_args: list[str]
    extender: Process
    extender_port: int
    proxy: DelayProxy  # both kube-schedulers reach the extender through it
    schedulers: dict[str, tuple[Process, int]]  # form → its kube-scheduler, its secure port
    tls: tuple[Path, Path]  # the extender's certificate and key (HTTPS, as docs/scheduler.md sets it up)
    ca: Path  # the CA that signed it: kube-scheduler's tlsConfig.caFile

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    def extender_up(self, *more: str) -> None:
        """The extender running (started again after a test stopped it), with `more` arguments."""
        if not self.extender.alive():
            self.extender, self.extender_port = start_kubejoule(
                "extender", [*self.extender_args, *more], self.directory, "/readyz", tls=self.tls)
            self.proxy.target_port = self.extender_port


def scheduler_name(form: str) -> str:
    return f"kubejoule-e2e-{form}"


@pytest.fixture(scope="module")
def setup(plane: Plane, k8s_bin: Path) -> Iterator[Setup]:
    cluster = plane.get()
    api = cluster.admin()
    directory = cluster.directory / "e2e-extender"
    directory.mkdir(exist_ok=True)
    specs = parse_node_groups(GROUPS)
    create_tainted_nodes(api, specs, TAINT)
    ensure_namespace(api, NAMESPACE)
    agents = TextServer()
    now = time.time()
    for spec in [*specs, JOINING]:
        agents.pages[f"/{spec.name}/metrics"] = agent_exposition(
            spec.name, now, watts=spec.curve.as_points()[1], utilization=0.1, curve=spec.curve.as_points(), pods=())
    agents.start()
    config = directory / "extender.yaml"
    config.write_text(yaml.safe_dump({
        "mode": "active", "max_staleness_seconds": 3600, "refresh_seconds": 1,
        "scorer": {"name": "heuristic", "delta_p_ref_watts": 20},
        # Far above what a 1-CPU pod takes the hungry node to (252.5 W); a 10-CPU pod: 365 W.
        "power_caps_watts": {HUNGRY: CAP_W},
        "telemetry": {"node_capacity_from_kubernetes": True},
        "kubernetes": {"kubeconfig": str(cluster.kubeconfig)},
    }))
    args = ["extender", "--config", str(config),
            *[a for s in [*specs, JOINING] for a in ("--agent", f"{s.name}={agents.url(f'/{s.name}/metrics')}")]]
    started: list[Process] = []
    proxy = None
    authority = pki.Authority(directory / "extender-pki")
    pair = authority.issue("extender", "kubejoule-extender", server=True, hosts=("127.0.0.1", "localhost"))
    tls = (pair.cert, pair.key)
    try:
        extender, port = start_kubejoule("extender", args, directory, "/readyz", tls=tls)
        started.append(extender)
        proxy = DelayProxy(port)
        schedulers = {}
        for form, cache_capable in FORMS.items():
            # The documented block as it is (HTTPS), but for where our extender listens, the CA
            # that signed its certificate and, for the items form, nodeCacheCapable.
            entry = documented_extender_block()
            assert entry["enableHTTPS"] is True
            entry["urlPrefix"] = f"https://127.0.0.1:{proxy.port}"
            entry["tlsConfig"]["caFile"] = str(authority.cert)
            entry["nodeCacheCapable"] = cache_capable
            path = directory / f"kube-scheduler-{form}.yaml"
            path.write_text(yaml.safe_dump({
                "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": str(cluster.directory / "scheduler.kubeconfig")},
                "leaderElection": {"leaderElect": False},
                "profiles": [{"schedulerName": scheduler_name(form)}],
                "extenders": [entry],
            }))
            schedulers[form] = start_kube_scheduler(k8s_bin, f"kube-scheduler-{form}", path, directory)
            started.append(schedulers[form][0])
        setup = Setup(api, directory, args, extender, port, proxy, schedulers, tls, authority.cert)
        yield setup
        started.append(setup.extender)
    finally:
        for process in reversed(started):
            stop(process)
        if proxy is not None:
            proxy.close()
        agents.stop()
        delete_quietly(api, f"/api/v1/namespaces/{NAMESPACE}")
        for spec in [*specs, JOINING]:
            delete_quietly(api, f"/api/v1/nodes/{spec.name}")


@pytest.fixture
def live(setup: Setup) -> Setup:
    setup.extender_up()
    return setup


def placed(api: Api, name: str, timeout: float = 30.0) -> str:
    """The node the pod is bound to (waiting for the binding)."""
    path = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}"
    return str(eventually(lambda: api.request("GET", path)["spec"].get("nodeName"), timeout, f"pod {name} bound"))


def run_pod(api: Api, name: str, scheduler: str | None) -> str:
    api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod(name, scheduler, TAINT))
    try:
        return placed(api, name)
    finally:
        delete_quietly(api, f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", now=True)


def extender_calls(setup: Setup) -> dict[str, float]:
    samples = scrape(f"https://127.0.0.1:{setup.extender_port}/metrics", insecure_tls=True)
    return {verb: sample(samples, "kubejoule_extender_requests_total", verb=verb, code="200")
            for verb in ("filter", "prioritize")}


def skipped_calls(setup: Setup, form: str, pod_name: str) -> list[str]:
    """kube-scheduler's log lines of extender calls it skipped for the pod: an ignorable
    extender's failures are otherwise silent (the pod is scheduled without it)."""
    text = setup.schedulers[form][0].log.read_text(errors="replace")
    return [line for line in text.splitlines() if "Skipping extender" in line and f"/{pod_name}\"" in line]


def energy_scores(setup: Setup, manifest: dict[str, Any], nodes: tuple[str, ...] = (LEAN, HUNGRY)) -> dict[str, int]:
    """The extender's own answer for the pod, asked directly."""
    body = json.dumps({"Pod": manifest, "NodeNames": list(nodes)}).encode()
    request = urllib.request.Request(f"https://127.0.0.1:{setup.extender_port}/prioritize", body,
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10, context=setup.context()) as response:
        return {entry["Host"]: entry["Score"] for entry in json.load(response)}


def test_default_scoring_alone_puts_the_pod_on_the_big_node(cluster: Cluster, setup: Setup) -> None:
    assert run_pod(setup.api, "by-default", None) == HUNGRY


@pytest.mark.parametrize("form", list(FORMS))
def test_kube_scheduler_with_the_extender_puts_the_pod_where_energy_says(cluster: Cluster, live: Setup, form: str) -> None:
    configured = f'"NodeCacheCapable":{str(FORMS[form]).lower()},'
    assert configured in live.schedulers[form][0].log.read_text()  # the form kube-scheduler runs with
    scores = energy_scores(live, pod(f"energy-{form}", None, TAINT))
    # ΔP of one core: 60 W / 8 = 7.5 W on the lean node, 400 W / 32 = 12.5 W on the hungry one;
    # ΔP_ref 20 W: 100 × (1 − ΔP / 20) → 62.5 and 37.5 → 0–10.
    assert scores[LEAN] == 6 and scores[HUNGRY] in (3, 4)
    before = extender_calls(live)
    assert run_pod(live.api, f"energy-{form}", scheduler_name(form)) == LEAN
    after = extender_calls(live)
    # kube-scheduler called both verbs, every call was answered 200, and none was skipped.
    assert after["filter"] > before["filter"] and after["prioritize"] > before["prioritize"]
    assert skipped_calls(live, form, f"energy-{form}") == []


def test_pod_level_requests_are_priced_as_kube_scheduler_counts_them(cluster: Cluster, live: Setup) -> None:
    """`spec.resources` (PodLevelResources, on by default since 1.34): 2 CPUs for the pod, none
    for its container. kube-scheduler counts the 2 CPUs; so must the energy score: 15 W on the
    lean node, 25 W on the hungry one, not the 0.1 CPU of a container without requests."""
    manifest = pod("pod-level", scheduler_name("names"), TAINT)
    del manifest["spec"]["containers"][0]["resources"]
    manifest["spec"]["resources"] = {"requests": {"cpu": "2", "memory": "256Mi"}}
    live.api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", manifest)
    try:
        sent = live.api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/pod-level")
        assert sent["spec"]["resources"]["requests"]["cpu"] == "2"  # the API kept it (the gate is on)
        scores = energy_scores(live, sent)
        assert scores[LEAN] in (2, 3) and scores[HUNGRY] == 0  # 100 × (1 − ΔP / 20 W): 25 and < 0
        assert placed(live.api, "pod-level") == LEAN
    finally:
        delete_quietly(live.api, f"/api/v1/namespaces/{NAMESPACE}/pods/pod-level", now=True)


@pytest.mark.parametrize("form", list(FORMS))
def test_a_power_cap_keeps_a_pod_off_the_node_with_the_extenders_reason(cluster: Cluster, live: Setup, form: str) -> None:
    """/filter's FailedNodes as kube-scheduler takes them: 10 CPUs fit only the hungry node,
    which the pod would take past its cap; the pod stays Pending, and says why."""
    name = f"capped-{form}"
    path = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}"
    live.api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod(name, scheduler_name(form), TAINT, cpu="10"))
    try:
        def refused() -> str | None:
            status = live.api.request("GET", path)["status"]
            condition = next((c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"), None)
            return condition["message"] if condition and condition.get("reason") == "Unschedulable" else None

        message = eventually(refused, 30, "the pod Unschedulable")
        assert f"over its {CAP_W} W power cap" in message and "Insufficient cpu" in message
        assert live.api.request("GET", path)["spec"].get("nodeName") is None
        assert skipped_calls(live, form, name) == []
    finally:
        delete_quietly(live.api, path, now=True)


def test_the_extenders_latency_shows_in_kube_schedulers_algorithm_duration(cluster: Cluster, live: Setup) -> None:
    url = f"https://127.0.0.1:{live.schedulers['names'][1]}/metrics"
    name = "scheduler_scheduling_algorithm_duration_seconds"
    before = scrape(url, insecure_tls=True)
    live.proxy.delay = DELAY_S
    try:
        assert run_pod(live.api, "slow-extender", scheduler_name("names")) == LEAN
    finally:
        live.proxy.delay = 0.0
    after = eventually(
        lambda: (s := scrape(url, insecure_tls=True)) and sample(s, f"{name}_count") > sample(before, f"{name}_count") and s,
        10, "the algorithm's duration observed",
    )
    count = sample(after, f"{name}_count") - sample(before, f"{name}_count")
    seconds = sample(after, f"{name}_sum") - sample(before, f"{name}_sum")
    assert count == 1
    # /filter and /prioritize each held DELAY_S by the proxy: both inside the algorithm's time,
    # and well under httpTimeout (1 s), so the energy score still decided.
    assert 2 * DELAY_S <= seconds < 2.0
    # Its buckets (1 ms × 2^k) say the same: the attempt took longer than 0.512 s.
    assert sample(after, f"{name}_bucket", le="0.512") == sample(before, f"{name}_bucket", le="0.512")
    assert skipped_calls(live, "names", "slow-extender") == []


def test_a_node_that_joins_is_priced_from_the_cluster_watch_and_chosen(cluster: Cluster, live: Setup) -> None:
    """Cluster-autoscaler adds nodes: kube-scheduler sends a new node's name only
    (nodeCacheCapable), so the extender must learn its cores from its own watch of the API. Until
    it has, the node scores as an unknown one (0: missing data never wins); within seconds it is
    priced, and chosen."""
    create_tainted_nodes(live.api, [JOINING], TAINT)
    try:
        nodes = (LEAN, HUNGRY, JOINING.name)
        manifest = pod("joining", None, TAINT)
        # ΔP of one core: 60 W / 16 = 3.75 W → 100 × (1 − 3.75 / 20) = 81 → 8, the best of three.
        scores = eventually(lambda: (s := energy_scores(live, manifest, nodes))[JOINING.name] == 8 and s, 5,
                            "the joining node priced")
        assert scores[LEAN] == 6
        assert run_pod(live.api, "joining", scheduler_name("names")) == JOINING.name
    finally:
        delete_quietly(live.api, f"/api/v1/nodes/{JOINING.name}")


def test_with_the_extender_stopped_pods_still_schedule(cluster: Cluster, setup: Setup) -> None:
    stop(setup.extender)  # started again by the next test that needs it (`live`)
    for form in FORMS:
        # ignorable: the failed calls are skipped, and default scoring decides.
        assert run_pod(setup.api, f"no-extender-{form}", scheduler_name(form)) == HUNGRY
        assert skipped_calls(setup, form, f"no-extender-{form}"), "kube-scheduler says it went without"


def test_in_shadow_mode_the_extender_recommends_and_kube_scheduler_decides_alone(cluster: Cluster, setup: Setup) -> None:
    """The documented first step: `--mode shadow` answers neutral scores and filters nothing, so
    kube-scheduler places as without it (the big node), while the extender records what it
    would have chosen."""
    stop(setup.extender)
    setup.extender_up("--mode", "shadow")
    try:
        def recommended() -> float:
            samples = scrape(f"https://127.0.0.1:{setup.extender_port}/metrics", insecure_tls=True)
            return sample(samples, "kubejoule_scheduler_recommendations_total", mode="shadow")

        before = recommended()
        assert run_pod(setup.api, "shadowed", scheduler_name("names")) == HUNGRY
        assert recommended() > before
        assert skipped_calls(setup, "names", "shadowed") == []
        assert "shadow e2e-extender/shadowed: energy recommends e2e-ext-lean-0" in setup.extender.log.read_text()
    finally:
        stop(setup.extender)  # the next test that needs it starts it in active mode again
