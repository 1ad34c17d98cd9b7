"""Node objects as kube-scheduler sends them in `Nodes.items` (its informer cache: managedFields
trimmed): labels, annotations, taints, conditions, addresses, nodeInfo and an images list,
about 5 KB of JSON each, like the nodes of a managed cloud cluster."""

from __future__ import annotations

import random
from typing import Any

_IMAGES = (
    "registry.k8s.io/kube-proxy", "docker.io/calico/node", "docker.io/calico/cni",
    "quay.io/prometheus/node-exporter", "docker.io/grafana/promtail", "ghcr.io/kubejoule/agent",
    "registry.k8s.io/pause", "docker.io/library/nginx", "docker.io/library/redis",
    "gcr.io/distroless/java17", "docker.io/bitnami/postgresql", "quay.io/jetstack/cert-manager-cainjector",
    "registry.k8s.io/coredns/coredns", "docker.io/fluent/fluent-bit", "public.ecr.aws/aws-ebs-csi-driver",
    "registry.k8s.io/sig-storage/csi-node-driver-registrar", "registry.k8s.io/sig-storage/livenessprobe",
    "docker.io/istio/proxyv2", "docker.io/library/python", "docker.io/envoyproxy/envoy",
)
_CONDITIONS = (
    ("NetworkUnavailable", "False", "CalicoIsUp", "Calico is running on this node"),
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status. AppArmor enabled"),
)


def realistic_node(name: str, index: int = 0, cpu: str = "32", memory: str = "131072Mi") -> dict[str, Any]:
    rng = random.Random(index)
    zone = "abc"[index % 3]
    stamp = f"2026-11-30T08:{index % 60:02d}:{(index * 7) % 60:02d}Z"
    hexid = f"{rng.getrandbits(128):032x}"
    images = []
    for k, repo in enumerate(rng.sample(_IMAGES, 14)):
        digest = f"{rng.getrandbits(256):064x}"
        tag = f"v{1 + k % 4}.{k}.{rng.randint(0, 20)}"
        images.append(
            {"names": [f"{repo}@sha256:{digest}", f"{repo}:{tag}"], "sizeBytes": rng.randint(700_000, 900_000_000)}
        )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"{hexid[:8]}-{hexid[8:12]}-{hexid[12:16]}-{hexid[16:20]}-{hexid[20:]}",
            "resourceVersion": str(1_000_000 + index),
            "creationTimestamp": stamp,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": "m6i.8xlarge",
                "beta.kubernetes.io/os": "linux",
                "eks.amazonaws.com/capacityType": "ON_DEMAND",
                "eks.amazonaws.com/nodegroup": "general-purpose",
                "eks.amazonaws.com/nodegroup-image": "ami-0a1b2c3d4e5f67890",
                "failure-domain.beta.kubernetes.io/region": "eu-west-1",
                "failure-domain.beta.kubernetes.io/zone": f"eu-west-1{zone}",
                "k8s.io/cloud-provider-aws": "5f2c9b0e8d7a6c5b4a3f2e1d0c9b8a7f",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m6i.8xlarge",
                "topology.ebs.csi.aws.com/zone": f"eu-west-1{zone}",
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": f"eu-west-1{zone}",
            },
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": f"10.0.{index // 250}.{index % 250}",
                "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"i-{index:017x}"}}',
                "node.alpha.kubernetes.io/ttl": "0",
                "projectcalico.org/IPv4Address": f"10.0.{index // 250}.{index % 250}/19",
                "projectcalico.org/IPv4IPIPTunnelAddr": f"192.168.{index % 250}.0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {
            "providerID": f"aws:///eu-west-1{zone}/i-{index:017x}",
            "podCIDR": f"100.64.{index % 250}.0/24",
            "podCIDRs": [f"100.64.{index % 250}.0/24"],
            "taints": [{"key": "dedicated", "value": "general", "effect": "PreferNoSchedule"}],
        },
        "status": {
            "capacity": {
                "cpu": cpu, "ephemeral-storage": "209702892Ki", "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "memory": memory, "pods": "110",
            },
            "allocatable": {
                "cpu": f"{int(cpu) * 1000 - 90}m", "ephemeral-storage": "192188443124",
                "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": memory, "pods": "110",
            },
            "conditions": [
                {"type": t, "status": s, "lastHeartbeatTime": stamp, "lastTransitionTime": stamp,
                 "reason": r, "message": m}
                for t, s, r, m in _CONDITIONS
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{index // 250}.{index % 250}"},
                {"type": "InternalDNS", "address": f"ip-10-0-{index // 250}-{index % 250}.eu-west-1.compute.internal"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": hexid, "systemUUID": hexid[:8] + "-" + hexid[8:12], "bootID": hexid[::-1],
                "kernelVersion": "6.1.112-124.190.amzn2023.x86_64", "osImage": "Amazon Linux 2023.6.20241010",
                "containerRuntimeVersion": "containerd://1.7.22", "kubeletVersion": "v1.31.0-eks-a737599",
                "kubeProxyVersion": "v1.31.0-eks-a737599", "operatingSystem": "linux", "architecture": "amd64",
            },
            "images": images,
        },
    }
