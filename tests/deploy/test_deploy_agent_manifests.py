"""daemonset/: the agent's DaemonSet and the components that change it (calibration,
GPU, BMC) stay least-privilege and fit the agent's CLI and measured needs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.cmd.cli import build_parser
from tests.helpers.deploy_kustomize import (
    build,
    object_key,
    user_kustomization,
)
from tests.helpers.deploy_manifests import (
    AGENT_HOST_PATHS,
    COMPONENTS,
    ROOT,
    agent_of,
    built,
    by_kind,
    containers,
)

# -- the agent ---------------------------------------------------------------------------------




@pytest.mark.parametrize("target", ["overlays/intel", "intel+all-components"])
def test_agent_reads_the_host_read_only_and_drops_every_capability(target: str, tmp_path: Path) -> None:
    # With every component too: none may add a capability (SYS_ADMIN and SYS_PTRACE once came
    # with per-pod network counters, which /proc/<pid>/net/dev gives without them) or hostNetwork.
    agent = agent_of(built(target, tmp_path))
    pod = agent["spec"]["template"]["spec"]
    assert pod["hostPID"] is True and pod.get("hostNetwork", False) is False
    assert pod["securityContext"]["runAsUser"] == 0  # energy_uj is root-only (CVE-2020-8694)
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security.get("privileged", False) is False
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    host_paths.pop("pod-resources", None)  # the gpu component's kubelet socket (tested with it)
    host_paths.pop("host-energy", None)  # the host-energy component's share (tested with it)
    assert host_paths == {name: host for name, (host, _) in AGENT_HOST_PATHS.items()}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert {name: mounts[name]["mountPath"] for name in host_paths} == {
        name: inside for name, (_, inside) in AGENT_HOST_PATHS.items()
    }
    for name in host_paths:
        assert mounts[name].get("readOnly") is True
        assert mounts[name].get("recursiveReadOnly") == "IfPossible"
        assert "mountPropagation" not in mounts[name]  # it would rule recursiveReadOnly out
    assert set(mounts) <= {v["name"] for v in pod["volumes"]}


def test_agent_args_env_ports_and_probes_fit_together(tmp_path: Path) -> None:
    agent = agent_of(built("base", tmp_path))
    (container,) = containers(agent)
    args = container["args"]
    assert args[0] == "run"
    options = dict(zip(args[1::2], args[2::2], strict=True))
    assert options == {
        "--listen": ":9102",
        "--interval": "5",
        "--procfs": "/host/proc",
        "--sysfs": "/host/sys",
    }
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    (port,) = container["ports"]
    assert (port["name"], port["containerPort"]) == ("metrics", 9102)
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}


# Kubernetes quantities the manifests use: CPU in millicores ("20m") and memory in Mi.
def millicores(quantity: str) -> float:
    return float(quantity[:-1]) if quantity.endswith("m") else float(quantity) * 1000


def mebibytes(quantity: str) -> float:
    assert quantity.endswith("Mi"), quantity
    return float(quantity[:-2])


def benchmark_figure(document: str, pattern: str) -> float:
    text = (ROOT / "docs" / document).read_text()
    found = re.findall(pattern, text)
    assert found, f"docs/{document} no longer has the figure {pattern!r}: update this test"
    return max(float(f) for f in found)


def test_agent_resources_cover_what_the_agent_benchmark_measured(tmp_path: Path) -> None:
    """Requests cover the agent's measured cost (docs/agent.md: the whole `run` process with
    scrapes; docs/agent-kubernetes.md: its Metrics Server reads on a full node), limits leave
    at least twice that."""
    (container,) = containers(agent_of(built("base", tmp_path)))
    args = container["args"]
    interval_s = float(args[args.index("--interval") + 1])
    cpu_per_sample_ms = benchmark_figure(
        "agent.md", r"whole-process CPU per sample[^\n]*?(\d+(?:\.\d+)?) ms"
    )
    peak_rss_mb = benchmark_figure("agent.md", r"peak RSS \(VmHWM\)[^\n]*?(\d+(?:\.\d+)?) MB")
    metrics_server_read_ms = benchmark_figure(
        "agent-kubernetes.md", r"Metrics Server read, \d+ pods \| [\d.]+–(\d+(?:\.\d+)?) ms"
    )
    metrics_server_period_s = max(interval_s, 15.0)  # the agent's default: at least 15 s
    cpu_used_m = cpu_per_sample_ms / interval_s + metrics_server_read_ms / metrics_server_period_s
    memory_used_mi = peak_rss_mb * 1e6 / 2**20
    requests, limits = container["resources"]["requests"], container["resources"]["limits"]
    assert millicores(requests["cpu"]) >= cpu_used_m
    assert mebibytes(requests["memory"]) >= memory_used_mi
    assert millicores(limits["cpu"]) >= 2 * cpu_used_m
    assert mebibytes(limits["memory"]) >= 2 * memory_used_mi


def test_agent_args_are_accepted_by_the_agent_cli(tmp_path: Path) -> None:
    from agent.cmd import cli
    parser = cli.build_parser()
    for target in ("base", "intel+all-components"):
        (container,) = containers(agent_of(built(target, tmp_path)))
        args = [a.replace("$(NODE_NAME)", "node-a") for a in container["args"]]
        parsed = parser.parse_args(args)
        assert parsed.command == "run"


def test_agent_tolerates_every_taint(tmp_path: Path) -> None:
    pod = agent_of(built("base", tmp_path))["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"operator": "Exists"}]


@pytest.mark.parametrize(("overlay", "vendor"), [("intel", "Intel"), ("amd", "AMD")])
def test_overlays_select_nodes_by_nfd_cpu_vendor(overlay: str, vendor: str, tmp_path: Path) -> None:
    objects = built(f"overlays/{overlay}", tmp_path)
    pod = agent_of(objects)["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    (term,) = terms
    (expression,) = term["matchExpressions"]
    assert expression["key"] == "feature.node.kubernetes.io/cpu-model.vendor_id"
    assert expression["operator"] == "In" and vendor in expression["values"]
    # The overlay changes the agent's placement only: everything else is the base's.
    base = {object_key(o): o for o in built("base", tmp_path)}
    for obj in objects:
        if obj["kind"] != "DaemonSet":
            assert obj == base[object_key(obj)]
    assert "affinity" not in agent_of(list(base.values()))["spec"]["template"]["spec"]


def test_agent_service_is_headless_and_selects_the_agent_pods(tmp_path: Path) -> None:
    objects = built("base", tmp_path)
    service = by_kind(objects, "Service")["kubejoule-agent"]
    pod_labels = agent_of(objects)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    (container,) = containers(agent_of(objects))
    assert port["targetPort"] in {p["name"] for p in container["ports"]}


def test_no_component_brings_capabilities_back() -> None:
    assert "pod-network" not in COMPONENTS
    assert not (ROOT / "daemonset" / "components" / "pod-network").exists()
    for path in (ROOT / "daemonset").rglob("*.yaml"):
        text = path.read_text()
        for forbidden in ("SYS_ADMIN", "SYS_PTRACE", "hostNetwork: true", "privileged: true"):
            assert forbidden not in text, f"{path}: {forbidden}"


def test_calibration_component_reads_this_nodes_profile(tmp_path: Path) -> None:
    objects = build(user_kustomization(tmp_path, "overlays/intel", ("calibration",)))
    (container,) = containers(agent_of(objects))
    args = container["args"]
    path = args[args.index("--power-profile") + 1]
    assert path == "/etc/kubejoule/calibration/$(NODE_NAME).yaml"
    # $(VAR) in args expands only for variables the container defines.
    assert "NODE_NAME" in {e["name"] for e in container["env"]}
    volumes = {v["name"]: v for v in agent_of(objects)["spec"]["template"]["spec"]["volumes"]}
    assert volumes["calibration"]["configMap"] == {
        "name": "kubejoule-calibration",
        "optional": True,
    }
    mount = next(m for m in container["volumeMounts"] if m["name"] == "calibration")
    assert path.startswith(mount["mountPath"] + "/") and mount["readOnly"] is True


def test_carbon_component_reads_the_intensity_csv_from_its_configmap(tmp_path: Path) -> None:
    objects = build(user_kustomization(tmp_path, "overlays/intel", ("carbon",)))
    (container,) = containers(agent_of(objects))
    args = container["args"]
    path = args[args.index("--carbon-intensity-csv") + 1]
    assert path == "/etc/kubejoule/carbon/intensity.csv"
    volumes = {v["name"]: v for v in agent_of(objects)["spec"]["template"]["spec"]["volumes"]}
    # not optional: without the file the agent would refuse to start (a usage error), so the pods
    # wait for the ConfigMap instead, with an event that names it
    assert volumes["carbon"]["configMap"] == {"name": "kubejoule-carbon"}
    mount = next(m for m in container["volumeMounts"] if m["name"] == "carbon")
    assert path.startswith(mount["mountPath"] + "/") and mount["readOnly"] is True
    parsed = build_parser().parse_args(args)  # the flag is the agent's own
    assert str(parsed.carbon_intensity_csv) == path


def test_gpu_component_mounts_the_pod_resources_socket_read_only_and_asks_for_nvml_only(tmp_path: Path) -> None:
    objects = build(user_kustomization(tmp_path, "overlays/intel", ("gpu",)))
    pod = agent_of(objects)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    # NVIDIA's runtime mounts libnvidia-ml.so.1 and the device files: monitoring only, no CUDA
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["pod-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "pod-resources")
    assert mount["readOnly"] is True
    # the agent's default socket is in it; no capability and no privilege is added for it
    from agent.device.podresources import DEFAULT_SOCKET

    assert DEFAULT_SOCKET.parent == Path(mount["mountPath"])
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_bmc_component_reads_credentials_from_an_optional_secret_never_from_env(tmp_path: Path) -> None:
    from agent.cmd import cli
    objects = build(user_kustomization(tmp_path, "overlays/intel", ("bmc",)))
    pod = agent_of(objects)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert volumes["bmc-credentials"]["secret"] == {"secretName": "kubejoule-bmc", "optional": True,
                                                    "defaultMode": 0o400}
    assert args[args.index("--bmc-credentials") + 1] == mounts["bmc-credentials"]["mountPath"]
    assert volumes["bmc-urls"]["configMap"] == {"name": "kubejoule-bmc-urls", "optional": True}
    assert args[args.index("--bmc-url-file") + 1] == mounts["bmc-urls"]["mountPath"] + "/$(NODE_NAME)"
    assert all(m["readOnly"] is True for name, m in mounts.items() if name.startswith("bmc"))
    # no secret in the environment, no credential on the command line
    assert not any("secretKeyRef" in str(e) or "secretRef" in str(e) for e in container.get("env", []))
    assert not any("password" in a.lower() for a in args) and "envFrom" not in container
    parsed = cli.build_parser().parse_args([a.replace("$(NODE_NAME)", "node-a") for a in args])
    assert parsed.bmc_url_file == Path("/etc/kubejoule/bmc-urls/node-a")
    # https only, verified against the BMCs' own CA: never the lab flag
    assert parsed.bmc_insecure_http is False
    assert parsed.bmc_ca_bundle == Path(mounts["bmc-ca"]["mountPath"]) / "ca.crt"


def test_host_energy_component_mounts_the_guests_share_read_only_where_the_agent_looks(tmp_path: Path) -> None:
    from agent.device.host_energy import mount_point

    pod = agent_of(build(user_kustomization(tmp_path, "overlays/intel", ("host-energy",))))["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volume = next(v for v in pod["volumes"] if v["name"] == "host-energy")
    assert volume["hostPath"] == {"path": "/run/kubejoule/host-energy", "type": "DirectoryOrCreate"}
    mount = next(m for m in container["volumeMounts"] if m["name"] == "host-energy")
    args = container["args"]
    # the agent finds it beside its --sysfs, with no flag: nodes without the share read RAPL as before
    assert Path(mount["mountPath"]) == mount_point(Path(args[args.index("--sysfs") + 1]))
    assert "--host-energy" not in args
    assert mount["readOnly"] is True and mount["mountPropagation"] == "HostToContainer"
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
