"""A small kustomize resolver for testing daemonset/ without the kustomize binary.

It applies the subset of kustomize semantics that the kubejoule manifests use, and refuses
anything else (so a manifest change that needs more is noticed, not silently mis-built):

- `resources`: YAML files (every document) and directories holding a Kustomization;
- `components`: directories holding a Component (their resources are added and their patches
  applied to everything accumulated so far, in order);
- `patches` with `path` or inline `patch` that are JSON 6902 operation lists (add, remove,
  replace, test), selected by `target` (group, version, kind, name, namespace);
- `namespace`: set on every namespaced object and on ServiceAccount subjects of (Cluster)RoleBindings.

Where `kubectl kustomize` is installed the tests check that both give the same objects.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

DAEMONSET = Path(__file__).resolve().parents[2] / "daemonset"
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED_FIELDS = {"apiVersion", "kind", "resources", "components", "patches", "namespace"}
CLUSTER_SCOPED_KINDS = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PriorityClass",
    "StorageClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "APIService",
}

Obj = dict[str, Any]


class KustomizeError(Exception):
    pass


def kustomization_file(directory: Path) -> Path:
    for name in KUSTOMIZATION_FILES:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    raise KustomizeError(f"{directory}: no kustomization file")


def load_yaml_documents(path: Path) -> list[Obj]:
    with path.open() as handle:
        documents = [doc for doc in yaml.safe_load_all(handle) if doc is not None]
    for doc in documents:
        if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
            raise KustomizeError(f"{path}: a document without apiVersion/kind")
    return documents


def user_kustomization(directory: Path, base: str, components: Iterable[str] = ()) -> Path:
    """Write the kustomization a user would keep next to ours: `daemonset/<base>` plus
    `daemonset/components/<name>` for each component, by relative paths. Returns `directory`."""
    rel = Path(os.path.relpath(DAEMONSET, directory))
    spec = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [str(rel / base)],
        "components": [str(rel / "components" / c) for c in components],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(spec))
    return directory


def build(directory: Path) -> list[Obj]:
    """The objects `kustomize build directory` would produce (order not significant)."""
    return _build(directory.resolve(), expected_kind="Kustomization")


def _build(directory: Path, expected_kind: str) -> list[Obj]:
    spec = yaml.safe_load(kustomization_file(directory).read_text()) or {}
    kind = spec.get("kind", "Kustomization")
    if kind != expected_kind:
        raise KustomizeError(f"{directory}: expected a {expected_kind}, found {kind}")
    unknown = set(spec) - SUPPORTED_FIELDS
    if unknown:
        raise KustomizeError(f"{directory}: fields this resolver does not apply: {sorted(unknown)}")
    objects = _accumulate(directory, spec.get("resources") or [])
    for component in spec.get("components") or []:
        objects = _apply_component(directory / component, objects)
    objects = _apply_patches(directory, spec.get("patches") or [], objects)
    if "namespace" in spec:
        objects = [_set_namespace(obj, spec["namespace"]) for obj in objects]
    _check_unique(directory, objects)
    return objects


def _accumulate(directory: Path, entries: Iterable[str]) -> list[Obj]:
    objects: list[Obj] = []
    for entry in entries:
        if "://" in entry or entry.startswith("github.com/"):
            raise KustomizeError(f"{directory}: remote resource {entry!r} is not supported")
        path = (directory / entry).resolve()
        if path.is_dir():
            objects.extend(_build(path, expected_kind="Kustomization"))
        elif path.is_file():
            objects.extend(load_yaml_documents(path))
        else:
            raise KustomizeError(f"{directory}: resource {entry!r} does not exist")
    return objects


def _apply_component(directory: Path, objects: list[Obj]) -> list[Obj]:
    directory = directory.resolve()
    if not directory.is_dir():
        raise KustomizeError(f"component {directory} does not exist")
    spec = yaml.safe_load(kustomization_file(directory).read_text()) or {}
    if spec.get("kind") != "Component":
        raise KustomizeError(f"{directory}: a component must have kind Component")
    unknown = set(spec) - SUPPORTED_FIELDS
    if unknown:
        raise KustomizeError(f"{directory}: fields this resolver does not apply: {sorted(unknown)}")
    combined = objects + _accumulate(directory, spec.get("resources") or [])
    for component in spec.get("components") or []:
        combined = _apply_component(directory / component, combined)
    combined = _apply_patches(directory, spec.get("patches") or [], combined)
    if "namespace" in spec:
        combined = [_set_namespace(obj, spec["namespace"]) for obj in combined]
    return combined


def group_version(obj: Obj) -> tuple[str, str]:
    api_version = obj["apiVersion"]
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


def _matches(target: dict[str, Any], obj: Obj) -> bool:
    group, version = group_version(obj)
    metadata = obj.get("metadata") or {}
    checks = {
        "group": group,
        "version": version,
        "kind": obj["kind"],
        "name": metadata.get("name", ""),
        "namespace": metadata.get("namespace", ""),
    }
    for key in target:
        if key not in checks:
            raise KustomizeError(f"patch target field {key!r} is not supported")
    # kustomize treats target values as anchored regular expressions.
    return all(re.fullmatch(str(target[key]), checks[key]) is not None for key in target)


def _apply_patches(directory: Path, patches: list[dict[str, Any]], objects: list[Obj]) -> list[Obj]:
    for patch in patches:
        if "path" in patch:
            patch_path = directory / patch["path"]
            if not patch_path.is_file():
                raise KustomizeError(f"{directory}: patch file {patch['path']!r} does not exist")
            operations = yaml.safe_load(patch_path.read_text())
        elif "patch" in patch:
            operations = yaml.safe_load(patch["patch"])
        else:
            raise KustomizeError(f"{directory}: a patch needs path or patch")
        if not isinstance(operations, list):
            raise KustomizeError(
                f"{directory}: only JSON 6902 patches (operation lists) are supported"
            )
        target = patch.get("target")
        if not target:
            raise KustomizeError(f"{directory}: a JSON 6902 patch needs a target")
        matched = [obj for obj in objects if _matches(target, obj)]
        if not matched:
            raise KustomizeError(f"{directory}: patch target {target} matches no object")
        for obj in matched:
            for operation in operations:
                apply_json6902(obj, operation)
    return objects


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _walk(document: Any, tokens: list[str]) -> Any:
    node = document
    for token in tokens:
        if isinstance(node, list):
            node = node[int(token)]
        elif isinstance(node, dict):
            if token not in node:
                raise KustomizeError(f"JSON pointer: no key {token!r}")
            node = node[token]
        else:
            raise KustomizeError(f"JSON pointer: cannot descend into {type(node).__name__}")
    return node


def apply_json6902(document: Obj, operation: dict[str, Any]) -> None:
    """Apply one RFC 6902 operation in place."""
    op = operation.get("op")
    pointer = operation.get("path", "")
    if not pointer.startswith("/"):
        raise KustomizeError(f"JSON pointer {pointer!r} must start with /")
    tokens = [_unescape(t) for t in pointer[1:].split("/")]
    parent = _walk(document, tokens[:-1])
    last = tokens[-1]
    if op == "add":
        value = copy.deepcopy(operation["value"])
        if isinstance(parent, list):
            if last == "-":
                parent.append(value)
            else:
                parent.insert(int(last), value)
        else:
            parent[last] = value
    elif op == "replace":
        if isinstance(parent, list):
            parent[int(last)] = copy.deepcopy(operation["value"])
        else:
            if last not in parent:
                raise KustomizeError(f"replace: {pointer} does not exist")
            parent[last] = copy.deepcopy(operation["value"])
    elif op == "remove":
        if isinstance(parent, list):
            del parent[int(last)]
        else:
            if last not in parent:
                raise KustomizeError(f"remove: {pointer} does not exist")
            del parent[last]
    elif op == "test":
        if _walk(document, tokens) != operation["value"]:
            raise KustomizeError(f"test failed at {pointer}")
    else:
        raise KustomizeError(f"JSON 6902 op {op!r} is not supported")


def _set_namespace(obj: Obj, namespace: str) -> Obj:
    obj = copy.deepcopy(obj)
    if obj["kind"] not in CLUSTER_SCOPED_KINDS:
        obj.setdefault("metadata", {})["namespace"] = namespace
    if obj["kind"] in ("RoleBinding", "ClusterRoleBinding"):
        for subject in obj.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount":
                subject["namespace"] = namespace
    return obj


def object_key(obj: Obj) -> tuple[str, str, str, str]:
    metadata = obj.get("metadata") or {}
    return (obj["apiVersion"], obj["kind"], metadata.get("namespace", ""), metadata["name"])


def _check_unique(directory: Path, objects: list[Obj]) -> None:
    seen: set[tuple[str, str, str, str]] = set()
    for obj in objects:
        key = object_key(obj)
        if key in seen:
            raise KustomizeError(f"{directory}: {key} defined twice")
        seen.add(key)
