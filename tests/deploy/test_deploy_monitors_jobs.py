"""daemonset/: the ServiceMonitors (a CRD: metadata against the 1.33 ObjectMeta schema, spec
against the subset of the CRD's schema we use, selector/port against their Service) and the
benchmark's Indexed Job (daemonset/jobs/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.helpers.deploy_kustomize import (
    DAEMONSET,
    Obj,
    build,
    object_key,
    user_kustomization,
)
from tests.helpers.deploy_manifests import (
    KUBERNETES_VERSION,
    NAMESPACE,
    by_kind,
)

# -- ServiceMonitor (a CRD: validated as the module docstring says) --------------------------

# The part of monitoring.coreos.com/v1 ServiceMonitor's schema that our objects use; any other
# field is an error here (a typo would otherwise be accepted by this test and ignored by the CRD's
# structural pruning).
SERVICE_MONITOR_SPEC_SCHEMA: dict[str, Any] = {
    "$defs": {
        # monitoring.coreos.com/v1 RelabelConfig, the fields we use
        "relabel": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "sourceLabels": {"type": "array", "items": {"type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"}},
                "targetLabel": {"type": "string"},
                "regex": {"type": "string"},
                "replacement": {"type": "string"},
                "action": {"enum": ["replace", "keep", "drop", "labeldrop", "labelkeep", "labelmap"]},
            },
        },
    },
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
                    "scheme": {"enum": ["http", "https"]},
                    "tlsConfig": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "serverName": {"type": "string"},
                            "ca": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {"secret": {
                                    "type": "object", "additionalProperties": False, "required": ["name", "key"],
                                    "properties": {"name": {"type": "string"}, "key": {"type": "string"}},
                                }},
                            },
                        },
                    },
                    "relabelings": {"type": "array", "items": {"$ref": "#/$defs/relabel"}},
                    "metricRelabelings": {"type": "array", "items": {"$ref": "#/$defs/relabel"}},
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
        assert monitor["spec"]["namespaceSelector"]["matchNames"] == [monitor["metadata"]["namespace"]]
        selector = monitor["spec"]["selector"]["matchLabels"]
        (service,) = [
            s for s in services.values() if selector.items() <= s["metadata"]["labels"].items()
        ]
        assert service["metadata"]["name"] == name
        port_names = {p["name"] for p in service["spec"]["ports"]}
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["port"] in port_names
            # Never honorLabels: a target must not choose the node its series are about.
            assert endpoint.get("honorLabels", False) is False
    (agent_endpoint,) = monitors["kubejoule-agent"]["spec"]["endpoints"]
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"} in agent_endpoint["relabelings"]
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
    from rl.cmd.cli import _build_parser
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
