"""daemonset/: the kustomizations build, every object validates against Kubernetes 1.33
(`kubernetes-validate --strict`), and the objects fit together and stay least-privilege.

Objects without a schema in kubernetes-validate are checked differently:
- ServiceMonitor (Prometheus Operator CRD): its metadata against the 1.33 ObjectMeta schema
  (strict), its spec against the subset of the CRD's schema that we use (unknown fields are
  errors), and its selector/port against the Service it must find;
- KubeSchedulerConfiguration (a kube-scheduler file, not an API object): see
  test_deploy_scheduler_config.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from benchmarks.harness.components import require_binary
from tests.helpers.deploy_kustomize import (
    DAEMONSET,
    KustomizeError,
    Obj,
    apply_json6902,
    build,
    object_key,
    user_kustomization,
)

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_VERSION = "1.33"
NAMESPACE = "kubejoule-system"
COMPONENTS = (
    "servicemonitor", "extender", "pod-network", "calibration", "autoscaler-expander", "gpu", "bmc",
    "rebalancer",
)
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
# Capabilities the agent may be granted, each for a reason written in the manifests and docs.
ALLOWED_AGENT_CAPABILITIES = {"SYS_ADMIN", "SYS_PTRACE"}


TARGETS = ["base", "overlays/intel", "overlays/amd", "intel+all-components"]


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    name = request.param
    if name == "intel+all-components":
        return user_kustomization(tmp_path, "overlays/intel", COMPONENTS)
    return DAEMONSET / name


def by_kind(objects: list[Obj], kind: str) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def built(name: str, tmp_path: Path) -> list[Obj]:
    if name == "intel+all-components":
        return build(user_kustomization(tmp_path, "overlays/intel", COMPONENTS))
    return build(DAEMONSET / name)


# -- build and validate ----------------------------------------------------------------------


def test_every_kustomization_in_the_tree_builds_or_is_a_component() -> None:
    found = sorted(
        p.parent.relative_to(DAEMONSET).as_posix() for p in DAEMONSET.rglob("kustomization.yaml")
    )
    assert found == sorted(
        ["base", "overlays/intel", "overlays/amd", *(f"components/{c}" for c in COMPONENTS)]
    )
    for directory in found:
        kind = yaml.safe_load((DAEMONSET / directory / "kustomization.yaml").read_text())["kind"]
        assert kind == ("Component" if directory.startswith("components/") else "Kustomization")


def test_objects_validate_strictly_against_kubernetes_1_33(target: Path) -> None:
    objects = build(target)
    assert objects
    for obj in objects:
        if (obj["apiVersion"], obj["kind"]) in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{object_key(obj)}: {exc.message} at {list(exc.path)}")


def test_kubernetes_validate_cli_passes_on_the_built_output(tmp_path: Path) -> None:
    """The command line itself, once, on the build that holds every object we ship."""
    executable = Path(sys.executable).parent / "kubernetes-validate"
    assert executable.exists(), "the dev extra installs kubernetes-validate and its CLI"
    target = user_kustomization(tmp_path, "overlays/intel", COMPONENTS)
    objects = [o for o in build(target) if (o["apiVersion"], o["kind"]) not in CRD_KINDS]
    out = tmp_path / "built.yaml"
    out.write_text(yaml.safe_dump_all(objects))
    result = subprocess.run(
        [str(executable), "--strict", "-k", KUBERNETES_VERSION, "--quiet", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_namespaced_object_lands_in_kubejoule_system(target: Path) -> None:
    for obj in build(target):
        if obj["kind"] in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert "namespace" not in obj["metadata"]
        else:
            assert obj["metadata"]["namespace"] == NAMESPACE, object_key(obj)


def test_resolver_agrees_with_kubectl_kustomize(target: Path) -> None:
    require_binary("kubectl", "kubectl (with kustomize) not installed")
    result = subprocess.run(
        ["kubectl", "kustomize", str(target)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    theirs = {object_key(o): o for o in yaml.safe_load_all(result.stdout) if o}
    ours = {object_key(o): o for o in build(target)}
    assert set(ours) == set(theirs)
    for key, obj in ours.items():
        assert obj == theirs[key], key


def test_resolver_refuses_what_it_does_not_implement(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    with pytest.raises(KustomizeError, match="does not exist"):
        build(tmp_path)
    (tmp_path / "kustomization.yaml").write_text("images: [{name: a, newTag: b}]\n")
    with pytest.raises(KustomizeError, match="does not apply"):
        build(tmp_path)
    doc: dict[str, Any] = {"a": {"b": [1, 2]}}
    apply_json6902(doc, {"op": "add", "path": "/a/b/-", "value": 3})
    apply_json6902(doc, {"op": "add", "path": "/a/c~1d", "value": 4})
    assert doc == {"a": {"b": [1, 2, 3], "c/d": 4}}
    with pytest.raises(KustomizeError, match="test failed"):
        apply_json6902(doc, {"op": "test", "path": "/a/c~1d", "value": 5})


# -- the agent ---------------------------------------------------------------------------------


def agent_of(objects: list[Obj]) -> Obj:
    return by_kind(objects, "DaemonSet")["kubejoule-agent"]


def containers(workload: Obj) -> Iterator[Obj]:
    yield from workload["spec"]["template"]["spec"]["containers"]


def test_agent_reads_the_host_read_only_and_drops_every_capability(tmp_path: Path) -> None:
    agent = agent_of(built("overlays/intel", tmp_path))
    pod = agent["spec"]["template"]["spec"]
    assert pod["hostPID"] is True and pod["hostNetwork"] is True
    assert pod["securityContext"]["runAsUser"] == 0  # energy_uj is root-only (CVE-2020-8694)
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security.get("privileged", False) is False
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert host_paths == {"host-proc": "/proc", "host-sys": "/sys"}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert {name: mounts[name]["mountPath"] for name in host_paths} == {
        "host-proc": "/host/proc",
        "host-sys": "/host/sys",
    }
    assert all(mounts[name].get("readOnly") is True for name in host_paths)
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
    from agent import cli

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


def test_pod_network_component_adds_exactly_the_documented_capabilities(tmp_path: Path) -> None:
    objects = build(user_kustomization(tmp_path, "overlays/amd", ("pod-network",)))
    (container,) = containers(agent_of(objects))
    capabilities = container["securityContext"]["capabilities"]
    assert capabilities["drop"] == ["ALL"]
    assert set(capabilities["add"]) == ALLOWED_AGENT_CAPABILITIES


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
    from agent.podresources import DEFAULT_SOCKET

    assert DEFAULT_SOCKET.parent == Path(mount["mountPath"])
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_bmc_component_reads_credentials_from_an_optional_secret_never_from_env(tmp_path: Path) -> None:
    from agent import cli

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


# -- RBAC ------------------------------------------------------------------------------------


def rules_of(objects: list[Obj], kind: str, name: str) -> set[tuple[str, str, str, str]]:
    """(group, resource, verb, resourceName or '') for every rule of a (Cluster)Role."""
    granted = set()
    for rule in by_kind(objects, kind)[name]["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    for resource_name in rule.get("resourceNames") or [""]:
                        granted.add((group, resource, verb, resource_name))
    return granted


def test_no_role_uses_wildcards_or_reads_secrets(target: Path) -> None:
    for obj in build(target):
        if obj["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in obj["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (object_key(obj), rule)
            assert "secrets" not in rule["resources"] and "configmaps" not in rule["resources"]
            assert not {"delete", "deletecollection", "escalate", "bind", "impersonate"} & set(
                rule["verbs"]
            )


def test_agent_cluster_role_is_exactly_pods_and_metrics(tmp_path: Path) -> None:
    granted = rules_of(built("base", tmp_path), "ClusterRole", "kubejoule-agent")
    assert granted == {
        ("", "pods", "get", ""),
        ("", "pods", "list", ""),
        ("", "pods", "watch", ""),
        ("metrics.k8s.io", "nodes", "get", ""),
        ("metrics.k8s.io", "pods", "get", ""),
        ("metrics.k8s.io", "pods", "list", ""),
    }


def test_bindings_point_at_existing_roles_and_service_accounts(target: Path) -> None:
    objects = build(target)
    accounts = set(by_kind(objects, "ServiceAccount"))
    for obj in objects:
        if obj["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        role_kind = obj["roleRef"]["kind"]
        assert obj["roleRef"]["name"] in by_kind(objects, role_kind), object_key(obj)
        for subject in obj["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            assert subject["name"] in accounts and subject["namespace"] == NAMESPACE
    for workload_kind in ("DaemonSet", "Deployment"):
        for workload in by_kind(objects, workload_kind).values():
            assert workload["spec"]["template"]["spec"]["serviceAccountName"] in accounts


def test_scheduler_rbac_covers_a_secondary_scheduler(tmp_path: Path) -> None:
    objects = built("base", tmp_path)
    cluster = rules_of(objects, "ClusterRole", "kubejoule-scheduler")
    namespaced = rules_of(objects, "Role", "kubejoule-scheduler")
    needed_cluster = {
        ("", "pods", "list", ""),
        ("", "pods", "watch", ""),
        ("", "pods", "get", ""),
        ("", "pods", "patch", ""),  # shadow-mode recommendation annotations
        ("", "pods/binding", "create", ""),
        ("", "pods/status", "patch", ""),  # PodScheduled=False, Unschedulable
        ("", "nodes", "list", ""),
        ("", "nodes", "watch", ""),
        ("", "events", "create", ""),
        ("events.k8s.io", "events", "create", ""),
        ("metrics.k8s.io", "nodes", "list", ""),
    }
    assert needed_cluster <= cluster
    assert {
        ("coordination.k8s.io", "leases", "create", ""),
        ("coordination.k8s.io", "leases", "get", "kubejoule-scheduler"),
        ("coordination.k8s.io", "leases", "update", "kubejoule-scheduler"),
        ("discovery.k8s.io", "endpointslices", "list", ""),
    } <= namespaced
    # Leases and EndpointSlices only in its own namespace, never cluster-wide.
    assert not {r for r in cluster if r[0] in ("coordination.k8s.io", "discovery.k8s.io")}


# -- the scheduler ---------------------------------------------------------------------------


def test_scheduler_runs_two_replicas_spread_and_protected(tmp_path: Path) -> None:
    objects = built("base", tmp_path)
    deployment = by_kind(objects, "Deployment")["kubejoule-scheduler"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    pdb = by_kind(objects, "PodDisruptionBudget")["kubejoule-scheduler"]
    assert pdb["spec"]["minAvailable"] == 1
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (container,) = pod["containers"]
    assert container["args"][:1] == ["run"]
    env = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in container["env"]
        if "valueFrom" in e
    }
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    config_path = container["args"][container["args"].index("--config") + 1]
    mount = next(
        m for m in container["volumeMounts"] if config_path.startswith(m["mountPath"] + "/")
    )
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    configmap = by_kind(objects, "ConfigMap")[volume["configMap"]["name"]]
    assert Path(config_path).name in configmap["data"]


def test_scheduler_keeps_its_learned_lifetimes_on_a_writable_volume(tmp_path: Path) -> None:
    # energy plugin v3 prices node-time with the lifetime predictor; without --lifetime-state a
    # restarted scheduler forgets every workload's history and prices from priors again.
    from scheduler import cli

    objects = built("base", tmp_path)
    pod = by_kind(objects, "Deployment")["kubejoule-scheduler"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    parsed = cli.build_parser().parse_args(container["args"])
    assert parsed.lifetime_state
    mount = next(
        m for m in container["volumeMounts"]
        if parsed.lifetime_state.startswith(m["mountPath"] + "/")
    )
    assert not mount.get("readOnly", False)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert "emptyDir" in volume or "persistentVolumeClaim" in volume


@pytest.mark.parametrize(
    "name",
    ["kubejoule-scheduler", "kubejoule-extender", "kubejoule-autoscaler-expander",
     "kubejoule-rebalancer"],
)
def test_scheduler_pods_meet_the_restricted_pod_security_level(name: str, tmp_path: Path) -> None:
    objects = built("intel+all-components", tmp_path)
    pod = by_kind(objects, "Deployment")[name]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert not any(pod.get(k) for k in ("hostPID", "hostNetwork", "hostIPC"))
    assert not any("hostPath" in v for v in pod["volumes"])
    for container in pod["containers"]:
        security = container["securityContext"]
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["readOnlyRootFilesystem"] is True
        assert "limits" in container["resources"] and "memory" in container["resources"]["limits"]


def test_rebalancer_rbac_is_exactly_what_it_does(tmp_path: Path) -> None:
    """Evictions through the Eviction API only (no pod delete), node patches for its taint and
    annotation (no node delete: cluster-autoscaler removes empty nodes), PDBs read, events,
    its own Lease."""
    objects = build(user_kustomization(tmp_path, "overlays/intel", ("rebalancer",)))
    cluster = rules_of(objects, "ClusterRole", "kubejoule-rebalancer")
    namespaced = rules_of(objects, "Role", "kubejoule-rebalancer")
    assert {
        ("", "pods", "list", ""), ("", "pods", "watch", ""),
        ("", "pods/eviction", "create", ""),
        ("", "nodes", "list", ""), ("", "nodes", "watch", ""), ("", "nodes", "get", ""),
        ("", "nodes", "patch", ""),
        ("policy", "poddisruptionbudgets", "list", ""),
        ("", "events", "create", ""),
    } <= cluster
    assert not {r for r in cluster if r[2] == "delete"}
    assert {r[2] for r in cluster if r[1] == "pods"} == {"get", "list", "watch"}
    assert {
        ("coordination.k8s.io", "leases", "create", ""),
        ("coordination.k8s.io", "leases", "get", "kubejoule-rebalancer"),
        ("coordination.k8s.io", "leases", "update", "kubejoule-rebalancer"),
    } <= namespaced
    assert not {r for r in cluster if r[0] in ("coordination.k8s.io", "discovery.k8s.io")}


def test_rebalancer_args_are_accepted_by_its_command(tmp_path: Path) -> None:
    from scheduler.cli import build_parser

    objects = build(user_kustomization(tmp_path, "overlays/intel", ("rebalancer",)))
    deployment = by_kind(objects, "Deployment")["kubejoule-rebalancer"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = build_parser().parse_args(container["args"])
    assert args.command == "rebalancer" and args.leader_elect
    port = int(args.listen.rpartition(":")[2])
    assert {p["containerPort"] for p in container["ports"]} == {port}
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert str(Path(args.lifetime_state).parent) in mounts  # a writable place for its state
    assert str(Path(args.config).parent) in mounts
    pdb = by_kind(objects, "PodDisruptionBudget")["kubejoule-rebalancer"]
    assert pdb["spec"]["minAvailable"] == 1


def test_services_select_pods_and_name_their_ports(target: Path) -> None:
    objects = build(target)
    workloads = [*by_kind(objects, "DaemonSet").values(), *by_kind(objects, "Deployment").values()]
    for service in by_kind(objects, "Service").values():
        selector = service["spec"]["selector"]
        matching = [
            w
            for w in workloads
            if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(matching) == 1, service["metadata"]["name"]
        port_names = {p["name"] for c in containers(matching[0]) for p in c["ports"]}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in port_names


def test_images_carry_the_package_version(target: Path) -> None:
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    images = {
        c["image"]
        for kind in ("DaemonSet", "Deployment")
        for w in by_kind(build(target), kind).values()
        for c in containers(w)
    }
    assert images <= {
        f"ghcr.io/kubejoule/kubejoule-agent:{version}",
        f"ghcr.io/kubejoule/kubejoule-scheduler:{version}",
    }


# -- ServiceMonitor (a CRD: validated as the module docstring says) --------------------------

# The part of monitoring.coreos.com/v1 ServiceMonitor's schema that our objects use; any other
# field is an error here (a typo would otherwise be accepted by this test and ignored by the CRD's
# structural pruning).
SERVICE_MONITOR_SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["selector", "endpoints"],
    "properties": {
        "selector": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}
            },
        },
        "namespaceSelector": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "matchNames": {"type": "array", "items": {"type": "string"}},
                "any": {"type": "boolean"},
            },
        },
        "endpoints": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "port": {"type": "string"},
                    "path": {"type": "string"},
                    "interval": {
                        "type": "string",
                        "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
                    },
                    "scrapeTimeout": {
                        "type": "string",
                        "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
                    },
                    "honorLabels": {"type": "boolean"},
                },
            },
        },
    },
}


def _object_meta_schema() -> dict[str, Any]:
    """Kubernetes 1.33's ObjectMeta from kubernetes-validate's strict schemas."""
    import importlib.resources as resources
    import json

    base = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    directory = next(
        d
        for d in base.iterdir()
        if d.name.startswith(f"v{KUBERNETES_VERSION}.") and d.name.endswith("-local-strict")
    )
    definitions = json.loads((directory / "_definitions.json").read_text())["$defs"]
    meta = definitions["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
    assert meta["additionalProperties"] is False  # the strict flavour
    return {**meta, "$defs": definitions}


def test_service_monitors_validate_and_find_their_services(tmp_path: Path) -> None:
    objects = build(user_kustomization(tmp_path, "overlays/intel", ("servicemonitor", "extender")))
    monitors = by_kind(objects, "ServiceMonitor")
    # Every Service we ship is scraped: the Scheduler dashboard needs the extender's metrics too.
    services = by_kind(objects, "Service")
    shipped = {"kubejoule-agent", "kubejoule-scheduler", "kubejoule-extender"}
    assert set(monitors) == set(services) == shipped
    meta_schema = _object_meta_schema()
    for name, monitor in monitors.items():
        jsonschema.Draft202012Validator(meta_schema).validate(monitor["metadata"])
        jsonschema.validate(monitor["spec"], SERVICE_MONITOR_SPEC_SCHEMA)
        assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
        selector = monitor["spec"]["selector"]["matchLabels"]
        (service,) = [
            s for s in services.values() if selector.items() <= s["metadata"]["labels"].items()
        ]
        assert service["metadata"]["name"] == name
        port_names = {p["name"] for p in service["spec"]["ports"]}
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["port"] in port_names
            # The agent's pod series carry the workload's own namespace/pod labels.
            assert endpoint["honorLabels"] is True
    with pytest.raises(jsonschema.ValidationError):
        bad = {
            **monitors["kubejoule-agent"]["spec"],
            "endpoints": [{"port": "metrics", "honourLabels": True}],
        }
        jsonschema.validate(bad, SERVICE_MONITOR_SPEC_SCHEMA)


# -- the benchmark's Indexed Job (daemonset/jobs/, plain manifests: kubectl apply -f) ----------

JOBS = DAEMONSET / "jobs"


def job_manifests() -> dict[str, list[Obj]]:
    return {
        path.name: [o for o in yaml.safe_load_all(path.read_text()) if o]
        for path in sorted(JOBS.glob("*.yaml"))
    }


def test_the_benchmark_jobs_validate_strictly(tmp_path: Path) -> None:
    manifests = job_manifests()
    assert set(manifests) == {"benchmark-sweep.yaml", "benchmark-merge.yaml"}
    for name, objects in manifests.items():
        for obj in objects:
            try:
                kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{name}: {object_key(obj)}: {exc.message} at {list(exc.path)}")
            assert obj["metadata"]["namespace"] == NAMESPACE
    executable = Path(sys.executable).parent / "kubernetes-validate"
    result = subprocess.run(
        [str(executable), "--strict", "-k", KUBERNETES_VERSION, "--quiet",
         *map(str, sorted(JOBS.glob("*.yaml")))],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _container(job: Obj) -> dict[str, Any]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert "command" not in container  # the image's ENTRYPOINT, kubejoule-rl
    assert container["image"].rsplit("/", 1)[1].startswith("kubejoule-rl:")
    return container


def test_the_indexed_job_runs_every_shard_and_the_merge_joins_their_files() -> None:
    """Each completion index K gives `--shard K/N` (the Job controller puts JOB_COMPLETION_INDEX
    in every container's environment — kubernetes/kubernetes pkg/controller/job/
    indexed_job_utils.go, addCompletionIndexEnvVariable — and the kubelet expands $(VAR) in
    args), read by kubejoule-rl's own parser; the merge Job's files are the N shards' files,
    on the same volume."""
    from rl.cli import _build_parser
    from rl.evaluation.parallel import Shard

    manifests = job_manifests()
    (claim,) = [o for o in manifests["benchmark-sweep.yaml"] if o["kind"] == "PersistentVolumeClaim"]
    (sweep,) = [o for o in manifests["benchmark-sweep.yaml"] if o["kind"] == "Job"]
    (merge,) = manifests["benchmark-merge.yaml"]
    spec = sweep["spec"]
    assert spec["completionMode"] == "Indexed"
    count = spec["completions"]
    assert count > 1 and spec["parallelism"] == count
    parser = _build_parser()
    outputs = []
    for index in range(count):
        args = [a.replace("$(JOB_COMPLETION_INDEX)", str(index)) for a in _container(sweep)["args"]]
        parsed = parser.parse_args(args)
        assert parsed.command == "benchmark" and parsed.shard == Shard(index, count)
        outputs.append(parsed.out)
    assert len(set(outputs)) == count
    parsed = parser.parse_args(_container(merge)["args"])
    assert parsed.command == "merge" and sorted(parsed.shards) == sorted(outputs)
    assert parsed.out not in outputs and parsed.plot not in outputs
    for job in (sweep, merge):
        pod = job["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never" and pod["securityContext"]["runAsNonRoot"]
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
        assert claims == {claim["metadata"]["name"]}
        mounts = {m["mountPath"] for m in _container(job)["volumeMounts"]}
        assert {str(Path(p).parent) for p in [*outputs, parsed.out]} <= mounts
