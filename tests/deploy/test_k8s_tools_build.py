"""tools/k8s/build.sh's cache, with a stand-in `go` on PATH (no Go needed, a second or two): each
component's binary is keyed by its own module, its recipe and the Go version, so adding or
re-pinning one component builds that one alone and links the others into the new --bin-dir;
a failed build names the module, the command and the log's last lines and leaves no binary. The
real builds are what the e2e tests run on (tests/e2e)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REAL_K8S_DOC = ROOT / "docs" / "how-to" / "real-kubernetes.md"

# Records each build's -o path and writes a small "binary" there; fails for a package named in
# $FAKE_GO_FAIL. `go env GOVERSION GOOS GOARCH` answers like Go does.
FAKE_GO = """#!/bin/sh
if [ "$1" = env ]; then printf 'go1.26.8\\nlinux\\namd64\\n'; exit 0; fi
out=""; last=""
while [ $# -gt 0 ]; do
  case "$1" in -o) out=$2; shift ;; esac
  last=$1; shift
done
if [ -n "$FAKE_GO_FAIL" ] && [ "$last" = "$FAKE_GO_FAIL" ]; then echo "cannot find module providing package $last" >&2; exit 1; fi
echo "$last" >> "$FAKE_GO_LOG"
printf '#!/bin/sh\\necho %s\\n' "$last" > "$out"; chmod +x "$out"
"""


def _tools(tmp: Path) -> Path:
    """A copy of tools/k8s whose build.sh and modules can be changed."""
    copy = tmp / "k8s"
    shutil.copytree(ROOT / "tools/k8s", copy)
    return copy


def _run(tools: Path, tmp: Path, *args: str, fail: str = "") -> subprocess.CompletedProcess[str]:
    fake = tmp / "fakebin"
    fake.mkdir(exist_ok=True)
    (fake / "go").write_text(FAKE_GO)
    (fake / "go").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "KUBEJOULE_K8S_CACHE": str(tmp / "cache"),
           "FAKE_GO_LOG": str(tmp / "go.log"), "FAKE_GO_FAIL": fail}
    return subprocess.run([str(tools / "build.sh"), *args], capture_output=True, text=True, env=env, timeout=60)


def _built(tmp: Path) -> list[str]:
    log = tmp / "go.log"
    lines = log.read_text().split() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def test_list_names_every_component_with_its_pinned_version() -> None:
    listed = subprocess.run([str(ROOT / "tools/k8s/build.sh"), "--list"], capture_output=True, text=True,
                            timeout=30, check=True).stdout.splitlines()
    names = [line.split()[0] for line in listed]
    assert names == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "helm",
                     "metrics-server"]
    assert "metrics-server sigs.k8s.io/metrics-server v0.8.0" in listed
    page = REAL_K8S_DOC.read_text()
    for line in listed:  # the docs' table of the components ("Real Kubernetes on loopback") says the same
        name, module, version = line.split()
        assert f"`{name}`" in page and f"`{module}`" in page and version in page, line


def test_a_new_component_builds_alone_and_the_others_are_linked(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    first = _run(tools, tmp_path)
    assert first.returncode == 0, first.stderr
    assert len(_built(tmp_path)) == 7
    bin_dir = Path(_run(tools, tmp_path, "--bin-dir").stdout.strip())
    assert sorted(p.name for p in bin_dir.iterdir()) == sorted(
        ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "helm", "metrics-server"])
    assert _run(tools, tmp_path).returncode == 0 and _built(tmp_path) == []  # all there: nothing to do

    # A comment in the script changes no recipe: the same directory.
    script = tools / "build.sh"
    script.write_text(script.read_text() + "\n# a comment\n")
    assert Path(_run(tools, tmp_path, "--bin-dir").stdout.strip()) == bin_dir

    # Re-pinning one module (its go.sum here) rebuilds its binary alone, into a new --bin-dir that
    # also holds the others, the very files (hard links) the old one holds.
    (tools / "kwok/go.sum").write_text((tools / "kwok/go.sum").read_text() + "\n")
    assert _run(tools, tmp_path).returncode == 0
    assert _built(tmp_path) == ["sigs.k8s.io/kwok/cmd/kwok"]
    new_dir = Path(_run(tools, tmp_path, "--bin-dir").stdout.strip())
    assert new_dir != bin_dir
    assert (new_dir / "kube-apiserver").stat().st_ino == (bin_dir / "kube-apiserver").stat().st_ino
    assert (new_dir / "kwok").stat().st_ino != (bin_dir / "kwok").stat().st_ino

    # Dropping a component from the list: a new directory, linked, nothing built.
    script.write_text(script.read_text().replace('  "helm helm helm.sh/helm/v4/cmd/helm helm"\n', ""))
    assert _run(tools, tmp_path).returncode == 0 and _built(tmp_path) == []
    assert not (Path(_run(tools, tmp_path, "--bin-dir").stdout.strip()) / "helm").exists()


def test_a_failed_build_names_module_command_and_log_and_leaves_no_binary(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    failed = _run(tools, tmp_path, fail="sigs.k8s.io/metrics-server/cmd/metrics-server")
    assert failed.returncode == 1
    assert "building metrics-server failed (module sigs.k8s.io/metrics-server v0.8.0)" in failed.stderr
    assert "command: (cd tools/k8s/metrics-server && CGO_ENABLED=0 go build" in failed.stderr
    assert "cannot find module providing package sigs.k8s.io/metrics-server/cmd/metrics-server" in failed.stderr
    bin_dir = Path(_run(tools, tmp_path, "--bin-dir").stdout.strip())
    assert not (bin_dir / "metrics-server").exists() and (bin_dir / "helm").exists()
    assert not list((tmp_path / "cache" / "store").glob("metrics-server-*/metrics-server"))
    assert not list((tmp_path / "cache").rglob(".*.tmp*"))
