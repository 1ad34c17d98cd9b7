"""Cloud instances' power curves from published coefficients (docs/agent.md, "Cloud
instances"): `kubejoule-agent --instance-type aws:m5.xlarge`, the agent's own Node's
`node.kubernetes.io/instance-type` label and `spec.providerID`, and the scheduler's
`{instance_type: aws:m5.xlarge}` curves.

The figures are Cloud Carbon Footprint's (Apache-2.0), shipped in common/cloud/instances.csv
with their commit; tools/cloud/regenerate.py rebuilds that file. Per instance type: its vCPUs
and the minimum and maximum watts per vCPU of its CPU microarchitecture (SPECpower-derived;
the mean when CCF lists it on several). The curve is CCF's own model: linear from
vCPUs × minimum at 0 % to vCPUs × maximum at 100 % — the CPU side of the node, as an agent's
RAPL reading would be; CCF's memory term is not added. A type not in the file is unknown:
callers report a gap that names it, never a guess from a similar type.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from common.curves import PowerCurve
from common.power_profile import PowerProfile

DATA_FILE = Path(__file__).resolve().parent / "cloud" / "instances.csv"
PROVIDERS = ("aws", "gcp", "azure")
# spec.providerID's scheme → the provider (Kubernetes' cloud providers write these).
PROVIDER_ID_SCHEMES: Mapping[str, str] = {"aws": "aws", "gce": "gcp", "azure": "azure"}
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
OLD_INSTANCE_TYPE_LABEL = "beta.kubernetes.io/instance-type"


class CloudEstimateError(ValueError):
    """An instance type that cannot be used: malformed, or not in the coefficients (the message
    names it)."""


@dataclass(frozen=True)
class InstanceCoefficients:
    provider: str
    instance_type: str
    vcpus: int
    architectures: tuple[str, ...]
    min_watts_per_vcpu: float
    max_watts_per_vcpu: float
    source: str  # the row's citation: upstream commit and files

    @property
    def idle_watts(self) -> float:
        return self.vcpus * self.min_watts_per_vcpu

    @property
    def max_watts(self) -> float:
        return self.vcpus * self.max_watts_per_vcpu

    @property
    def provenance(self) -> str:
        """The `estimate` label's value: `ccf:aws:m5.xlarge`."""
        return f"ccf:{self.provider}:{self.instance_type}"

    def curve(self) -> PowerCurve:
        return PowerCurve.linear(self.idle_watts, self.max_watts)

    def profile(self) -> PowerProfile:
        """The curve as a power profile of the CPU side (reading rapl), as the agent uses one on a
        node without RAPL: node power estimated from utilization, labelled `estimated`."""
        document = {
            "idle_watts": self.idle_watts, "max_watts": self.max_watts, "model": "linear",
            "source": f"Cloud Carbon Footprint coefficients, {self.source}",
            "instance_type": f"{self.provider}:{self.instance_type}", "vcpus": self.vcpus,
            "architectures": list(self.architectures),
        }
        return PowerProfile(
            idle_watts=self.idle_watts, curve=self.curve(), max_watts=self.max_watts, model="linear",
            document=document, estimate=self.provenance,
        )


def _key(provider: str, instance_type: str) -> tuple[str, str]:
    """The lookup key: case-insensitive; Azure's label form `Standard_D4s_v3` is CCF's `D4s v3`."""
    name = instance_type.strip()
    if provider == "azure":
        if name.lower().startswith("standard_"):
            name = name[len("standard_"):]
        name = name.replace("_", " ")
    return provider, name.lower()


@cache
def load_table(path: Path = DATA_FILE) -> Mapping[tuple[str, str], InstanceCoefficients]:
    """Every row of the data file, by (provider, lower-cased type). A malformed file is an
    error naming its line: it ships with the package, so that is a bug, not a node's problem."""
    table: dict[tuple[str, str], InstanceCoefficients] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    for number, row in enumerate(csv.DictReader(lines), start=2):
        try:
            entry = InstanceCoefficients(
                row["provider"], row["instance_type"], int(row["vcpus"]),
                tuple(row["architectures"].split("|")), float(row["min_watts_per_vcpu"]),
                float(row["max_watts_per_vcpu"]), row["source"],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CloudEstimateError(f"{path}: data row {number} is malformed: {exc}") from exc
        table[_key(entry.provider, entry.instance_type)] = entry
    return table


def parse_instance_type(text: str) -> tuple[str, str]:
    """`PROVIDER:TYPE` → (provider, type); CloudEstimateError when malformed."""
    provider, sep, name = text.partition(":")
    provider = provider.strip().lower()
    if not sep or not name.strip():
        raise CloudEstimateError(f"instance type {text!r}: expected PROVIDER:TYPE, e.g. aws:m5.xlarge")
    if provider not in PROVIDERS:
        raise CloudEstimateError(f"instance type {text!r}: provider must be one of {', '.join(PROVIDERS)}")
    return provider, name.strip()


def provider_from_id(provider_id: str | None) -> str | None:
    """The provider of a Node's spec.providerID (`aws:///eu-west-1a/i-…`, `gce://…`,
    `azure:///subscriptions/…`); None for anything else (bare metal, kind, KWOK)."""
    if not provider_id or "://" not in provider_id:
        return None
    return PROVIDER_ID_SCHEMES.get(provider_id.split("://", 1)[0].lower())


def unknown_reason(provider: str, instance_type: str) -> str:
    return (f"instance type {provider}:{instance_type} is not in kubejoule's cloud coefficients "
            f"(common/cloud/instances.csv, from Cloud Carbon Footprint): node power not estimated")


def lookup(provider: str, instance_type: str, path: Path = DATA_FILE) -> InstanceCoefficients:
    """The type's coefficients; CloudEstimateError naming it when the data has no such type."""
    entry = load_table(path).get(_key(provider, instance_type))
    if entry is None:
        raise CloudEstimateError(unknown_reason(provider, instance_type))
    return entry


def node_instance_type(node: Mapping[str, object]) -> tuple[str, str] | None:
    """(provider, type) from a Node object (labels and spec.providerID as the API gives them);
    None when it is not a known cloud's node or has no instance-type label."""
    metadata = node.get("metadata")
    spec = node.get("spec")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    provider_id = spec.get("providerID") if isinstance(spec, Mapping) else None
    provider = provider_from_id(provider_id if isinstance(provider_id, str) else None)
    if provider is None or not isinstance(labels, Mapping):
        return None
    name = labels.get(INSTANCE_TYPE_LABEL) or labels.get(OLD_INSTANCE_TYPE_LABEL)
    return (provider, name) if isinstance(name, str) and name else None
