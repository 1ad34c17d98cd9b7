"""The cloud provider's door to the Kubernetes API (through scheduler/cluster/kube.py): the
Nodes of its machines, the pods still on them, the Events and annotations of its power actions.
Plain JSON dicts in and out; `machines` decides, this only calls."""

from __future__ import annotations

import datetime
import logging
import uuid

from scheduler.cluster import kube

log = logging.getLogger("kubejoule.cloudprovider")

COMPONENT = "kubejoule-cloud-provider"
EVENT_NAMESPACE = "default"  # Events of cluster-scoped objects (Nodes) live in `default`


class KubeSide:
    def __init__(self, api: kube.ApiClient, timeout_seconds: float = 10.0) -> None:
        self.api = api
        self.timeout = timeout_seconds

    def node(self, name: str) -> dict[str, object] | None:
        return kube.get_node(self.api, name, self.timeout)

    def pods_on(self, node: str) -> list[dict[str, object]]:
        pods, _ = kube.list_pods(self.api, f"spec.nodeName={node}", self.timeout)
        return pods

    def delete_node(self, name: str) -> None:
        kube.delete_node_object(self.api, name, self.timeout)

    def annotate(self, name: str, annotations: dict[str, str]) -> None:
        kube.patch_node(self.api, name, {"metadata": {"annotations": annotations}}, self.timeout)

    def event(self, node: str, uid: str, reason: str, message: str, warning: bool = False) -> None:
        """An Event on the Node (`kubectl describe node` shows it); a failure is logged, never
        raised: the power action it reports has happened either way."""
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{node}.{uuid.uuid4().hex[:12]}", "namespace": EVENT_NAMESPACE},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid or node},
            "reason": reason,
            "message": message[:1000],
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            kube.create_event(self.api, EVENT_NAMESPACE, body, self.timeout)
        except Exception as exc:
            log.warning("cannot post the Event %s on node %s: %s", reason, node, exc)
