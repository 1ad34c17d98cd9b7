"""The documentation site builds with `mkdocs build --strict` (no broken link or anchor, no page
outside the navigation: mkdocs.yml's `validation`), and the README stays a front page: at most
250 lines, and neither it nor a page of the site names the project's own issues ("issue 23"),
which mean nothing to a user (docs/DESIGN.md, the contributors' page, and CHANGELOG.md, where the
history lives, may)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

from benchmarks.harness.components import component_missing

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250
ISSUE_NUMBER = re.compile(r"\bissues? ?#?\d+", re.IGNORECASE)
MAY_NAME_ISSUES = {REPO / "docs" / "DESIGN.md", REPO / "CHANGELOG.md"}


def test_the_site_builds_strict_without_warnings(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        component_missing("mkdocs and mkdocs-material are not installed (the `dev` extra)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env,
    )
    warnings = [line for line in proc.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert proc.returncode == 0 and not warnings, "mkdocs build --strict failed:\n" + "\n".join(
        warnings or proc.stderr.splitlines()[-20:])
    assert (tmp_path / "site" / "getting-started" / "index.html").is_file()
    changelog = (tmp_path / "site" / "changelog" / "index.html").read_text()
    assert "Keep a Changelog" in changelog, "docs/changelog.md no longer includes CHANGELOG.md"


def test_the_readme_is_a_front_page() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move detail to docs/"


def test_user_facing_pages_name_no_issue_numbers() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    found = [
        f"{page.relative_to(REPO)}:{number}: {match.group(0)!r}"
        for page in pages if page not in MAY_NAME_ISSUES
        for number, line in enumerate(page.read_text().splitlines(), 1)
        for match in ISSUE_NUMBER.finditer(line)
    ]
    assert not found, "issue numbers in user-facing pages (say what changed; history goes to CHANGELOG.md):\n" + "\n".join(found)


def test_the_changelog_keeps_its_form() -> None:
    """Keep a Changelog 1.1.0: a title, an Unreleased section, and only its change types."""
    text = (REPO / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    assert "## [Unreleased]" in text
    types = set(re.findall(r"(?m)^### (.+)$", text))
    assert types <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, types
