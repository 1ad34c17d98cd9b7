"""Regenerate common/cloud/instances.csv from Cloud Carbon Footprint's coefficients.

    python tools/cloud/regenerate.py --upstream CHECKOUT --commit SHA [--out common/cloud/instances.csv]

CHECKOUT is a checkout of https://github.com/cloud-carbon-footprint/ccf-coefficients (Apache-2.0)
at commit SHA, or a flat folder holding the same files (tests/fixtures/ccf-coefficients/ is one, at
the commit the shipped file names). Files read:

* output/coefficients-{aws,gcp,azure}-use.csv — per provider and CPU microarchitecture, the
  minimum and maximum watts per vCPU CCF derives from SPECpower_ssj2008 results;
* data/{aws,gcp,azure}-instances.csv — each instance type's vCPUs and what it runs on: GCP and
  Azure name the microarchitecture, AWS names the CPU model (`Xeon Platinum 8175M`);
* data/intel-*.csv, data/amd-*.csv — CCF's CPU model lists per microarchitecture, which turn an
  AWS CPU model into its microarchitecture (as ccfcoef/aws/coefficients.py does).

One row per (provider, instance type). A type that CCF lists on several microarchitectures gets
the mean of their per-vCPU figures (the hardware behind one type varies; CCF averages too). A type
whose microarchitecture is unknown (`Unknown`), or has no coefficients in CCF's published output
(AWS's first Graviton), is left out: kubejoule reports a gap for it, never a guess. Only the
standard library is used, so the script runs wherever the repository does.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections.abc import Iterable
from pathlib import Path
from statistics import fmean

PROVIDERS = ("aws", "gcp", "azure")
UPSTREAM = "https://github.com/cloud-carbon-footprint/ccf-coefficients"
HEADER = ("provider", "instance_type", "vcpus", "architectures", "min_watts_per_vcpu", "max_watts_per_vcpu",
          "source")
# CCF's CPU model lists (ccfcoef/cli.py's FAMILIES) → the architecture names of its output files.
# Both Skylake lists are CCF's "Skylake" row; Neoverse N1 has no row of its own in the output.
FAMILY_FILES = {
    "intel-sandybridge": "Sandy Bridge", "intel-ivybridge": "Ivy Bridge", "intel-haswell": "Haswell",
    "intel-broadwell": "Broadwell", "intel-skylake": "Skylake", "intel-skylake-server": "Skylake",
    "intel-skylake-client": "Skylake", "intel-cascadelake": "Cascade Lake", "intel-coffeelake": "Coffee Lake",
    "intel-icelake": "Ice Lake", "intel-sapphirerapids": "Sapphire Rapids",
    "intel-emeraldrapids": "Emerald Rapids", "intel-graniterapids": "Granite Rapids",
    "amd-epyc-gen1": "EPYC 1st Gen", "amd-epyc-gen2": "EPYC 2nd Gen", "amd-epyc-gen3": "EPYC 3rd Gen",
    "amd-epyc-gen4": "EPYC 4th Gen", "amd-epyc-gen5": "EPYC 5th Gen", "amd-neoverse-n1": "Neoverse N1",
}
# What each provider's instance list calls its columns.
INSTANCE_COLUMNS = {
    "aws": ("Instance type", "Instance vCPU", "Platform CPU Name"),
    "gcp": ("Machine type", "Instance vCPUs", "Microarchitecture"),
    "azure": ("Virtual Machine", "Instance vCPUs", "Microarchitecture"),
}


class UpstreamError(ValueError):
    pass


def _find(upstream: Path, name: str) -> Path:
    for candidate in (upstream / name, upstream / "data" / name, upstream / "output" / name):
        if candidate.is_file():
            return candidate
    raise UpstreamError(f"{name} is not in {upstream} (nor its data/ or output/)")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def coefficients(upstream: Path, provider: str) -> dict[str, tuple[float, float]]:
    """Architecture → (min, max) watts per vCPU, from CCF's published output."""
    out = {}
    for row in _rows(_find(upstream, f"coefficients-{provider}-use.csv")):
        out[row["Architecture"].strip()] = (float(row["Min Watts"]), float(row["Max Watts"]))
    return out


