"""The agent package's boundaries at run time and in its files. Which modules it may import
(not torch, fastapi or the scheduler; `kubernetes` only in agent/kube/client.py) is checked statically
by import-linter's contracts in pyproject.toml (`make lint`); here: nothing in it depends on the
test fixture trees, and importing it loads none of what its image leaves out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.agent_cli import REPO

AGENT = REPO / "agent"
# Packages the agent image must not need: the scheduler's and rl's, and the tests.
FORBIDDEN = {"torch", "fastapi", "uvicorn", "starlette", "httpx", "gymnasium", "matplotlib", "scheduler", "rl", "tests"}


def agent_sources() -> list[Path]:
    sources = sorted(AGENT.rglob("*.py"))
    assert len(sources) > 20  # the walk found the package
    return sources


def test_nothing_in_the_agent_refers_to_the_fixture_trees() -> None:
    for path in [*agent_sources(), *AGENT.rglob("*.yaml")]:
        text = path.read_text()
        assert "fixtures" not in text and "tests/" not in text, path


def test_importing_every_agent_module_loads_none_of_them() -> None:
    """The same at run time, in a fresh interpreter: every agent module imported, then
    sys.modules checked (catches imports the AST scan cannot see, e.g. via a dependency)."""
    code = (
        "import importlib, json, pkgutil, sys, agent\n"
        "for m in pkgutil.walk_packages(agent.__path__, 'agent.'):\n"
        "    importlib.import_module(m.name)\n"
        "print(json.dumps(sorted({n.split('.')[0] for n in sys.modules})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout))
    assert "agent" in loaded and "prometheus_client" in loaded
    assert loaded & FORBIDDEN == set()


def test_the_running_agent_does_not_load_numpy() -> None:
    """numpy is for calibration fits and the scheduler's batch formulas (common/curves.py imports it
    inside its array functions): `kubejoule-agent run` without them is about 20 MB lighter."""
    code = (
        "import json, sys\n"
        "import agent.cmd.cli, agent.cmd.server, agent.monitor.sampler, agent.exporter.prometheus, agent.kube.client, agent.kube.metrics_server, agent.device.network\n"
        "print(json.dumps('numpy' in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) is False
