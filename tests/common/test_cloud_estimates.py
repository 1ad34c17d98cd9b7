"""Cloud instances' curves from Cloud Carbon Footprint's coefficients: the shipped file is what
tools/cloud/regenerate.py makes from the upstream files, five types across three providers match
the cited figures, and an unknown type is an error naming it, never a neighbour's curve."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

from common.cloud_estimates import (
    DATA_FILE,
    CloudEstimateError,
    load_table,
    lookup,
    node_instance_type,
    parse_instance_type,
    provider_from_id,
)

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO / "tests" / "fixtures" / "ccf-coefficients"
SCRIPT = REPO / "tools" / "cloud" / "regenerate.py"

# The cited figures, read by hand from ccf-coefficients at commit b0032d9 (the shipped file's
# header): the instance list's vCPUs and CPU, and the output file's Min/Max Watts per vCPU of
# that architecture. (provider, type, vCPUs, architectures, [(min, max) per architecture])
CITED = [
    # data/aws-instances.csv "m5.xlarge,…,4,96,Xeon Platinum 8175M"; 8175M is in
    # data/intel-skylake-server.csv; output/coefficients-aws-use.csv "19,Skylake,0.61298…,4.10417…"
    ("aws", "m5.xlarge", 4, ("Skylake",), [(0.6129888539040325, 4.104170352960531)]),
    # "c6g.large,…,2,64,Graviton2"; coefficients-aws-use.csv "10,Graviton2,0.47426…,1.69296…"
    ("aws", "c6g.large", 2, ("Graviton2",), [(0.4742621527777777, 1.6929615162037035)]),
    # data/gcp-instances.csv "n2,n2-standard-4,Cascade Lake,4,…"; coefficients-gcp-use.csv row 1
    ("gcp", "n2-standard-4", 4, ("Cascade Lake",), [(0.6902978319127387, 3.754854273784877)]),
    # "n2d,n2d-standard-8,EPYC 2nd Gen,8,…"; coefficients-gcp-use.csv row 2
    ("gcp", "n2d-standard-8", 8, ("EPYC 2nd Gen",), [(0.4742621527777777, 1.575187293981481)]),
    # data/azure-instances.csv "…,D8as v4,EPYC 2nd Gen,8,…"; coefficients-azure-use.csv row 5
    ("azure", "D8as v4", 8, ("EPYC 2nd Gen",), [(0.4742621527777778, 1.6929615162037037)]),
    # "F4s v2" on Skylake and Cascade Lake (two rows): the mean of coefficients-azure-use.csv rows 3, 2
    ("azure", "F4s v2", 4, ("Skylake", "Cascade Lake"),
     [(0.6446044454253452, 4.193436438541878), (0.6389493581523519, 3.9673047343937564)]),
]


def shipped_commit() -> str:
    match = re.search(r"at commit ([0-9a-f]{40})", DATA_FILE.read_text(encoding="utf-8"))
    assert match, "the data file's header names no upstream commit"
    return match.group(1)


def test_the_shipped_file_is_what_the_script_makes_from_the_upstream_files() -> None:
    made = subprocess.run(
        [sys.executable, str(SCRIPT), "--upstream", str(UPSTREAM), "--commit", shipped_commit(), "--out", "-"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    assert made == DATA_FILE.read_text(encoding="utf-8"), (
        "common/cloud/instances.csv differs from tools/cloud/regenerate.py's output: regenerate it"
    )


def test_the_file_names_its_source_and_licence_and_every_row_cites_it() -> None:
    text = DATA_FILE.read_text(encoding="utf-8")
    assert "cloud-carbon-footprint/ccf-coefficients" in text and "Apache-2.0" in text
    short = shipped_commit()[:7]
    rows = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    assert {r["provider"] for r in rows} == {"aws", "gcp", "azure"}
    assert all(r["source"] == f"ccf-coefficients@{short}:{r['provider']}-instances.csv+"
               f"coefficients-{r['provider']}-use.csv" for r in rows)


def upstream_coefficient(provider: str, architecture: str) -> tuple[float, float]:
    with (UPSTREAM / f"coefficients-{provider}-use.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["Architecture"] == architecture:
                return float(row["Min Watts"]), float(row["Max Watts"])
    raise AssertionError(f"{architecture} is not in coefficients-{provider}-use.csv")


@pytest.mark.parametrize(("provider", "name", "vcpus", "archs", "cited"), CITED, ids=lambda v: str(v))
def test_idle_and_max_are_vcpus_times_the_cited_watts_per_vcpu(
    provider: str, name: str, vcpus: int, archs: tuple[str, ...], cited: list[tuple[float, float]]
) -> None:
    # the citations above are the upstream file's figures
    assert [upstream_coefficient(provider, a) for a in archs] == cited
    entry = lookup(provider, name)
    low = sum(c[0] for c in cited) / len(cited)
    high = sum(c[1] for c in cited) / len(cited)
    assert (entry.vcpus, entry.architectures) == (vcpus, archs)
    curve = entry.curve()
    assert curve.watts(0.0) == pytest.approx(vcpus * low, rel=1e-12)
    assert curve.watts(1.0) == pytest.approx(vcpus * high, rel=1e-12)
    assert curve.watts(0.5) == pytest.approx(vcpus * (low + high) / 2, rel=1e-12)  # CCF's linear model
    profile = entry.profile()
    assert profile.estimate == f"ccf:{provider}:{name}"
    assert profile.cpu_idle_watts == pytest.approx(vcpus * low)
    assert profile.estimate_cpu_watts(1.0) == pytest.approx(vcpus * high)


def test_five_types_across_three_providers_are_cited() -> None:
    assert len(CITED) >= 5 and {c[0] for c in CITED} == {"aws", "gcp", "azure"}


@pytest.mark.parametrize(("provider", "name"), [
    ("aws", "m99.huge"),
    ("aws", "a1.medium"),  # AWS's first Graviton: CCF publishes no coefficients for it
    ("azure", "A1 v2"),  # microarchitecture "Unknown" upstream
    ("gcp", "m5.xlarge"),  # another provider's type
])
def test_an_unknown_type_is_an_error_naming_it(provider: str, name: str) -> None:
    with pytest.raises(CloudEstimateError, match=re.escape(f"{provider}:{name}")):
        lookup(provider, name)


def test_azure_label_form_and_case_find_the_same_row() -> None:
    assert lookup("azure", "Standard_D8as_v4") == lookup("azure", "D8as v4")
    assert lookup("aws", "M5.XLarge") == lookup("aws", "m5.xlarge")


@pytest.mark.parametrize("text", ["m5.xlarge", "aws:", "ibm:bx2-4x16", ":m5.xlarge"])
def test_a_malformed_instance_type_is_refused(text: str) -> None:
    with pytest.raises(CloudEstimateError, match="PROVIDER:TYPE|provider must be"):
        parse_instance_type(text)


def test_provider_ids_of_the_three_clouds() -> None:
    assert provider_from_id("aws:///eu-west-1a/i-0123456789abcdef0") == "aws"
    assert provider_from_id("gce://my-project/europe-west1-b/node-1") == "gcp"
    assert provider_from_id("azure:///subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/"
                            "virtualMachines/vm") == "azure"
    assert provider_from_id("kind://docker/kind/kind-control-plane") is None
    assert provider_from_id(None) is None and provider_from_id("") is None


def test_a_nodes_type_needs_both_a_cloud_provider_id_and_the_label() -> None:
    labels = {"node.kubernetes.io/instance-type": "m5.xlarge"}
    assert node_instance_type({"metadata": {"labels": labels}, "spec": {"providerID": "aws:///a/i-1"}}) == \
        ("aws", "m5.xlarge")
    assert node_instance_type({"metadata": {"labels": labels}, "spec": {}}) is None  # bare metal
    assert node_instance_type({"metadata": {"labels": {}}, "spec": {"providerID": "aws:///a/i-1"}}) is None
    old = {"beta.kubernetes.io/instance-type": "n2-standard-4"}
    assert node_instance_type({"metadata": {"labels": old}, "spec": {"providerID": "gce://p/z/n"}}) == \
        ("gcp", "n2-standard-4")


def test_a_malformed_data_file_is_an_error_naming_the_row(tmp_path: Path) -> None:
    bad = tmp_path / "instances.csv"
    bad.write_text("# header\nprovider,instance_type,vcpus,architectures,min_watts_per_vcpu,max_watts_per_vcpu,"
                   "source\naws,m5.xlarge,four,Skylake,0.6,4.1,x\n")
    with pytest.raises(CloudEstimateError, match="row 2"):
        load_table(bad)
