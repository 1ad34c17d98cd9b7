"""KWOK's configuration for the harness's fake nodes, and those nodes' objects.

KWOK (sigs.k8s.io/kwok) plays the kubelet for Nodes carrying its annotation: the stages below
make such a node Ready — at once, or after the delay in its `kubejoule.io/boot-delay`
annotation (a booting node of an autoscaled group) — (and keep its Lease), run each pod bound to it, end a pod whose
`kubejoule.io/duration` annotation (a Go duration: "90s", "2m") has passed since it started
(Succeeded), and remove a pod being deleted. A pod with a `kubejoule.io/startup` annotation (a
replacement starting: rl/evaluation/owners.py) runs at once but is Ready only that long later,
and its duration counts from its Ready (KWOK plays a stage's delay from the object's last
change). No jitter is set: KWOK turns a jitter at or below
the delay into the delay itself.

KWOK's server is every fake node's kubelet endpoint: the nodes' InternalIP is 127.0.0.1, where
it listens (over TLS), and it serves the kubelet's resource metrics of each node at the path in
the node's `metrics.k8s.io/resource-metrics-path` annotation — what metrics-server scrapes
(rl/cluster/aggregation.py). A pod's usage is what its annotations `kwok.x-k8s.io/usage-cpu` and
`kwok.x-k8s.io/usage-memory` say (quantities, per container; 1m and 1Mi without them); a node's
is the sum over its pods; CPU is integrated into the cumulative counter from which
metrics-server takes a rate. Written for this project from KWOK's Stage, Metric and
ResourceUsage documentation."""

from __future__ import annotations

import json
from typing import Any

from rl.simulation.traces.scenario import NodeSpec

NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_ANNOTATION_VALUE = "fake"
DURATION_ANNOTATION = "kubejoule.io/duration"
# A pod that starts before it is Ready (a Go duration): Running at once, Ready that long later.
STARTUP_ANNOTATION = "kubejoule.io/startup"
# A node that boots (an autoscaled group's, rl/cluster/autoscaler.py): KWOK makes it Ready only
# this long (a Go duration) after it appears; a node without it is Ready at once.
BOOT_ANNOTATION = "kubejoule.io/boot-delay"
CURVE_ANNOTATION = "kubejoule.io/power-curve"
GROUP_LABEL = "kubejoule.io/node-group"
NODE_IP = "127.0.0.1"  # every fake node's address: where KWOK's server listens
METRICS_PATH_ANNOTATION = "metrics.k8s.io/resource-metrics-path"
USAGE_CPU_ANNOTATION = "kwok.x-k8s.io/usage-cpu"
USAGE_MEMORY_ANNOTATION = "kwok.x-k8s.io/usage-memory"

_CONFIGURATION = f"""\
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  manageAllNodes: false
  manageNodesWithAnnotationSelector: {NODE_ANNOTATION}={NODE_ANNOTATION_VALUE}
  nodeLeaseDurationSeconds: 40
  nodeLeaseParallelism: 4
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  podsOnNodeSyncParallelism: 2
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
  cidr: 10.100.0.1/16
  nodeIP: {NODE_IP}
"""

# A node's conditions, all fresh: what the Ready stage sets and the heartbeat renews.
_NODE_CONDITIONS = """\
      {{ $now := Now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
"""

# The Ready stage twice: at once for a node without the boot annotation, after its delay for one
# with it.
_READY_HEAD = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: {name}
spec:
  resourceRef: {{apiGroup: v1, kind: Node}}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ['True']
    - {{key: '.metadata.annotations["{boot}"]', operator: {exists}}}
{delay}  next:
    statusTemplate: |
"""
_BOOT_DELAY = f"""\
  delay:
    durationMilliseconds: 0
    durationFrom:
      expressionFrom: '.metadata.annotations["{BOOT_ANNOTATION}"]'
"""
_NODE_READY_BODY = _NODE_CONDITIONS + """      addresses:
      - {address: {{ NodeIP | Quote }}, type: InternalIP}
      - {address: {{ NodeName | Quote }}, type: Hostname}
      allocatable:
      {{ YAML .status.allocatable 1 }}
      capacity:
      {{ YAML .status.capacity 1 }}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
        kubeProxyVersion: ""
        containerRuntimeVersion: kwok
        kernelVersion: kwok
        osImage: kwok
        machineID: ""
        bootID: ""
        systemUUID: ""
      phase: Running