def cpu_families(upstream: Path) -> dict[str, str]:
    """CPU model (as CCF lists it: `8175M`, `E5-2686 v4`) → architecture."""
    models: dict[str, str] = {}
    for stem, architecture in FAMILY_FILES.items():
        for line in _find(upstream, f"{stem}.csv").read_text(encoding="utf-8").splitlines():
            model = line.strip()
            if model:
                models.setdefault(model, architecture)
    return models


def aws_architecture(cpu_name: str, families: dict[str, str]) -> str:
    """CCF's rule (ccfcoef/aws/coefficients.py): drop "Xeon Platinum"/"Xeon", look the model up in
    the CPU lists; Graviton names are architectures of their own."""
    model = cpu_name.replace("Xeon Platinum", "").replace("Xeon", "").strip()
    return families.get(model, model)


def provider_rows(upstream: Path, provider: str, commit: str,
                  families: dict[str, str]) -> Iterable[tuple[str, ...]]:
    watts = coefficients(upstream, provider)
    type_column, vcpu_column, arch_column = INSTANCE_COLUMNS[provider]
    instances_file = f"{provider}-instances.csv"
    types: dict[str, tuple[int, list[str]]] = {}
    for row in _rows(_find(upstream, instances_file)):
        name, raw_arch = row[type_column].strip(), row[arch_column].strip()
        if not name:
            continue
        arch = aws_architecture(raw_arch, families) if provider == "aws" else raw_arch
        vcpus = int(float(row[vcpu_column]))
        known_vcpus, archs = types.setdefault(name, (vcpus, []))
        if known_vcpus != vcpus:
            raise UpstreamError(f"{instances_file}: {name} has {known_vcpus} and {vcpus} vCPUs")
        if arch in watts and arch not in archs:
            archs.append(arch)
    source = f"ccf-coefficients@{commit[:7]}:{instances_file}+coefficients-{provider}-use.csv"
    for name, (vcpus, archs) in types.items():
        if not archs:
            continue  # microarchitecture unknown or without coefficients: a gap, never a guess
        low = fmean(watts[a][0] for a in archs)
        high = fmean(watts[a][1] for a in archs)
        yield (provider, name, str(vcpus), "|".join(archs), repr(low), repr(high), source)


def render(upstream: Path, commit: str) -> str:
    families = cpu_families(upstream)
    out = io.StringIO()
    out.write(
        "# Cloud instance power coefficients for kubejoule (docs/agent.md, \"Cloud instances\").\n"
        f"# Source: Cloud Carbon Footprint, {UPSTREAM} at commit {commit},\n"
        "# files output/coefficients-{aws,gcp,azure}-use.csv and data/{aws,gcp,azure}-instances.csv,\n"
        "# data/intel-*.csv, data/amd-*.csv; licence Apache-2.0 (as kubejoule's). Watts per vCPU are\n"
        "# CCF's SPECpower-derived minimum (idle) and maximum; several architectures: their mean.\n"
        "# Generated by tools/cloud/regenerate.py: do not edit by hand.\n"
    )
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for provider in PROVIDERS:
        writer.writerows(sorted(provider_rows(upstream, provider, commit, families), key=lambda r: r[1]))
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=Path, required=True, help="ccf-coefficients checkout (or flat folder)")
    parser.add_argument("--commit", required=True, help="the upstream commit those files are from")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[2] / "common/cloud/instances.csv")
    args = parser.parse_args(argv)
    try:
        text = render(args.upstream, args.commit)
    except (UpstreamError, KeyError, ValueError) as exc:
        print(f"regenerate: {exc}", file=sys.stderr)
        return 1
    if str(args.out) == "-":
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
