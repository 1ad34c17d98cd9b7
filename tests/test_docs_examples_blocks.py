"""The README's and the docs site's YAML, JSON, Python and CSV blocks parse as what they are, or
run (the rules: tests/test_docs_examples.py's docstring)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from tests.helpers.docs_blocks import (
    REPO,
    Block,
    by_lang,
    unelided,
)

# YAML blocks that are Kubernetes (or Prometheus) fragments, by their first line: parsed only.
OTHER_YAML = {
    "spec:": "a Pod spec fragment (schedulerName)",
    "rules:": "an RBAC rules fragment",
    "# my-cluster/kustomization.yaml": "a kustomization (the kustomize tests build the real ones)",
    "scrape_configs:": "a Prometheus scrape configuration",
    "resources: [<path>/daemonset/overlays/intel]": "a kustomization fragment",
    "# cluster-autoscaler's container": "cluster-autoscaler's container arguments",
    "# cluster-autoscaler's --cloud-config for externalgrpc": "cluster-autoscaler's externalgrpc cloud config",
}
# Documented paths that do not exist here, and what stands in for them in the examples.
PATH_STAND_INS = {
    "/etc/kubejoule/profiles/x5675.yaml": "agent/power_profiles/ibm-x3550-m3-xeon-x5675.yaml",
    "/etc/kubejoule/profiles/big.yaml": "agent/power_profiles/ibm-x3550-m3-xeon-x5675.yaml",
}

# -- YAML, JSON and Python blocks ----------------------------------------------------------------


def _stand_in_paths(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _stand_in_paths(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_stand_in_paths(v) for v in data]
    if isinstance(data, str) and data in PATH_STAND_INS:
        return str(REPO / PATH_STAND_INS[data])
    return data


def yaml_kind(block: Block, data: Any) -> str:
    if isinstance(data, dict) and data.get("schema") == "kubejoule.calibration/v1":
        return "power profile"
    if isinstance(data, dict) and data.get("kind") == "KubeSchedulerConfiguration":
        return "kube-scheduler"
    if isinstance(data, list) and data and all(isinstance(g, dict) and "cpu_cores" in g for g in data):
        return "node-groups"
    if isinstance(data, dict) and data.get("kind") == "Pod":
        return "pod"
    if isinstance(data, list) and data and all(isinstance(p, dict) and "workload" in p for p in data):
        return "pdbs"
    if isinstance(data, dict) and "groups" in data and "allow" in data:
        return "cloud-provider"
    if block.first in OTHER_YAML:
        return "other"
    return "scheduler-config"


YAML_BLOCKS = by_lang("yaml")
# kube-scheduler's Extender fields (k8s.io/kube-scheduler/config/v1, types.go).
EXTENDER_FIELDS = {
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
    "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable",
}


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=[b.where for b in YAML_BLOCKS])
def test_yaml_examples_parse_as_what_they_are(block: Block) -> None:
    data = yaml.safe_load(unelided(block.text))
    kind = yaml_kind(block, data)
    if kind == "power profile":
        from common.power_profile import parse_power_profile

        profile = parse_power_profile(data, block.where)
        assert profile.idle_watts is not None
    elif kind == "kube-scheduler":
        for extender in data["extenders"]:
            assert set(extender) <= EXTENDER_FIELDS, f"{block.where}: unknown fields {set(extender) - EXTENDER_FIELDS}"
            assert extender["filterVerb"] == "filter" and extender["prioritizeVerb"] == "prioritize"
            assert isinstance(extender["weight"], int) and extender["weight"] > 0
            assert isinstance(extender.get("nodeCacheCapable", False), bool)
            assert re.fullmatch(r"\d+(ms|s|m)", str(extender.get("httpTimeout", "1s")))
    elif kind == "pod":
        from scheduler.cluster.kubeobjects import pod_info_from_k8s

        pod = pod_info_from_k8s(data)  # read as the scheduler reads a pod
        assert data["spec"]["schedulerName"] == "kubejoule-scheduler" and pod.requests.cpu_millicores == 500
    elif kind == "node-groups":
        from rl.simulation.traces.scenario import parse_node_groups

        assert parse_node_groups(data)
    elif kind == "pdbs":
        from rl.simulation.traces.scenario import parse_pdbs

        assert len(parse_pdbs(block.text, block.where, [p["workload"] for p in data])) == len(data)
    elif kind == "cloud-provider":
        from scheduler.autoscaler.provider.settings import check_bmc_url, parse_settings

        # The credentials directories are the cluster's: the structure, keys and values are
        # checked as the simulated backend reads them, the BMC URLs as the Redfish one does.
        settings = parse_settings({**data, "backend": "simulated"})
        for i, group in enumerate(data["groups"]):
            for j, machine in enumerate(group["machines"]):
                check_bmc_url(machine["bmc"], machine.get("insecure_http", False), f"groups[{i}].machines[{j}].bmc")
        assert settings.machines()
    elif kind == "scheduler-config":
        from scheduler.config.parse import config_from_dict

        config_from_dict(_stand_in_paths(data))  # refuses unknown keys and bad values
    else:
        assert data is not None


def test_the_extender_serves_the_verbs_the_kube_scheduler_examples_name() -> None:
    from scheduler.extender.app import create_app
    from scheduler.extender.core import Extender
    from scheduler.plugins.defaults import served_profile
    from scheduler.plugins.energy import EnergyPlugin
    from scheduler.telemetry.store import TelemetryStore

    app = create_app(Extender(served_profile(EnergyPlugin()), TelemetryStore([])), manage_store=False)
    paths = {getattr(route, "path", None) for route in app.routes}
    assert {"/filter", "/prioritize"} <= paths


def test_json_examples_parse_or_are_excerpts() -> None:
    blocks = by_lang("json")
    assert blocks
    for block in blocks:
        if "…" not in block.text and "..." not in block.text:
            json.loads(block.text)


PYTHON_BLOCKS = by_lang("python")


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.where for b in PYTHON_BLOCKS])
def test_python_examples_run(block: Block) -> None:
    code = block.text
    # `env.step(action)`: the reader picks the action; here, the first node the pod fits.
    if "env.step(action)" in code:
        code = code.replace("env.step(action)", "env.step(int(obs['action_mask'].argmax()))")
    exec(compile(code, block.where, "exec"), {"__name__": "docs_example"})  # noqa: S102


CSV_BLOCKS = by_lang("csv")


@pytest.mark.parametrize("block", CSV_BLOCKS, ids=[b.where for b in CSV_BLOCKS])
def test_csv_examples_parse_as_traces(block: Block) -> None:
    from rl.simulation.traces.scenario import parse_trace

    assert parse_trace(block.text, block.where)