"""
_NODE_READY = _READY_HEAD.format(name="kubejoule-node-ready", boot=BOOT_ANNOTATION, exists="DoesNotExist",
                                 delay="") + _NODE_READY_BODY
_NODE_BOOTED = _READY_HEAD.format(name="kubejoule-node-booted", boot=BOOT_ANNOTATION, exists="Exists",
                                  delay=_BOOT_DELAY) + _NODE_READY_BODY

_NODE_HEARTBEAT = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: kubejoule-node-heartbeat
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: In
      values: ['True']
  delay:
    durationMilliseconds: 60000
  next:
    statusTemplate: |
""" + _NODE_CONDITIONS + """"""

_POD_RUNNING_HEAD = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: {name}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    - {{key: '.metadata.deletionTimestamp', operator: DoesNotExist}}
    - {{key: '.status.phase', operator: In, values: ['Pending']}}
    - {{key: '.metadata.annotations["{startup}"]', operator: {exists}}}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
"""
_POD_CONDITIONS = """\
      conditions:
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: Initialized}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "{ready}", type: Ready}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "{ready}", type: ContainersReady}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: PodScheduled}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: {ready_lower}
        restartCount: 0
        started: true
        state: {{running: {{startedAt: {{{{ $now | Quote }}}}}}}}
      {{{{ end }}}}
"""
_POD_PLACE = """\
      {{ with NodeIPWith .spec.nodeName }}
      hostIP: {{ . | Quote }}
      {{ end }}
      {{ with PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
      podIP: {{ . | Quote }}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}
"""


def _pod_conditions(ready: bool) -> str:
    return _POD_CONDITIONS.format(ready=str(ready), ready_lower=str(ready).lower())


# Pending → Running: Ready at once, or (a starting replacement) not Ready yet.
_POD_RUNNING = _POD_RUNNING_HEAD.format(name="kubejoule-pod-running", startup=STARTUP_ANNOTATION,
                                        exists="DoesNotExist") + _pod_conditions(True) + _POD_PLACE
_POD_STARTING = _POD_RUNNING_HEAD.format(name="kubejoule-pod-starting", startup=STARTUP_ANNOTATION,
                                         exists="Exists") + _pod_conditions(False) + _POD_PLACE
# A starting pod's Ready, its startup after it began running.
_POD_STARTED = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: kubejoule-pod-started
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: DoesNotExist}
    - {key: '.status.phase', operator: In, values: ['Running']}
    - {key: '.metadata.annotations["STARTUP"]', operator: Exists}
    - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: NotIn, values: ['True']}
  delay:
    durationMilliseconds: 0
    durationFrom:
      expressionFrom: '.metadata.annotations["STARTUP"]'
  next:
    statusTemplate: |
      {{ $now := Now }}
""".replace("STARTUP", STARTUP_ANNOTATION) + _pod_conditions(True)

_POD_DONE = f"""\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: kubejoule-pod-done
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    - {{key: '.metadata.deletionTimestamp', operator: DoesNotExist}}
    - {{key: '.status.phase', operator: In, values: ['Running']}}
    - {{key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: In, values: ['True']}}
    - {{key: '.metadata.annotations["{DURATION_ANNOTATION}"]', operator: Exists}}
  delay:
    durationMilliseconds: 0
    durationFrom:
      expressionFrom: '.metadata.annotations["{DURATION_ANNOTATION}"]'
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "False", type: Ready}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "False", type: ContainersReady}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: false
        restartCount: 0
        started: false
        state: {{terminated: {{exitCode: 0, reason: Completed, finishedAt: {{{{ $now | Quote }}}}}}}}
      {{{{ end }}}}
      phase: Succeeded
"""

_POD_GONE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: kubejoule-pod-gone
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: Exists}
  next:
    finalizers: {empty: true}
    delete: true
