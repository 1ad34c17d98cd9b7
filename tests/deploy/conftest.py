"""Fixtures shared by the tests of daemonset/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.deploy_kustomize import DAEMONSET, user_kustomization
from tests.helpers.deploy_manifests import COMPONENTS, TARGETS


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    name = request.param
    if name == "intel+all-components":
        return user_kustomization(tmp_path, "overlays/intel", COMPONENTS)
    return DAEMONSET / name

