"""The sample record's JSON Schema (`kubejoule.sample/v1`): the shape `Snapshot.to_record()`
writes (`kubejoule-agent once --json`, `replay --json`), each key with what it means. It is the
published contract: the tests validate every record they produce against it (strictly: no key
it does not list), and docs/reference/record.md is generated from it.

Record rules the schema cannot say alone (DESIGN.md, "Sample record"): unknown is null, never 0,
and every null has a gap saying why; known shares add up to node power."""

from __future__ import annotations

from agent.monitor.snapshot import SCHEMA

Schema = dict[str, object]  # a JSON Schema (sub)document

_NULL_OR_WATTS = {"type": ["number", "null"], "minimum": 0}


def _watts(description: str) -> Schema:
    return {**_NULL_OR_WATTS, "description": description}


def _text_or_null(description: str) -> Schema:
    return {"type": ["string", "null"], "description": description}


def _cpu_seconds(description: str = "CPU time in the interval; null: unknown this interval (a gap says why)"
                 ) -> Schema:
    return {"type": ["number", "null"], "minimum": 0, "description": description}


def _usage(description: str) -> Schema:
    return {"type": ["number", "null"], "minimum": 0, "description": description + " (null: not given)"}


def _objects(description: str, properties: dict[str, Schema], optional: tuple[str, ...] = ()) -> Schema:
    return {"type": "array", "description": description,
            "items": {"type": "object", "properties": properties,
                      "required": sorted(set(properties) - set(optional)), "additionalProperties": False}}


def _object(description: str, properties: dict[str, Schema], nullable: bool = False) -> Schema:
    return {"type": ["object", "null"] if nullable else "object", "description": description,
            "properties": properties, "required": sorted(properties), "additionalProperties": False}


_POD_NAMES = {
    "namespace": _text_or_null("its namespace (null without the Kubernetes API)"),
    "name": _text_or_null("its name (null without the Kubernetes API)"),
}