"""


# The kubelet's /metrics/resource series that metrics-server reads (its decode.go), per node.
# container_start_time_seconds is the pod's age, not a Unix time, on purpose (as KWOK's own
# Metric): KWOK integrates CPU from its first scrape, not from the pod's start, so metrics-server
# must never take a container "started within the resolution" as having used 0 s at its start
# time; an age is always long before the last scrape, so it takes the rate between two scrapes.
_CONTAINER_LABELS = """\
    labels:
    - {name: container, value: container.name}
    - {name: namespace, value: pod.metadata.namespace}
    - {name: pod, value: pod.metadata.name}
"""

_RESOURCE_METRICS = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Metric
metadata:
  name: kubejoule-resource-metrics
spec:
  path: /metrics/nodes/{nodeName}/metrics/resource
  metrics:
  - name: node_cpu_usage_seconds_total
    help: Cumulative cpu time consumed by the node in core-seconds
    kind: counter
    dimension: node
    value: node.CumulativeUsage("cpu")
  - name: node_memory_working_set_bytes
    help: Current working set of the node in bytes
    kind: gauge
    dimension: node
    value: node.Usage("memory")
  - name: container_start_time_seconds
    help: Start time of the container since unix epoch in seconds
    kind: gauge
    dimension: container
""" + _CONTAINER_LABELS + """\
    value: pod.SinceSecond()
  - name: container_cpu_usage_seconds_total
    help: Cumulative cpu time consumed by the container in core-seconds
    kind: counter
    dimension: container
""" + _CONTAINER_LABELS + """\
    value: pod.CumulativeUsage("cpu", container.name)
  - name: container_memory_working_set_bytes
    help: Current working set of the container in bytes
    kind: gauge
    dimension: container
""" + _CONTAINER_LABELS + """\
    value: pod.Usage("memory", container.name)
"""

_USAGE_FROM_ANNOTATIONS = f"""\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata:
  name: kubejoule-usage-from-annotations
spec:
  usages:
  - usage:
      cpu:
        expression: '"{USAGE_CPU_ANNOTATION}" in pod.metadata.annotations ? Quantity(pod.metadata.annotations["{USAGE_CPU_ANNOTATION}"]) : Quantity("1m")'
      memory:
        expression: '"{USAGE_MEMORY_ANNOTATION}" in pod.metadata.annotations ? Quantity(pod.metadata.annotations["{USAGE_MEMORY_ANNOTATION}"]) : Quantity("1Mi")'
"""


def configuration() -> str:
    """KWOK's --config file: its options, the stages, the resource metrics and the usage rule
    above, as one YAML stream."""
    return "---\n".join([_CONFIGURATION, _NODE_READY, _NODE_BOOTED, _NODE_HEARTBEAT, _POD_RUNNING, _POD_STARTING, _POD_STARTED, _POD_DONE, _POD_GONE,
                         _RESOURCE_METRICS, _USAGE_FROM_ANNOTATIONS])


def node_object(spec: NodeSpec, boot_delay_s: float | None = None) -> dict[str, Any]:
    """The Node KWOK will play for `spec`: its group and power curve on it, its capacity; with
    `boot_delay_s`, Ready only that long after it appears (BOOT_ANNOTATION)."""
    capacity = {
        "cpu": f"{round(spec.cpu_cores * 1000)}m",
        "memory": f"{round(spec.memory_gib * 1024)}Mi",
        "pods": str(spec.max_pods),
    }
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": {
                GROUP_LABEL: spec.group,
                "kubernetes.io/hostname": spec.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
            "annotations": {
                NODE_ANNOTATION: NODE_ANNOTATION_VALUE,
                CURVE_ANNOTATION: json.dumps(list(spec.curve.as_points())),
                METRICS_PATH_ANNOTATION: f"/metrics/nodes/{spec.name}/metrics/resource",
            },
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }
    if boot_delay_s is not None:
        node["metadata"]["annotations"][BOOT_ANNOTATION] = go_duration(boot_delay_s)
    return node


def go_duration(seconds: float) -> str:
    """`seconds` as a Go duration in whole milliseconds (at least 1 ms)."""
    return f"{max(1, round(seconds * 1000))}ms"

