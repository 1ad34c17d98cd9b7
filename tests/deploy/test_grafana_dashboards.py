"""grafana/: the dashboards are what the builder (grafana/builder, Grafana's Foundation SDK) writes,
well-formed for Grafana, and every query only uses the variables the dashboard defines. (That
every query returns data from a real Prometheus is test_grafana_live.py.)"""

from __future__ import annotations

import json
import re
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml

from grafana import builder

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "grafana"
BUILTIN_VARIABLES = {"__range", "__rate_interval", "__interval"}
VARIABLE_RE = re.compile(r"\$\{?(\w+)\}?")
SDK = "grafana-foundation-sdk"


def dashboards() -> dict[str, dict[str, Any]]:
    return {
        p.name: json.loads(p.read_text()) for p in sorted((GRAFANA / "dashboards").glob("*.json"))
    }


def test_the_installed_sdk_is_the_pinned_one() -> None:
    """The builder's output follows the SDK's version (its defaults, its schemaVersion): the
    byte-for-byte comparison below means something only with the version pyproject.toml pins."""
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    (pin,) = [r for r in dev if r.startswith(SDK)]
    assert pin == f"{SDK}=={version(SDK)}", f"installed {version(SDK)}; run pip install '{pin}'"


@pytest.mark.parametrize("directory", [builder.DASHBOARD_DIR, builder.CHART_DASHBOARD_DIR])
def test_json_files_are_exactly_what_the_builder_writes(directory: Path) -> None:
    expected = {name: text.encode() for name, text in builder.files().items()}
    on_disk = {p.name: p.read_bytes() for p in directory.glob("*.json")}
    assert on_disk.keys() == expected.keys()
    stale = sorted(name for name in expected if on_disk[name] != expected[name])
    assert not stale, f"{stale} in {directory} are stale: run `{builder.COMMAND}` and commit the result"


def test_the_four_dashboards_exist_with_unique_uids() -> None:
    found = dashboards()
    titles = {d["title"] for d in found.values()}
    assert titles == {
        "kubejoule / Cluster energy",
        "kubejoule / Node detail",
        "kubejoule / Workloads",
        "kubejoule / Scheduler",
    }
    uids = [d["uid"] for d in found.values()]
    assert len(set(uids)) == len(uids)
    assert all(len(uid) <= 40 for uid in uids)  # Grafana's uid limit


@pytest.mark.parametrize("name", sorted(dashboards()))
def test_panels_are_laid_out_and_wired_to_the_datasource_variable(name: str) -> None:
    dashboard = dashboards()[name]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (
        variables["datasource"]["type"] == "datasource"
        and variables["datasource"]["query"] == "prometheus"
    )
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(set(ids)) == len(ids)
    occupied: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24
        cells = {
            (grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"]) for dy in range(grid["h"])
        }
        assert not cells & occupied, f"panel {panel['title']!r} overlaps another"
        occupied |= cells
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        assert panel["description"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
            assert "kubejoule_" in target["expr"]
            used = set(VARIABLE_RE.findall(target["expr"]))
            assert used <= (set(variables) | BUILTIN_VARIABLES) - {"datasource"}, (
                panel["title"],
                used,
            )


@pytest.mark.parametrize("name", sorted(dashboards()))
def test_variables_query_kubejoule_labels(name: str) -> None:
    for variable in dashboards()[name]["templating"]["list"]:
        if variable["type"] != "query":
            continue
        assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert re.fullmatch(r"label_values\(kubejoule_\w+, \w+\)", variable["query"]["query"])


def test_power_is_never_faked_as_zero() -> None:
    for dashboard in dashboards().values():
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                assert "vector(0)" not in target["expr"] and "or on" not in target["expr"], panel[
                    "title"
                ]


def test_energy_comes_from_counters_not_integrated_watts() -> None:
    for dashboard in dashboards().values():
        for panel in dashboard["panels"]:
            if panel["fieldConfig"]["defaults"]["unit"] in ("joule", "kwatth", "watth"):
                for target in panel["targets"]:
                    assert "_joules_total" in target["expr"] and "increase(" in target["expr"]
                    assert "_over_time(" not in target["expr"]


def test_provisioning_files_point_at_the_dashboards_and_a_prometheus() -> None:
    provider = yaml.safe_load(
        (GRAFANA / "provisioning" / "dashboards" / "kubejoule.yaml").read_text()
    )
    assert provider["apiVersion"] == 1
    (entry,) = provider["providers"]
    assert entry["type"] == "file" and entry["options"]["path"]
    datasources = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "prometheus.yaml").read_text()
    )
    (source,) = datasources["datasources"]
    assert source["type"] == "prometheus" and source["url"].startswith("http")
