"""kubejoule / Workloads: which pods, namespaces and VMs use the energy."""

from __future__ import annotations

from grafana_foundation_sdk.models.dashboard import Dashboard

from .board import dashboard, namespace_variable, node_variable
from .panels import bar_gauge, graph, query
from .promql import SEL, SEL_NS, SEL_NS_CPU, SEL_NS_GPU, rate


def workloads() -> Dashboard:
    return dashboard(
        "kubejoule-workloads",
        "kubejoule / Workloads",
        "Which pods, namespaces and VMs use the energy.",
        [node_variable(), namespace_variable()],
        [
            bar_gauge(
                "Top pods by energy (time range)",
                "Pod energy over the dashboard's time range.",
                query(
                    f"topk(10, sum by (namespace, pod) (increase(kubejoule_pod_energy_joules_total{{{SEL_NS}}}"
                    "[$__range])))",
                    "{{namespace}}/{{pod}}",
                    instant=True,
                ),
                unit="joule",
            ),
            bar_gauge(
                "Top namespaces by energy (time range)",
                "Namespace energy over the dashboard's time range.",
                query(
                    f"topk(10, sum by (namespace) (increase(kubejoule_pod_energy_joules_total{{{SEL_NS}}}"
                    "[$__range])))",
                    "{{namespace}}",
                    instant=True,
                ),
                unit="joule",
            ),
            graph(
                "Pod power",
                "The ten pods using the most power.",
                query(
                    f"topk(10, sum by (namespace, pod) ({rate('pod_energy', SEL_NS)}))",
                    "{{namespace}}/{{pod}}",
                ),
            ),
            graph(
                "Namespace power",
                "Pod power summed by namespace.",
                query(f"sum by (namespace) ({rate('pod_energy', SEL_NS)})", "{{namespace}}"),
                stack=True,
            ),
            graph(
                "GPU power by namespace",
                "Pods' share of the GPUs (component gpu), summed by namespace.",
                query(f"sum by (namespace) ({rate('pod_energy', SEL_NS_GPU)})", "{{namespace}}"),
                stack=True,
            ),
            graph(
                "Watts per CPU core used",
                "Pods' CPU-side power over Metrics Server's CPU usage, by namespace: what a core "
                "of work costs in each namespace.",
                query(
                    f"sum by (namespace) ({rate('pod_energy', SEL_NS_CPU)}) / "
                    f"sum by (namespace) (kubejoule_pod_cpu_usage_cores{{{SEL_NS}}})",
                    "{{namespace}}",
                ),
            ),
            graph(
                "Pod memory",
                "Working set of the pods using the most power (Metrics Server).",
                query(
                    f"topk(10, sum by (namespace, pod) (kubejoule_pod_memory_working_set_bytes{{{SEL_NS}}}))",
                    "{{namespace}}/{{pod}}",
                ),
                unit="bytes",
            ),
            bar_gauge(
                "Virtual machines by energy (time range)",
                "qemu/KVM VM energy over the dashboard's time range.",
                query(
                    f"topk(10, sum by (node, vm) (increase(kubejoule_vm_energy_joules_total{{{SEL}}}[$__range])))",
                    "{{vm}} on {{node}}",
                    instant=True,
                ),
                unit="joule",
            ),
            graph(
                "Pods per namespace",
                "How many pods the agents attribute energy to.",
                query(
                    f"count by (namespace) (kubejoule_pod_power_watts{{{SEL_NS_CPU}}})",
                    "{{namespace}}",
                ),
                unit="short",
            ),
        ],
    )
