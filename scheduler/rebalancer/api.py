"""The API calls the rebalancer makes; `KubeRebalancerApi` is the real one (scheduler/cluster/kube.py)."""

from __future__ import annotations

from typing import Any, Protocol

from scheduler.cluster import kube
from scheduler.cluster.watch import KubeWatchApi, WatchApi


class RebalancerApi(WatchApi, Protocol):
    def evict(self, namespace: str, name: str, uid: str) -> None: ...

    def list_pdbs(self) -> list[dict[str, Any]]: ...

    def get_node(self, name: str) -> dict[str, Any] | None: ...

    def patch_node(self, name: str, patch: dict[str, Any]) -> None: ...

    def create_event(self, namespace: str, event: dict[str, Any]) -> None: ...


class KubeRebalancerApi(KubeWatchApi):
    def evict(self, namespace: str, name: str, uid: str) -> None:
        kube.evict_pod(self.api, namespace, name, uid, self.timeout_seconds)

    def list_pdbs(self) -> list[dict[str, Any]]:
        return kube.list_pod_disruption_budgets(self.api, self.timeout_seconds)

    def get_node(self, name: str) -> dict[str, Any] | None:
        return kube.get_node(self.api, name, self.timeout_seconds)

    def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        kube.patch_node(self.api, name, patch, self.timeout_seconds)

    def create_event(self, namespace: str, event: dict[str, Any]) -> None:
        kube.create_event(self.api, namespace, event, self.timeout_seconds)
