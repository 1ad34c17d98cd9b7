"""The Helm chart (daemonset/chart/kubejoule) under test: the helm binary, `helm template` as
objects, and the comparison with the kustomize tree (tests/deploy/test_chart_kustomize.py).

helm is built with the real Kubernetes components (tools/k8s/build.sh, `make k8s-tools`): it is
found in $KUBEJOULE_K8S_BIN, then on PATH, then in the directory `tools/k8s/build.sh --bin-dir`
names. Missing, it skips the calling test on a developer's machine and fails it in CI.
"""

from __future__ import annotations

import copy
import difflib
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from benchmarks.harness.components import component_missing
from tests.helpers.deploy_kustomize import Obj, object_key

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "daemonset" / "chart" / "kubejoule"
CI_VALUES = CHART / "ci"

# Labels Helm's objects carry and the kustomize tree's do not (metadata.labels only: pod templates
# and selectors are the same in both).
HELM_ONLY_LABELS = (
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
    "helm.sh/chart",
)
# The pod-template annotation that rolls the scheduler's pods when scheduler.yaml changes.
CHECKSUM_ANNOTATION = "checksum/config"
# ConfigMap keys holding YAML: compared parsed (the kustomize file's comments are not objects).
YAML_DATA_KEYS = {"scheduler.yaml"}


def helm_binary() -> str:
    candidates: list[Path] = []
    if os.environ.get("KUBEJOULE_K8S_BIN"):
        candidates.append(Path(os.environ["KUBEJOULE_K8S_BIN"]) / "helm")
    on_path = shutil.which("helm")
    if on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    try:
        out = subprocess.run(
            [str(ROOT / "tools/k8s/build.sh"), "--bin-dir"], capture_output=True, text=True, timeout=30, check=True
        )
        built = Path(out.stdout.strip()) / "helm"
        if built.is_file():
            return str(built)
    except (OSError, subprocess.SubprocessError):
        pass
    component_missing("helm is not built: run `make k8s-tools` (tools/k8s/build.sh builds helm 4.3.2)")


def helm(args: Sequence[str], *, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HELM_CACHE_HOME="/tmp/kubejoule-helm/cache", HELM_CONFIG_HOME="/tmp/kubejoule-helm/config",
               HELM_DATA_HOME="/tmp/kubejoule-helm/data")
    result = subprocess.run([helm_binary(), *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def template(
    values: dict[str, Any] | None = None,
    *,
    values_files: Iterable[Path] = (),
    release: str = "kubejoule",
    namespace: str = "kubejoule-system",
    tmp: Path | None = None,
) -> list[Obj]:
    """The objects `helm template RELEASE CHART -n NAMESPACE` renders for these values."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    for path in values_files:
        args += ["--values", str(path)]
    if values:
        assert tmp is not None, "inline values need a directory to write them to"
        path = tmp / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        args += ["--values", str(path)]
    out = helm(args).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def _normalize(obj: Obj, *, chart: bool) -> Obj:
    obj = copy.deepcopy(obj)
    metadata = obj.setdefault("metadata", {})
    if chart:
        labels = metadata.get("labels") or {}
        for label in HELM_ONLY_LABELS:
            labels.pop(label, None)
        template_meta = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
        annotations = template_meta.get("annotations") or {}
        annotations.pop(CHECKSUM_ANNOTATION, None)
        if "annotations" in template_meta and not annotations:
            del template_meta["annotations"]
    if obj["kind"] == "ConfigMap":
        for key in YAML_DATA_KEYS & set(obj.get("data") or {}):
            obj["data"][key] = yaml.safe_load(obj["data"][key])
    # Cluster-scoped admission objects: kustomize 5.5 sets a namespace the API server drops.
    if obj["kind"].startswith("ValidatingAdmissionPolicy"):
        metadata.pop("namespace", None)
    return obj


def differences(chart: list[Obj], kustomize: list[Obj]) -> list[str]:
    """Every way the chart's objects differ from the kustomize tree's, as readable lines: the
    objects only one side has, and a unified diff of each object both have (normalized: Helm's
    own labels and the checksum annotation dropped, scheduler.yaml compared as YAML)."""
    ours = {object_key(n): n for n in (_normalize(o, chart=True) for o in chart)}
    theirs = {object_key(n): n for n in (_normalize(o, chart=False) for o in kustomize)}
    problems = [f"only in the chart: {key}" for key in sorted(set(ours) - set(theirs))]
    problems += [f"only in kustomize: {key}" for key in sorted(set(theirs) - set(ours))]
    for key in sorted(set(ours) & set(theirs)):
        if ours[key] != theirs[key]:
            a = yaml.safe_dump(theirs[key], sort_keys=True).splitlines()
            b = yaml.safe_dump(ours[key], sort_keys=True).splitlines()
            diff = "\n".join(difflib.unified_diff(a, b, "kustomize", "chart", lineterm="", n=2))
            problems.append(f"{key} differs:\n{diff}")
    return problems


def documented_helm_commands() -> list[tuple[str, list[str], list[str]]]:
    """(where, argv after `helm`, the error lines the docs show for it) of every helm command in
    README.md's and the docs site's shell and console blocks."""
    from tests.helpers.docs_blocks import by_lang, commands, logical_lines, program

    found = []
    for block in by_lang("sh", "console", "bash"):
        shown = [line for line in block.text.splitlines() if line and not line.startswith("$ ")] if block.lang == "console" else []
        for line in logical_lines(block):
            for argv in commands(line):
                name, args = program(argv)
                if name == "helm":
                    found.append((block.where, args, shown))
    return found


def documented(subcommand: str, *must_contain: str) -> list[str]:
    """The first documented `helm SUBCOMMAND …` holding every one of `must_contain`."""
    for _where, args, shown in documented_helm_commands():
        if shown:
            continue  # an example of a refusal
        if args[:1] == [subcommand] and all(token in args for token in must_contain):
            return args
    raise AssertionError(f"no `helm {subcommand}` with {must_contain} in README.md or docs/**/*.md")
