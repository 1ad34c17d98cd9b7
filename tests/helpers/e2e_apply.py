"""Server-side apply of manifests to the real API server, as `kubectl apply --server-side` does:
each object's resource found through the API's own discovery, PATCHed as
application/apply-patch+yaml with a field manager; `dry_run` asks the server to admit and
validate the object without storing it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rl.cluster.api import Api, ApiError

FIELD_MANAGER = "kubejoule-e2e"


@dataclass(frozen=True)
class Resource:
    path: str  # /api/v1 or /apis/GROUP/VERSION
    plural: str
    namespaced: bool


def discover(api: Api) -> dict[tuple[str, str], Resource]:
    """(apiVersion, kind) → where the server serves it."""
    found: dict[tuple[str, str], Resource] = {}
    versions = [("v1", "/api/v1")]
    for group in api.request("GET", "/apis")["groups"]:
        for version in group["versions"]:
            versions.append((version["groupVersion"], f"/apis/{version['groupVersion']}"))
    for group_version, path in versions:
        try:
            listed = api.request("GET", path)
        except ApiError:
            continue
        for resource in listed.get("resources", []):
            if "/" in resource["name"]:
                continue
            found[(group_version, resource["kind"])] = Resource(path, resource["name"], resource["namespaced"])
    return found


def object_path(resources: dict[tuple[str, str], Resource], obj: dict[str, Any]) -> str | None:
    """The object's URL path, or None when the server does not serve its kind."""
    resource = resources.get((obj["apiVersion"], obj["kind"]))
    if resource is None:
        return None
    name = obj["metadata"]["name"]
    if resource.namespaced:
        namespace = obj["metadata"].get("namespace", "default")
        return f"{resource.path}/namespaces/{namespace}/{resource.plural}/{name}"
    return f"{resource.path}/{resource.plural}/{name}"


def apply(api: Api, resources: dict[tuple[str, str], Resource], objects: Iterable[dict[str, Any]],
          *, dry_run: bool = False) -> list[dict[str, Any]]:
    """Apply each object; the kinds the server does not serve are returned, not applied."""
    unserved = []
    query = f"?fieldManager={FIELD_MANAGER}&force=true" + ("&dryRun=All" if dry_run else "")
    for obj in objects:
        path = object_path(resources, obj)
        if path is None:
            unserved.append(obj)
            continue
        api.request("PATCH", path + query, json.dumps(obj).encode(), content_type="application/apply-patch+yaml")
    return unserved
