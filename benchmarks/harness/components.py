"""Real components the tests use (Prometheus, promtool, shellcheck, kubectl, openssl, iproute2, …),
and what a test does when one is missing.

On a developer's machine a missing component skips the test with its reason (pytest prints the
reasons: `-rs` is in the project's addopts). In CI (`CI=true`, as GitHub Actions, GitLab CI and
most runners set it) a missing component FAILS the test: a run that skipped its real-component
tests would look green while testing nothing real. Conditions of the machine rather than
installed software (not root, a kernel with RAPL) stay skips everywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def component_missing(reason: str) -> NoReturn:
    """Skip the calling test with `reason`; in CI fail it instead."""
    if in_ci():
        pytest.fail(f"{reason} — CI=true, so a missing real component fails the run instead of skipping", pytrace=False)
    pytest.skip(reason)


def require_binary(name: str, reason: str | None = None) -> str:
    """The path of command `name`, or skip (in CI: fail) the calling test with the reason."""
    path = shutil.which(name)
    if path is None:
        component_missing(reason or f"`{name}` is not installed")
    return path


def k8s_bin_dir() -> Path:
    """Where the real Kubernetes components are: $KUBEJOULE_K8S_BIN (the Makefile sets it), else
    the directory tools/k8s/build.sh builds them into (binaries there or not: the caller checks)."""
    from_env = os.environ.get("KUBEJOULE_K8S_BIN")
    if from_env:
        return Path(from_env)
    build = Path(__file__).resolve().parents[2] / "tools/k8s/build.sh"
    out = subprocess.run([str(build), "--bin-dir"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())
