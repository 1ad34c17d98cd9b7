"""daemonset/images/locks/: each image's Python dependencies, pinned with hashes, match
pyproject.toml — every dependency of the image's extras is in its lock at a version the
requirement allows, the lock claims no other package as a direct one, every entry carries a
sha256 hash, and the Dockerfile installs from the lock with --require-hashes."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "daemonset" / "images"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = {"agent": (), "scheduler": ("scheduler",), "rl": ("scheduler", "sim")}
ENVIRONMENT = {"python_version": "3.11", "python_full_version": "3.11.9", "sys_platform": "linux",
               "platform_machine": "x86_64", "platform_system": "Linux", "os_name": "posix",
               "implementation_name": "cpython", "platform_python_implementation": "CPython"}
DIRECT = "kubejoule (pyproject.toml)"


@dataclass
class Entry:
    name: str
    version: Version
    marker: Marker | None
    hashes: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)


def read_lock(path: Path) -> list[Entry]:
    entries: list[Entry] = []
    via_block = False
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if not line.startswith(" "):
            spec = line.rstrip(" \\")
            requirement, _, marker = spec.partition(";")
            name, _, version = requirement.strip().partition("==")
            entries.append(Entry(canonicalize_name(name), Version(version), Marker(marker) if marker.strip() else None))
            via_block = False
            continue
        text = line.strip().rstrip(" \\")
        if text.startswith("--hash="):
            entries[-1].hashes.append(text.removeprefix("--hash="))
        elif text.startswith("# via"):
            rest = text.removeprefix("# via").strip()
            via_block = not rest
            if rest:
                entries[-1].via.append(rest)
        elif via_block and text.startswith("#"):
            entries[-1].via.append(text.lstrip("# ").strip())
    return entries


def direct_requirements(image: str) -> list[Requirement]:
    project = PYPROJECT["project"]
    texts = list(project["dependencies"])
    for extra in EXTRAS[image]:
        texts += project["optional-dependencies"][extra]
    return [Requirement(t) for t in texts]


@pytest.mark.parametrize("image", list(EXTRAS))
def test_the_lock_matches_pyproject(image: str) -> None:
    entries = read_lock(IMAGES / "locks" / f"{image}.txt")
    assert entries, image
    active = [e for e in entries if e.marker is None or e.marker.evaluate(ENVIRONMENT)]
    pinned = {e.name: e.version for e in active}
    assert len(pinned) == len(active), "one version per package for the image's Python"
    wanted = direct_requirements(image)
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{image}: {requirement} is not in its lock (run `make locks`)"
        assert requirement.specifier.contains(pinned[name], prereleases=True), \
            f"{image}: {name}=={pinned[name]} does not satisfy {requirement} (run `make locks`)"
    claimed = {e.name for e in entries if DIRECT in e.via}
    assert claimed == {canonicalize_name(r.name) for r in wanted}, f"{image}: the lock's direct dependencies"
    for entry in entries:
        assert entry.via, f"{image}: {entry.name} is in the lock for no reason"
        assert entry.hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in entry.hashes), entry.name


@pytest.mark.parametrize("image", list(EXTRAS))
def test_the_image_installs_from_its_lock_with_hashes(image: str) -> None:
    dockerfile = (IMAGES / f"{image}.Dockerfile").read_text()
    assert f"COPY daemonset/images/locks/{image}.txt ./requirements.lock" in dockerfile
    assert "--require-hashes" in dockerfile and "-r requirements.lock" in dockerfile
    assert "--no-deps" in dockerfile  # the package itself adds nothing unlocked
    assert f"!daemonset/images/locks/{image}.txt" in (IMAGES / f"{image}.Dockerfile.dockerignore").read_text()
