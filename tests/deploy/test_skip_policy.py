"""The suite's policy for missing real components (benchmarks/harness/components.py): skip with the
reason on a developer's machine, fail in CI (`CI=true`); and pytest lists skip reasons."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from benchmarks.harness.components import require_binary

ROOT = Path(__file__).resolve().parents[2]
MISSING = "kubejoule-no-such-command"


def test_a_missing_component_skips_with_its_reason_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="the reason"):
        require_binary(MISSING, "the reason")


@pytest.mark.parametrize("value", ["true", "True", "1"])
def test_a_missing_component_fails_in_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="the reason.*CI=true"):
        require_binary(MISSING, "the reason")


def test_a_present_component_is_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert Path(require_binary("sh")).name == "sh"


def test_a_test_run_in_ci_reports_the_missing_component_as_a_failure(tmp_path: Path) -> None:
    """End to end: pytest itself, on a test that needs a command that is not there."""
    (tmp_path / "test_needs.py").write_text(
        "from benchmarks.harness.components import require_binary\n\n"
        f"def test_needs():\n    require_binary({MISSING!r}, 'needs the thing')\n"
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(tmp_path)]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    local = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert local.returncode == 0 and "SKIPPED" in local.stdout and "needs the thing" in local.stdout
    ci = subprocess.run(command, capture_output=True, text=True, env={**env, "CI": "true"}, cwd=ROOT, timeout=120)
    assert ci.returncode == 1 and "1 failed" in ci.stdout and "needs the thing" in ci.stdout


def test_pytest_prints_skip_reasons() -> None:
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert "-rs" in addopts.split()
    test_target = (ROOT / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "-rs" in test_target
