"""`kubejoule-rl cluster up --autoscaler` (rl/cmd/cluster_cli.py) without a control plane: bad
input is a usage error (exit 2) said before anything starts — an empty --bin-dir would otherwise
fail later, with exit 1 — and the binary comes from --ca-bin or $KUBEJOULE_CA_BIN."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rl.cluster.autoscaler import CA_BIN_ENV
from rl.cluster.controlplane import Cluster, ClusterOptions
from rl.cmd import cli, cluster_cli

NODES = "- {name: scaled, count: 2, cpu_cores: 8, memory_gib: 16, power: {idle_watts: 50, max_watts: 150}}\n"


@pytest.fixture
def up_args(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.delenv(CA_BIN_ENV, raising=False)
    (tmp_path / "bin").mkdir()
    (tmp_path / "nodes.yaml").write_text(NODES)
    return ["cluster", "up", "--dir", str(tmp_path / "plane"), "--bin-dir", str(tmp_path / "bin"), "--autoscaler"]


def test_autoscaler_without_a_binary_names_the_flag_the_403_and_the_build_script(
    up_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([*up_args, "--nodes", str(tmp_path / "nodes.yaml")]) == 2
    err = capsys.readouterr().err
    assert "--ca-bin" in err and f"${CA_BIN_ENV}" in err
    assert "403" in err and "tools/k8s/build-ca-from-source.sh" in err
    assert not (tmp_path / "plane").exists()


def test_a_ca_bin_naming_no_file_or_no_nodes_is_a_usage_error(
    up_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([*up_args, "--nodes", str(tmp_path / "nodes.yaml"), "--ca-bin", str(tmp_path / "nope")]) == 2
    assert f"--ca-bin {tmp_path / 'nope'}: no such file" in capsys.readouterr().err
    binary = tmp_path / "cluster-autoscaler"
    binary.write_text("")
    binary.chmod(0o755)
    assert cli.main([*up_args, "--ca-bin", str(binary)]) == 2
    assert "--autoscaler needs --nodes" in capsys.readouterr().err
    assert not (tmp_path / "plane").exists()


def test_the_binary_defaults_to_the_environment_and_the_kubeconfig_is_printed_last(
    up_args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[ClusterOptions, Any]] = []

    def up_autoscaled(options: ClusterOptions, ca_bin: Path | None, progress: Any) -> Cluster:
        seen.append((options, ca_bin))
        return Cluster(options.directory, api_port=6443)

    monkeypatch.setattr(cluster_cli, "up_autoscaled", up_autoscaled)
    monkeypatch.setenv(CA_BIN_ENV, "/opt/ca/cluster-autoscaler")
    assert cli.main([*up_args, "--nodes", str(tmp_path / "nodes.yaml")]) == 0
    options, ca_bin = seen[0]
    assert ca_bin == Path("/opt/ca/cluster-autoscaler") and options.nodes_file == tmp_path / "nodes.yaml"
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(tmp_path / "plane" / "kubeconfig")
