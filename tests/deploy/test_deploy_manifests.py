"""daemonset/: the kustomizations build, every object validates against Kubernetes 1.33
(`kubernetes-validate --strict`), services select their pods, images carry the version.

The rest of daemonset/ is checked by its subject: test_deploy_agent_manifests.py (the agent and
its components), test_deploy_rbac_workloads.py (RBAC, scheduler, rebalancer),
test_deploy_monitors_jobs.py (ServiceMonitor, a CRD, and the benchmark's Indexed Job) and
test_deploy_scheduler_config.py (KubeSchedulerConfiguration, a kube-scheduler file).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from benchmarks.harness.components import require_binary
from tests.helpers.deploy_kustomize import (
    DAEMONSET,
    KustomizeError,
    apply_json6902,
    build,
    object_key,
    user_kustomization,
)
from tests.helpers.deploy_manifests import (
    AGENT_NAMESPACE,
    COMPONENTS,
    CRD_KINDS,
    KUBERNETES_VERSION,
    NAMESPACE,
    ROOT,
    by_kind,
    containers,
)

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


def _agents_side(obj: dict[str, Any]) -> bool:
    """The agent's objects, and the Roles that let kubejoule read the agents' EndpointSlices."""
    labels = obj["metadata"].get("labels") or {}
    if labels.get("app.kubernetes.io/name") == "kubejoule-agent":
        return True
    rules = obj.get("rules") or []
    return obj["kind"] == "Role" and all(r["resources"] == ["endpointslices"] for r in rules) or (
        obj["kind"] == "RoleBinding" and obj["roleRef"]["name"].endswith(("-agents", "kubejoule-extender"))
        and obj["metadata"]["namespace"] == AGENT_NAMESPACE
    )


def test_every_namespaced_object_lands_in_its_namespace(target: Path) -> None:
    for obj in build(target):
        if obj["kind"] in ("Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                           "ValidatingAdmissionPolicyBinding"):
            assert "namespace" not in obj["metadata"], object_key(obj)
        else:
            expected = AGENT_NAMESPACE if _agents_side(obj) else NAMESPACE
            assert obj["metadata"]["namespace"] == expected, object_key(obj)


def test_only_the_agent_runs_at_the_privileged_pod_security_level(target: Path) -> None:
    objects = build(target)
    levels = {o["metadata"]["name"]: o["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
              for o in objects if o["kind"] == "Namespace"}
    assert levels == {AGENT_NAMESPACE: "privileged", NAMESPACE: "restricted"}
    privileged = {o["metadata"]["name"] for o in objects if o["kind"] in ("DaemonSet", "Deployment", "Job")
                  and o["metadata"]["namespace"] == AGENT_NAMESPACE}
    assert privileged == {"kubejoule-agent"}


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