SAMPLE_SCHEMA: Schema = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": SCHEMA,
    "type": "object",
    "properties": {
        "schema": {"const": SCHEMA, "description": "the record's schema and version"},
        "node": {"type": "string", "minLength": 1, "description": "the node's name"},
        "interval_seconds": {"type": "number", "exclusiveMinimum": 0,
                             "description": "the interval the powers are averaged over"},
        "source": {"enum": ["rapl", "platform", "host", "estimated", "none"],
                   "description": "where node power comes from: rapl (measured), platform (the BMC's "
                                  "whole-server reading), host (a VM's share measured on its host), "
                                  "estimated (a power curve), none (unknown)"},
        "estimate": {"type": "string", "pattern": "^ccf:(aws|gcp|azure):.",
                     "description": "only with source estimated from a cloud instance type's published "
                                    "coefficients: their provenance, e.g. ccf:aws:m5.xlarge"},
        "node_watts": _watts("node power; null: unknown"),
        "idle_watts": _watts("its idle (static) part"),
        "active_watts": _watts("its active (dynamic) part: node minus idle"),
        "idle_source": {"enum": ["calibration", "utilization"],
                        "description": "where idle comes from: a power profile's measured idle, or the "
                                       "utilization model"},
        "cpu_utilization": {"type": ["number", "null"], "minimum": 0, "maximum": 1,
                            "description": "busy share of CPU time; null when no CPU time passed or /proc/stat "
                                           "could not be read"},
        "zones": _objects("the RAPL zones read", {
            "zone": {"type": "string", "description": "the zone's name: package-0, dram, psys, …"},
            "socket": {"type": ["integer", "null"], "description": "its socket, where known"},
            "path": {"type": "string", "description": "its powercap directory under sysfs"},
            "watts": _watts("its power"),
        }),
        "pods": _objects("the pods on the node", {
            "uid": {"type": "string", "description": "the pod's uid"},
            **_POD_NAMES,
            "qos": _text_or_null("its QoS class, from its cgroup"),
            "cpu_seconds": _cpu_seconds(),
            "watts": _watts("its share of the CPU side"),
            "gpu_watts": _watts("only for a pod holding or using a GPU: its share of the GPUs (null: unknown)"),
            "containers": _objects("its containers", {
                "id": {"type": "string", "description": "the container's id"},
                "cpu_seconds": _cpu_seconds(),
                "watts": _watts("its share of the CPU side"),
            }),
        }, optional=("gpu_watts",)),
        "host_watts": _watts("the active power of everything not in a pod"),
        "vms": _objects("qemu/KVM virtual machines", {
            "name": {"type": "string", "description": "the VM's name (qemu -name)"},
            "uuid": _text_or_null("its uuid (qemu -uuid)"),
            "pid": {"type": "integer", "description": "its qemu process"},
            "pod_uid": _text_or_null("the pod it runs in (KubeVirt), if any"),
            "cpu_seconds": _cpu_seconds("CPU time in the interval; null: its process could not be read"),
            "watts": _watts("its share of the CPU side"),
        }),
        "processes": _objects("the processes using the most power (--process-top N)", {
            "pid": {"type": "integer", "description": "the process id"},
            "comm": {"type": "string", "description": "its command name (never its command line)"},
            "cpu_seconds": {"type": "number", "minimum": 0, "description": "CPU time in the interval"},
            "watts": _watts("its share of the CPU side"),
        }),
        "gaps": _objects("what could not be measured this interval, and why", {
            "what": {"type": "string", "minLength": 1,
                     "description": "what, as people read it: node, zone intel-rapl:0 (package-0), pod UID, …"},
            "reason": {"type": "string", "minLength": 1, "description": "why"},
            "kind": {"enum": ["unreadable", "implausible", "incomplete", "unknown"],
                     "description": "unreadable (a file could not be read or parsed), implausible (read, but "
                                    "cannot be right), incomplete (a whole that needs a part with a gap), unknown"},
        }),
        "gpus": _objects("only with GPUs: each GPU (NVIDIA, through NVML)", {
            "index": {"type": "integer", "description": "its NVML index"},
            "uuid": {"type": "string", "description": "its uuid"},
            "name": {"type": "string", "description": "its model"},
            "watts": _watts("its power"),
            "method": {"enum": ["energy", "power", None],
                       "description": "energy (its total-energy counter), power (two power readings), null: unknown"},
            "mode": {"enum": ["exclusive", "shared", "mig", "vgpu"],
                     "description": "exclusive to one pod, shared by processes, MIG or vGPU"},
        }),
        "gpu_unattributed_watts": _watts("only with GPUs: GPU power not split between pods, host and idle"),
        "platform": _object("only with a BMC: its reading of the whole server and what is inside it", {
            "watts": _watts("the platform's power; null: not used this interval (a gap says why)"),
            "age_seconds": {"type": ["number", "null"], "minimum": 0, "description": "the reading's age"},
            "reading": _text_or_null("which Redfish reading: EnvironmentMetrics (PowerWatts) or PowerControl "
                                     "(PowerConsumedWatts)"),
            "chassis": _text_or_null("the chassis' Redfish path"),
            "other_watts": _watts("platform minus CPU side minus GPUs: fans, power supplies, disks, NICs"),
            "cpu_watts": _watts("the CPU side inside it"),
            "gpu_watts": _watts("the GPUs inside it"),
            "energy_kwh": {"type": ["number", "null"], "minimum": 0,
                           "description": "the BMC's own energy counter, where it has one"},
        }),
        "wall_watts": {"type": "number", "description": "only with a power profile's wall correction: node power at "
                                                        "the wall"},
        "network": _object("only with --network: byte counters (kernel counters; loopback and veth left out)", {
            "interfaces": _objects("the node's interfaces", {
                "interface": {"type": "string", "description": "its name"},
                "rx_bytes": {"type": "integer", "minimum": 0, "description": "bytes received so far"},
                "tx_bytes": {"type": "integer", "minimum": 0, "description": "bytes sent so far"},
            }),
            "pods": _objects("each pod's own interfaces", {
                "uid": {"type": "string", "description": "the pod's uid"},
                **_POD_NAMES,
                "host_network": {"type": "boolean", "description": "a host-network pod: its bytes are the node's"},
                "rx_bytes": {"type": ["integer", "null"], "minimum": 0, "description": "bytes received so far"},
                "tx_bytes": {"type": ["integer", "null"], "minimum": 0, "description": "bytes sent so far"},
            }),
        }),
        "metrics_server": _object("only with Metrics Server (metrics.k8s.io): its usage of the node and pods", {
            "age_seconds": {"type": "number", "minimum": 0, "description": "sample time minus its timestamp"},
            "node": _object("the node's usage (null: none)", {
                "cpu_cores": _usage("CPU usage, in cores"),
                "memory_working_set_bytes": _usage("memory working set, bytes"),
                "window_seconds": _usage("the window its CPU usage is averaged over"),
            }, nullable=True),
            "pods": _objects("each pod's usage", {
                "uid": {"type": "string", "description": "the pod's uid"},
                "namespace": {"type": "string", "description": "its namespace"},
                "name": {"type": "string", "description": "its name"},
                "cpu_cores": _usage("CPU usage, in cores"),
                "memory_working_set_bytes": _usage("memory working set, bytes"),
            }),
        }),
    },
    "required": ["schema", "node", "interval_seconds", "source", "node_watts", "idle_watts", "active_watts",
                 "idle_source", "cpu_utilization", "zones", "pods", "host_watts", "vms", "processes", "gaps"],
    "additionalProperties": False,
}
