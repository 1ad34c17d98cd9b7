"""The API calls the rebalancer makes; `KubeRebalancerApi` is the real one (scheduler/cluster/kube.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from scheduler.cluster import kube
from scheduler.cluster.watch import KubeWatchApi, WatchApi


class RebalancerApi(WatchApi, Protocol):
    def evict(self, namespace: str, name: str, uid: str) -> None: ...

    def list_pdbs(self) -> list[dict[str, object]]: ...

    def get_node(self, name: str) -> dict[str, object] | None: ...

    def patch_node(self, name: str, patch: Mapping[str, object]) -> None: ...

    def create_event(self, namespace: str, event: Mapping[str, object]) -> None: ...


class KubeRebalancerApi(KubeWatchApi):
    def evict(self, namespace: str, name: str, uid: str) -> None:
        kube.evict_pod(self.api, namespace, name, uid, self.timeout_seconds)

    def list_pdbs(self) -> list[dict[str, object]]:
        return kube.list_pod_disruption_budgets(self.api, self.timeout_seconds)

    def get_node(self, name: str) -> dict[str, object] | None:
        return kube.get_node(self.api, name, self.timeout_seconds)

    def patch_node(self, name: str, patch: Mapping[str, object]) -> None:
        kube.patch_node(self.api, name, patch, self.timeout_seconds)

    def create_event(self, namespace: str, event: Mapping[str, object]) -> None:
        kube.create_event(self.api, namespace, event, self.timeout_seconds)
