"""One source of truth: the Helm chart renders exactly the kustomize tree's objects for the
matching values (docs/deploy.md, "The chart and the kustomize tree", says why this way round).

For each kustomize target (base, the intel and amd overlays, intel with every component) the
chart is rendered with the release named kubejoule in kubejoule-system and the values that
mean the same thing, and the two sets of objects are compared object by object. The only
differences allowed are Helm's own: its four metadata labels (instance, managed-by, version,
helm.sh/chart), the pod-template annotation checksum/config, and scheduler.yaml compared as YAML
(the kustomize file's comments are not part of the object).

When daemonset/ changes, this test fails with each object that differs as a unified diff
(kustomize's side first): change the chart's templates (daemonset/chart/kubejoule/templates) or
values until it passes — `pytest tests/deploy/test_chart_kustomize.py` shows what is left."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.deploy_chart import differences, template
from tests.helpers.deploy_kustomize import Obj
from tests.helpers.deploy_manifests import COMPONENTS, TARGETS, built, by_kind

EVERY_COMPONENT: dict[str, Any] = {
    "agent": {
        "vendor": "intel",
        "calibration": {"enabled": True},
        "gpu": {"enabled": True},
        "bmc": {"enabled": True, "credentialsSecret": "kubejoule-bmc"},
        "carbon": {"enabled": True},
        "hostEnergy": {"enabled": True},
    },
    "scheduler": {
        "extender": {"enabled": True},
        "autoscalerExpander": {"enabled": True, "tls": {"secretName": "kubejoule-autoscaler-expander-tls"}},
        "rebalancer": {"enabled": True},
        "cloudProvider": {"enabled": True},
    },
    "serviceMonitor": {"enabled": True},
}
# The values that mean each kustomize target (the kustomize tree makes its Namespace: so must Helm).
MATCHING_VALUES: dict[str, dict[str, Any]] = {
    "base": {"namespace": {"create": True}},
    "overlays/intel": {"namespace": {"create": True}, "agent": {"vendor": "intel"}},
    "overlays/amd": {"namespace": {"create": True}, "agent": {"vendor": "amd"}},
    "intel+all-components": {"namespace": {"create": True}, **EVERY_COMPONENT},
}


def test_every_kustomize_target_has_its_values() -> None:
    assert set(MATCHING_VALUES) == set(TARGETS)
    assert len(COMPONENTS) == 10, "a new component needs its switch in EVERY_COMPONENT and in the chart"


@pytest.mark.parametrize("target", TARGETS)
def test_the_chart_renders_exactly_the_kustomize_objects(target: str, tmp_path: Path) -> None:
    (tmp_path / "kustomize").mkdir()
    kustomize = built(target, tmp_path / "kustomize")
    chart = template(MATCHING_VALUES[target], tmp=tmp_path)
    problems = differences(chart, kustomize)
    assert not problems, (
        f"the chart and daemonset/{target} differ ({len(problems)}); resync the chart "
        "(daemonset/chart/kubejoule/templates) with the kustomize tree:\n\n" + "\n\n".join(problems)
    )


def _mutations(objects: list[Obj]) -> list[tuple[str, list[Obj]]]:
    """Small changes the kustomize tree could make, each of which the comparison must report."""
    cases = []
    changed = copy.deepcopy(objects)
    by_kind(changed, "DaemonSet")["kubejoule-agent"]["spec"]["template"]["spec"]["containers"][0]["args"].append("--x")
    cases.append(("an argument", changed))
    changed = copy.deepcopy(objects)
    by_kind(changed, "ClusterRole")["kubejoule-scheduler"]["rules"][0]["verbs"].append("delete")
    cases.append(("a verb", changed))
    changed = copy.deepcopy(objects)
    by_kind(changed, "ConfigMap")["kubejoule-scheduler"]["data"]["scheduler.yaml"] += "refresh_seconds: 7\n"
    cases.append(("a scheduler.yaml key", changed))
    changed = copy.deepcopy(objects)
    by_kind(changed, "Service")["kubejoule-agent"]["metadata"]["labels"]["extra"] = "1"
    cases.append(("a label", changed))
    changed = copy.deepcopy(objects)
    changed.append({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                    "metadata": {"name": "kubejoule-agent-metrics", "namespace": "kubejoule-system"}, "spec": {}})
    cases.append(("a new object", changed))
    changed = [o for o in copy.deepcopy(objects) if o["kind"] != "PodDisruptionBudget"]
    cases.append(("a removed object", changed))
    return cases


def test_the_comparison_reports_every_kind_of_drift(tmp_path: Path) -> None:
    """The normalization must not hide real differences: each change shows up, named."""
    (tmp_path / "kustomize").mkdir()
    kustomize = built("overlays/intel", tmp_path / "kustomize")
    chart = template(MATCHING_VALUES["overlays/intel"], tmp=tmp_path)
    assert differences(chart, kustomize) == []
    for what, changed in _mutations(kustomize):
        problems = differences(chart, changed)
        assert problems, f"{what} went unnoticed"
    argument = differences(chart, _mutations(kustomize)[0][1])
    assert "DaemonSet" in argument[0] and "kubejoule-agent" in argument[0], argument
    removed = [line for line in argument[0].splitlines() if line.startswith("-") and not line.startswith("---")]
    assert [line.split() for line in removed] == [["-", "-", "--x"]], "the diff shows the kustomize line the chart lacks"
