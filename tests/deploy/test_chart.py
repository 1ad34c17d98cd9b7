"""The Helm chart daemonset/chart/kubejoule: `helm lint --strict`; `helm template` with the default
values and with each values file of its ci/ folder (one per switch), every object strictly valid
for Kubernetes 1.33-1.36 and each switch doing what it says; bad values refused by
values.schema.json with the key named; no secret among the values or the objects; the packaged
chart's version is the project's. The chart against the kustomize tree:
test_chart_kustomize.py; installed on a real control plane: tests/e2e/test_e2e_helm.py."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from scheduler.config.parse import config_from_dict
from tests.helpers.deploy_chart import (
    CHART,
    CHECKSUM_ANNOTATION,
    CI_VALUES,
    ROOT,
    documented,
    documented_helm_commands,
    helm,
    template,
)
from tests.helpers.deploy_kustomize import Obj, object_key
from tests.helpers.deploy_manifests import CRD_KINDS, by_kind, containers

KUBERNETES_VERSIONS = ("1.33", "1.34", "1.35", "1.36")
CI_FILES = sorted(CI_VALUES.glob("*-values.yaml"))
VALUES_CASES = [None, *CI_FILES]


def _id(case: Path | None) -> str:
    return "default" if case is None else case.name.removesuffix("-values.yaml")


@functools.cache
def _rendered(case: Path | None, release: str, namespace: str) -> str:
    return json.dumps(template(values_files=[] if case is None else [case], release=release, namespace=namespace))


def _render(case: Path | None, release: str = "kubejoule", namespace: str = "kubejoule-system") -> list[Obj]:
    """`helm template` with one values file (None: the defaults), rendered once per module run."""
    objects: list[Obj] = json.loads(_rendered(case, release, namespace))
    return objects


def _scheduler_yaml(objects: list[Obj], name: str = "kubejoule-scheduler") -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(by_kind(objects, "ConfigMap")[name]["data"]["scheduler.yaml"])
    return data


def _args(objects: list[Obj], kind: str, name: str) -> list[str]:
    return [a for c in containers(by_kind(objects, kind)[name]) for a in c.get("args", [])]


@pytest.fixture(scope="module")
def default() -> list[Obj]:
    return _render(None)


# -- lint and validate ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", VALUES_CASES, ids=_id)
def test_helm_lint_strict_is_clean(case: Path | None) -> None:
    result = helm(["lint", "--strict", str(CHART), *([] if case is None else ["--values", str(case)])])
    assert "0 chart(s) failed" in result.stdout, result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


@pytest.mark.parametrize("case", VALUES_CASES, ids=_id)
def test_every_rendered_object_is_strictly_valid_for_kubernetes_1_33_to_1_36(case: Path | None) -> None:
    objects = _render(case)
    assert objects
    keys = [object_key(o) for o in objects]
    assert len(keys) == len(set(keys)), "an object rendered twice"
    for obj in objects:
        if (obj["apiVersion"], obj["kind"]) in CRD_KINDS:
            continue
        for version in KUBERNETES_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{_id(case)}: {object_key(obj)} on {version}: {exc.message} at {list(exc.path)}")


def test_kubernetes_validate_cli_passes_on_everything_the_chart_can_render(tmp_path: Path) -> None:
    """The command line itself, on one render with every part switched on."""
    executable = Path(sys.executable).parent / "kubernetes-validate"
    assert executable.exists(), "the dev extra installs kubernetes-validate and its CLI"
    everything = [CI_VALUES / f"{name}-values.yaml" for name in (
        "namespace", "vendor-intel", "placement", "calibration", "calibration-job", "gpu", "bmc", "host-energy", "extender",
        "autoscaler-expander", "rebalancer", "cloud-provider", "active", "grafana-dashboards", "carbon")]
    objects = [o for o in template(values_files=everything) if (o["apiVersion"], o["kind"]) not in CRD_KINDS]
    assert {"DaemonSet", "Deployment", "Job", "ValidatingAdmissionPolicy", "Namespace"} <= {o["kind"] for o in objects}
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump_all(objects))
    for version in (KUBERNETES_VERSIONS[0], KUBERNETES_VERSIONS[-1]):
        result = subprocess.run([str(executable), "--strict", "-k", version, "--quiet", str(rendered)],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"{version}: {result.stdout}{result.stderr}"


def test_every_ci_values_file_changes_what_is_rendered(default: list[Obj]) -> None:
    """A switch that renders the same objects as the defaults tests nothing."""
    assert len(CI_FILES) >= 15
    for case in CI_FILES:
        assert _render(case) != default, case.name


# -- what each switch does -------------------------------------------------------------------------


def test_the_defaults_are_the_agent_and_the_standalone_scheduler_in_shadow_mode(default: list[Obj]) -> None:
    workloads = {(o["kind"], o["metadata"]["name"]) for o in default if o["kind"] in ("DaemonSet", "Deployment", "Job")}
    assert workloads == {("DaemonSet", "kubejoule-agent"), ("Deployment", "kubejoule-scheduler")}
    assert _scheduler_yaml(default)["mode"] == "shadow"
    namespaces = by_kind(default, "Namespace")
    assert "kubejoule-system" not in namespaces, "with --create-namespace a Namespace object would clash"
    assert namespaces["kubejoule-node"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged", \
        "the agent's namespace, which --create-namespace cannot label, is the chart's"
    assert by_kind(default, "DaemonSet")["kubejoule-agent"]["metadata"]["namespace"] == "kubejoule-node"
    agent = by_kind(default, "DaemonSet")["kubejoule-agent"]["spec"]["template"]["spec"]
    assert "affinity" not in agent and "nodeSelector" not in agent
    images = {c["image"] for kind in ("DaemonSet", "Deployment") for w in by_kind(default, kind).values() for c in containers(w)}
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert images == {f"ghcr.io/kubejoule/kubejoule-agent:{version}", f"ghcr.io/kubejoule/kubejoule-scheduler:{version}"}


def test_the_scheduler_yaml_the_chart_renders_is_read_by_the_scheduler(default: list[Obj]) -> None:
    config = config_from_dict(_scheduler_yaml(default))
    assert config.mode == "shadow"
    assert config.telemetry.agents.endpoint_slices is not None
    active = config_from_dict(_scheduler_yaml(_render(CI_VALUES / "active-values.yaml")))
    assert active.mode == "active"
    rebalancing = _render(CI_VALUES / "rebalancer-values.yaml")
    assert config_from_dict(_scheduler_yaml(rebalancing)).rebalancer.mode == "shadow"


def test_mode_active_reaches_the_config_the_extender_and_the_checksum(default: list[Obj], tmp_path: Path) -> None:
    active = template({"scheduler": {"mode": "active", "extender": {"enabled": True}}}, tmp=tmp_path)
    assert _scheduler_yaml(active)["mode"] == "active"
    args = _args(active, "Deployment", "kubejoule-extender")
    assert args[args.index("--mode") + 1] == "active"

    def checksum(objects: list[Obj]) -> str:
        value: str = by_kind(objects, "Deployment")["kubejoule-scheduler"]["spec"]["template"]["metadata"]["annotations"][CHECKSUM_ANNOTATION]
        return value

    assert checksum(active) != checksum(default), "the scheduler's pods must roll when scheduler.yaml changes"
    assert checksum(template(tmp=tmp_path)) == checksum(default), "the same values must not roll them"


def test_vendor_selects_nodes_by_cpu_vendor() -> None:
    for vendor, accepted in (("intel", ["Intel", "GenuineIntel"]), ("amd", ["AMD", "AuthenticAMD"])):
        objects = _render(CI_VALUES / f"vendor-{vendor}-values.yaml")
        terms = by_kind(objects, "DaemonSet")["kubejoule-agent"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchExpressions": [
            {"key": "feature.node.kubernetes.io/cpu-model.vendor_id", "operator": "In", "values": accepted}]}]


def test_resources_and_node_selectors_come_from_values() -> None:
    objects = _render(CI_VALUES / "placement-values.yaml")
    agent = by_kind(objects, "DaemonSet")["kubejoule-agent"]["spec"]["template"]["spec"]
    assert agent["nodeSelector"] == {"kubejoule.io/agent": "true"}
    assert agent["containers"][0]["resources"] == {"requests": {"cpu": "50m", "memory": "100Mi"},
                                                   "limits": {"cpu": "500m", "memory": "256Mi"}}
    scheduler = by_kind(objects, "Deployment")["kubejoule-scheduler"]["spec"]
    assert scheduler["replicas"] == 3
    assert scheduler["template"]["spec"]["nodeSelector"] == {"node-role.kubernetes.io/infra": ""}
    # Helm merges maps: the requests given, the default memory limit kept.
    assert scheduler["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "200m", "memory": "256Mi"},
                                                                          "limits": {"memory": "512Mi"}}


def test_each_optional_part_is_off_by_default_and_on_with_its_switch(default: list[Obj]) -> None:
    def names(objects: list[Obj]) -> set[tuple[str, str]]:
        return {(o["kind"], o["metadata"]["name"]) for o in objects}

    cases = {
        "extender": {("Deployment", "kubejoule-extender"), ("Service", "kubejoule-extender"),
                     ("ClusterRole", "kubejoule-extender")},
        "autoscaler-expander": {("Deployment", "kubejoule-autoscaler-expander"), ("Service", "kubejoule-autoscaler-expander")},
        "rebalancer": {("Deployment", "kubejoule-rebalancer"), ("PodDisruptionBudget", "kubejoule-rebalancer"),
                       ("ValidatingAdmissionPolicy", "kubejoule-rebalancer-node-patch")},
        "servicemonitor": {("ServiceMonitor", "kubejoule-agent"), ("ServiceMonitor", "kubejoule-scheduler"),
                           ("ServiceMonitor", "kubejoule-extender")},
        "cloud-provider": {("Deployment", "kubejoule-cloud-provider"), ("Service", "kubejoule-cloud-provider"),
                           ("ClusterRole", "kubejoule-cloud-provider"),
                           ("ValidatingAdmissionPolicy", "kubejoule-cloud-provider-node-patch"),
                           ("ValidatingAdmissionPolicy", "kubejoule-cloud-provider-node-delete")},
        "calibration-job": {("Job", "kubejoule-calibration")},
        "namespace": {("Namespace", "kubejoule-system")},
    }
    for case, expected in cases.items():
        added = names(_render(CI_VALUES / f"{case}-values.yaml")) - names(default)
        assert expected <= added, case
        assert not expected & names(default), case
    expander = by_kind(_render(CI_VALUES / "autoscaler-expander-values.yaml"), "Deployment")["kubejoule-autoscaler-expander"]
    tls = [v for v in expander["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls"]
    assert tls[0]["secret"]["secretName"] == "kubejoule-autoscaler-expander-tls"
    provider = by_kind(_render(CI_VALUES / "cloud-provider-values.yaml"), "Deployment")["kubejoule-cloud-provider"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in provider["spec"]["template"]["spec"]["volumes"] if "secret" in v}
    assert secrets == {"bmc": "kubejoule-bmc-credentials", "tls": "kubejoule-cloud-provider-tls"}
    extender = by_kind(_render(CI_VALUES / "extender-values.yaml"), "Deployment")["kubejoule-extender"]
    assert "--tls-cert" in extender["spec"]["template"]["spec"]["containers"][0]["args"]
    tls = [v for v in extender["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls"]
    assert tls[0]["secret"]["secretName"] == "kubejoule-extender-tls"


def test_standalone_off_keeps_the_config_for_the_extender() -> None:
    objects = _render(CI_VALUES / "standalone-off-values.yaml")
    assert "kubejoule-scheduler" not in by_kind(objects, "Deployment")
    assert "kubejoule-scheduler" not in by_kind(objects, "ClusterRole")
    assert "kubejoule-extender" in by_kind(objects, "Deployment")
    assert _scheduler_yaml(objects)["mode"] == "shadow"
    assert not by_kind(_render(CI_VALUES / "agent-off-values.yaml"), "DaemonSet")


def test_agent_switches_add_their_arguments_mounts_and_volumes() -> None:
    def agent(case: str) -> dict[str, Any]:
        spec: dict[str, Any] = by_kind(_render(CI_VALUES / f"{case}-values.yaml"), "DaemonSet")["kubejoule-agent"]["spec"]["template"]["spec"]
        return spec

    calibration = agent("calibration")
    assert "--power-profile" in calibration["containers"][0]["args"]
    assert {"name": "calibration", "configMap": {"name": "kubejoule-calibration", "optional": True}} in calibration["volumes"]
    gpu = agent("gpu")
    assert {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"} in gpu["containers"][0]["env"]
    assert any(v.get("hostPath", {}).get("path") == "/var/lib/kubelet/pod-resources" for v in gpu["volumes"])
    bmc = agent("bmc")
    args = bmc["containers"][0]["args"]
    assert args[args.index("--bmc-credentials") + 1] == "/etc/kubejoule/bmc"
    secret = next(v["secret"] for v in bmc["volumes"] if v["name"] == "bmc-credentials")
    assert secret["secretName"] == "kubejoule-bmc"
    carbon = agent("carbon")
    args = carbon["containers"][0]["args"]
    assert args[args.index("--carbon-intensity-csv") + 1] == "/etc/kubejoule/carbon/intensity.csv"
    assert {"name": "carbon", "configMap": {"name": "kubejoule-carbon"}} in carbon["volumes"]
    args = agent("carbon-constant")["containers"][0]["args"]
    assert args[args.index("--carbon-intensity") + 1] == "380" and "--carbon-intensity-csv" not in args
    host_energy = agent("host-energy")
    assert {"name": "host-energy", "hostPath": {"path": "/run/kubejoule/host-energy", "type": "DirectoryOrCreate"}} \
        in host_energy["volumes"]


def test_bmc_urls_become_the_urls_configmap_and_credentials_stay_in_the_users_secret() -> None:
    objects = _render(CI_VALUES / "bmc-values.yaml")
    urls = by_kind(objects, "ConfigMap")["kubejoule-bmc-urls"]["data"]
    assert urls == {"node-a": "https://10.0.40.11", "node-b": "https://bmc-b.example.net/redfish"}
    assert not by_kind(objects, "Secret")


def test_the_calibration_job_runs_on_the_named_node_and_prints_the_profile() -> None:
    objects = _render(CI_VALUES / "calibration-job-values.yaml")
    job = by_kind(objects, "Job")["kubejoule-calibration"]["spec"]
    pod = job["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "node-a"}
    assert pod["restartPolicy"] == "Never" and job["backoffLimit"] == 0
    container = pod["containers"][0]
    assert container["command"] == ["sh", "-c"]
    script, argv0, *extra = container["args"]
    assert "kubejoule-calibrate run --out /work/profile.yaml" in script and '"$@"' in script
    assert "# kubejoule-calibrate profile" in script
    assert (argv0, extra) == ("kubejoule-calibrate", ["--idle-seconds", "120"])
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "limits" not in container["resources"] or "cpu" not in container["resources"]["limits"], \
        "a CPU limit would keep the sweep from reaching 100 %"


def test_the_calibration_jobs_script_passes_its_arguments_and_prints_a_profile_the_docs_extract(tmp_path: Path) -> None:
    """The Job's shell line run with sh, a stand-in kubejoule-calibrate on PATH (the real one
    needs RAPL and minutes), and the documented `sed` that cuts the profile out of the log."""
    container = by_kind(_render(CI_VALUES / "calibration-job-values.yaml"), "Job")["kubejoule-calibration"][
        "spec"]["template"]["spec"]["containers"][0]
    script, argv0, *extra = container["args"]
    script = script.replace("/work/", f"{tmp_path}/")
    fake = tmp_path / "bin" / "kubejoule-calibrate"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\necho "calibrating" >&2\n'
                    'while [ "$1" != --out ]; do shift; done\nprintf "idle_watts: 41.5\\nmax_watts: 180\\n" > "$2"\n')
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "NODE_NAME": "node-a"}
    # kubectl logs gives stdout and stderr together: so does this.
    log = subprocess.run([*container["command"], script, argv0, *extra], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=30)
    assert log.returncode == 0, log.stdout
    assert "calibrating" in log.stdout
    args = (fake.parent / "args").read_text().split()
    assert args[:1] == ["run"] and args[-2:] == ["--idle-seconds", "120"]
    assert args[args.index("--node") + 1] == "node-a" and args[args.index("--sysfs") + 1] == "/host/sys"
    documented_sed = ["sed", "-n", "/^# kubejoule-calibrate profile/,$p"]
    profile = subprocess.run(documented_sed, input=log.stdout, capture_output=True, text=True, timeout=10, check=True).stdout
    assert yaml.safe_load(profile) == {"idle_watts": 41.5, "max_watts": 180}
    assert "sed -n '/^# kubejoule-calibrate profile/,$p'" in (ROOT / "docs/deploy.md").read_text()


def test_grafana_dashboards_are_configmaps_for_the_sidecar() -> None:
    objects = _render(CI_VALUES / "grafana-dashboards-values.yaml")
    maps = {n: o for n, o in by_kind(objects, "ConfigMap").items() if n.startswith("kubejoule-dashboard-")}
    shipped = sorted((ROOT / "grafana/dashboards").glob("*.json"))
    assert len(maps) == len(shipped) == 4
    for path in shipped:
        cm = maps[f"kubejoule-dashboard-{path.stem.removeprefix('kubejoule-')}"]
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(cm["data"][path.name]) == json.loads(path.read_text())


def test_the_charts_dashboards_are_grafanas() -> None:
    """Helm reads files inside the chart only: the chart keeps a copy of grafana/dashboards."""
    ours = {p.name: p.read_bytes() for p in (CHART / "dashboards").glob("*.json")}
    theirs = {p.name: p.read_bytes() for p in (ROOT / "grafana/dashboards").glob("*.json")}
    assert ours == theirs, "stale: run `python -m grafana.builder` (it writes both)"


def test_other_release_names_prefix_every_object(tmp_path: Path) -> None:
    """Two releases (or a release beside the kustomize install) never share a cluster-scoped name.
    The agent's objects are in the agent's namespace (agent.namespace: a second release names its
    own, the chart creating it), the others in the release namespace."""
    ours = _render(CI_VALUES / "rebalancer-values.yaml")
    other = tmp_path / "other-values.yaml"
    other.write_text(yaml.safe_dump({"agent": {"namespace": "other-node"}}))
    theirs = template(values_files=[CI_VALUES / "rebalancer-values.yaml", other], release="energy", namespace="other")
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                      "Namespace"}
    assert by_kind(theirs, "Namespace")["other-node"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    for obj in theirs:
        if obj["kind"] == "Namespace":
            continue
        name = obj["metadata"]["name"]
        assert name.startswith("energy-kubejoule-"), object_key(obj)
        expected = "other-node" if name.startswith("energy-kubejoule-agent") or name.endswith("-agents") else "other"
        assert obj["metadata"].get("namespace", expected) == expected, object_key(obj)
    assert not {object_key(o) for o in ours if o["kind"] in cluster_scoped} & {object_key(o) for o in theirs}
    vap = by_kind(theirs, "ValidatingAdmissionPolicy")["energy-kubejoule-rebalancer-node-patch"]
    assert "system:serviceaccount:other:energy-kubejoule-rebalancer" in vap["spec"]["matchConditions"][0]["expression"]
    assert _scheduler_yaml(theirs, "energy-kubejoule-scheduler")["telemetry"]["agents"]["endpoint_slices"] == {
        "namespace": "other-node", "service": "energy-kubejoule-agent", "port": "metrics"}
    binding = by_kind(theirs, "RoleBinding")["energy-kubejoule-scheduler-agents"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "energy-kubejoule-scheduler", "namespace": "other"}]


# -- bad values ------------------------------------------------------------------------------------

BAD_VALUES = [
    ({"scheduler": {"mode": "aggressive"}}, "/scheduler/mode", "must be one of 'shadow', 'active'"),
    ({"agent": {"interval": -5}}, "/agent/interval", "exclusiveMinimum"),
    ({"scheduler": {"config": {"refresh_seconds": 0}}}, "/scheduler/config/refresh_seconds", "exclusiveMinimum"),
    ({"scheduler": {"autoscalerExpander": {"enabled": True}}}, "/scheduler/autoscalerExpander/tls/secretName", "minLength"),
    ({"agent": {"bmc": {"urls": {"node-a": "https://10.0.40.11"}}}}, "/agent/bmc/credentialsSecret", "minLength"),
    ({"agent": {"bmc": {"enabled": True}}}, "/agent/bmc/credentialsSecret", "minLength"),
    ({"agent": {"bmc": {"enabled": True, "credentialsSecret": "s", "urls": {"a": "http://10.0.40.11"}}}},
     "/agent/bmc/urls/a", "does not match pattern"),
    ({"agent": {"bmc": {"enabled": True, "credentialsSecret": "s", "password": "hunter2"}}},
     "/agent/bmc", "additional properties 'password' not allowed"),
    ({"agent": {"vendor": "arm"}}, "/agent/vendor", "must be one of"),
    ({"calibrationJob": {"enabled": True}}, "/calibrationJob/node", "minLength"),
    ({"agent": {"carbon": {"intensity": -3}}}, "/agent/carbon/intensity", "minimum"),
    ({"agent": {"carbon": {"enabled": True, "intensity": 380}}}, "/agent/carbon/intensity", ""),
    ({"scheduler": {"config": {"rebalancer": {"mode": "on"}}}}, "/scheduler/config/rebalancer/mode", "must be one of"),
    ({"scheduler": {"config": {"mode": "active"}}}, "/scheduler/config/mode", ""),
    ({"scheduler": {"standalone": {"replicas": 0}}}, "/scheduler/standalone/replicas", "minimum"),
    ({"schedulr": {"mode": "active"}}, "additional properties 'schedulr' not allowed", ""),
    ({"scheduler": {"extender": {"enabled": True, "tls": {"secretName": ""}}}}, "/scheduler/extender/tls/secretName", "minLength"),
    ({"scheduler": {"cloudProvider": {"enabled": True, "bmcCredentialsSecret": ""}}},
     "/scheduler/cloudProvider/bmcCredentialsSecret", "minLength"),
    ({"scheduler": {"cloudProvider": {"enabled": True, "password": "hunter2"}}},
     "/scheduler/cloudProvider", "additional properties 'password' not allowed"),
]


@pytest.mark.parametrize(("values", "key", "message"), BAD_VALUES, ids=[b[1] for b in BAD_VALUES])
def test_bad_values_are_refused_naming_the_key(values: dict[str, Any], key: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "bad-values.yaml"
    path.write_text(yaml.safe_dump(values))
    result = helm(["template", "kubejoule", str(CHART), "--values", str(path)], check=False)
    assert result.returncode != 0, f"accepted: {values}"
    assert "values don't meet the specifications of the schema" in result.stderr, result.stderr
    assert key in result.stderr and message in result.stderr, result.stderr
    assert "apiVersion" not in result.stdout, "nothing may be rendered"


def test_no_secret_in_values_or_templates() -> None:
    values = (CHART / "values.yaml").read_text().lower()
    for word in ("password:", "token:", "tls.key:", "privatekey"):
        assert word not in values, word
    for case in VALUES_CASES:
        assert not by_kind(_render(case), "Secret"), _id(case)


# -- package and version ---------------------------------------------------------------------------


def test_chart_version_is_the_projects_and_the_package_ships_without_ci_values(tmp_path: Path) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (version, version), "Chart.yaml must follow pyproject's version"
    helm(["package", str(CHART), "--destination", str(tmp_path)])
    package = tmp_path / f"kubejoule-{version}.tgz"
    assert package.is_file(), list(tmp_path.iterdir())
    with tarfile.open(package) as tar:
        names = set(tar.getnames())
    assert "kubejoule/values.schema.json" in names
    assert {f"kubejoule/dashboards/{p.name}" for p in (ROOT / "grafana/dashboards").glob("*.json")} <= names
    assert not any(n.startswith("kubejoule/ci/") for n in names)
    from_package = [doc for doc in yaml.safe_load_all(helm(["template", "kubejoule", str(package), "--namespace", "kubejoule-system"]).stdout) if doc]
    assert from_package == _render(None)


# -- the documented commands -----------------------------------------------------------------------

# Run here as written (install as a client-side dry run); upgrade and uninstall need a release:
# tests/e2e/test_e2e_helm.py runs them on the real control plane. Every other one must parse.
RUN_HERE = {"install", "template", "lint", "package"}


DOCUMENTED = documented_helm_commands()


@pytest.mark.parametrize(("where", "args", "shown"), DOCUMENTED, ids=[f"{w} {' '.join(a[:2])}" for w, a, _ in DOCUMENTED])
def test_documented_helm_commands_work(where: str, args: list[str], shown: list[str], tmp_path: Path) -> None:
    """Each documented helm command runs; one the docs show refused is refused with their words."""
    if args[0] == "install":
        result = helm([*args, "--dry-run=client"], check=False)
    elif args[0] == "package":
        result = helm([*args, "--destination", str(tmp_path)], check=False)
    elif args[0] in RUN_HERE:
        result = helm(args, check=False)
    else:
        result = helm([*args, "--help"], check=False)  # cobra refuses unknown flags even with --help
    if shown:
        assert result.returncode != 0, f"{where}: the docs show `helm {' '.join(args)}` refused"
        for line in shown:
            assert line in result.stderr, f"{where}: the docs show {line!r}; helm says:\n{result.stderr}"
        return
    assert result.returncode == 0, f"{where}: helm {' '.join(args)}\n{result.stdout[-2000:]}\n{result.stderr}"


def test_the_docs_install_upgrade_and_package_as_the_issue_says() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    install = documented("install", "daemonset/chart/kubejoule", "--create-namespace")
    assert install[:2] == ["install", "kubejoule"] and "kubejoule-system" in install
    documented("upgrade", "scheduler.mode=active", "--reuse-values")
    documented("package", "daemonset/chart/kubejoule")
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    assert deploy.index("helm install") < deploy.index("scheduler.mode=active") < deploy.index("kubectl apply -k")
    assert f"kubejoule-{version}.tgz" in deploy
    started = (ROOT / "docs" / "getting-started.md").read_text()  # shadow first, then active
    assert started.index("helm install") < started.index("EnergyRecommendation") < started.index("scheduler.mode=active")
