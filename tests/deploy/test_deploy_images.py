"""The image Dockerfiles (daemonset/images/): no Docker engine here, so the tests check what the
images are built from and that the code in each image imports without what it leaves out."""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import grimp
import pytest

from tests.helpers.deploy_kustomize import build

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "daemonset" / "images"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# What each image leaves out, and so what its code must never import.
AGENT_IMAGE_EXCLUDES = (
    "torch",
    "fastapi",
    "uvicorn",
    "starlette",
    "gymnasium",
    "matplotlib",
    "scheduler",
    "rl",
    "grpc",  # the kubelet's PodResources is read with h2 (agent/device/podresources.py)
)
SCHEDULER_IMAGE_EXCLUDES = ("torch", "gymnasium", "matplotlib", "rl")


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined: list[str] = []
    pending = ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    assert not pending, f"{dockerfile}: dangling line continuation"
    result = []
    for line in joined:
        word, _, rest = line.partition(" ")
        result.append((word.upper(), rest.strip()))
    return result


def final_stage(dockerfile: Path) -> list[tuple[str, str]]:
    steps = instructions(dockerfile)
    last_from = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last_from:]


def copied_sources(dockerfile: Path) -> list[str]:
    sources = []
    for word, args in instructions(dockerfile):
        if word == "COPY" and not args.startswith("--from"):
            *src, _dest = args.split()
            sources.extend(src)
    return sources


def ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last matching pattern wins; `!` re-includes."""
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        if fnmatch.fnmatch(path, body) or fnmatch.fnmatch(path, body.replace("/**", "")):
            result = not negate
    return result


@pytest.mark.parametrize("image", ["agent", "scheduler", "rl"])
def test_copied_sources_exist_and_pass_the_dockerignore(image: str) -> None:
    dockerfile = IMAGES / f"{image}.Dockerfile"
    patterns = [
        line.strip()
        for line in (IMAGES / f"{image}.Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = copied_sources(dockerfile)
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not ignored(source, patterns), f"{source} is excluded from the build context"
    # The build context is what the image copies, nothing more (no tests, no .venv, and for the
    # agent no scheduler).
    for entry in ROOT.iterdir():
        if entry.name not in sources:
            assert ignored(entry.name, patterns), f"{entry.name} is sent to the {image} build"


def test_agent_image_installs_core_dependencies_only() -> None:
    dockerfile = IMAGES / "agent.Dockerfile"
    runs = [args for word, args in instructions(dockerfile) if word == "RUN"]
    pip_runs = [r for r in runs if "pip " in r]
    assert pip_runs and all("[" not in r and "torch" not in r for r in pip_runs)  # no extras
    assert any("pip wheel" in r and r.rstrip().endswith(" .") for r in pip_runs)
    assert copied_sources(dockerfile) == ["pyproject.toml", "README.md", "LICENSE",
                                          "daemonset/images/locks/agent.txt", "common", "agent"]
    core = " ".join(PYPROJECT["project"]["dependencies"]).lower()
    for excluded in ("torch", "fastapi", "uvicorn", "gymnasium", "nvidia-cuda", "cuda-python", "cupy"):
        assert excluded not in core  # GPUs through nvidia-ml-py: ctypes over the driver's library, no CUDA


def test_scheduler_image_installs_the_scheduler_extra_without_torch() -> None:
    dockerfile = IMAGES / "scheduler.Dockerfile"
    runs = " ".join(args for word, args in instructions(dockerfile) if word == "RUN")
    assert '".[scheduler]"' in runs and '"kubejoule[scheduler]"' in runs
    assert "torch" not in runs and "ml]" not in runs
    assert "torch" not in " ".join(PYPROJECT["project"]["optional-dependencies"]["scheduler"])
    sources = copied_sources(dockerfile)
    assert {s for s in sources if not s.startswith("common/")} == {
        "pyproject.toml",
        "README.md",
        "LICENSE",
        "daemonset/images/locks/scheduler.txt",
        "scheduler",
    }


def common_files_the_scheduler_imports() -> set[str]:
    """From the import graph (grimp, what import-linter checks): every common module the scheduler
    imports, directly or through other common modules, with the packages that hold them."""
    graph = grimp.build_graph("scheduler", "common", cache_dir=None)  # no cache in the checkout
    direct = {
        imported
        for module in graph.find_descendants("scheduler")
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.split(".")[0] == "common"
    }
    needed = set(direct)
    for module in direct:
        needed |= {m for m in graph.find_upstream_modules(module) if m.split(".")[0] == "common"}
    for module in list(needed):
        parts = module.split(".")
        needed |= {".".join(parts[:i]) for i in range(1, len(parts))}
    files = set()
    for module in needed:
        path = Path(*module.split("."))
        package = ROOT / path / "__init__.py"
        files.add(str((path / "__init__.py") if package.exists() else path.with_suffix(".py")))
    return files


# The data files a common module reads (package data): copied with it, and only with it.
COMMON_DATA = {"common/cloud_estimates.py": {"common/cloud/instances.csv"}}


def test_the_scheduler_image_copies_exactly_the_common_modules_the_scheduler_imports() -> None:
    copied = {s for s in copied_sources(IMAGES / "scheduler.Dockerfile") if s.startswith(("common", "agent"))}
    needed = common_files_the_scheduler_imports()
    assert "common/curves.py" in needed  # the graph was read
    data = set().union(*(files for module, files in COMMON_DATA.items() if module in needed))
    assert copied == needed | data


def image_context(image: str, tmp_path: Path) -> Path:
    """A directory holding exactly what the image's Dockerfile copies from the repository."""
    context = tmp_path / "context"
    context.mkdir()
    for source in copied_sources(IMAGES / f"{image}.Dockerfile"):
        if (ROOT / source).is_dir():
            shutil.copytree(
                ROOT / source, context / source, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            (context / source).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / source, context / source)
    return context


@pytest.mark.parametrize(
    ("image", "packages"),
    [
        ("agent", {"common", "agent"}),
        ("scheduler", {"common", "scheduler"}),
        ("rl", {"common", "agent", "scheduler", "rl"}),
    ],
)
def test_the_package_builds_from_what_the_image_copies(
    image: str, packages: set[str], tmp_path: Path
) -> None:
    """The wheel the Dockerfile's `pip wheel` builds, from exactly the files it copies (built
    with the same PEP 517 backend, called directly: pip adds only seconds): it builds, holds
    those packages only, and torch is never a requirement outside the `ml` extra."""
    context = image_context(image, tmp_path)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    backend = PYPROJECT["build-system"]["build-backend"]
    program = f"import importlib; importlib.import_module({backend!r}).build_wheel({str(wheels)!r})"
    result = subprocess.run(
        [sys.executable, "-c", program], cwd=context, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (wheel,) = wheels.glob("kubejoule-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = [
            line.split(":", 1)[1].strip()
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
    assert {n.split("/")[0] for n in names if not n.startswith("kubejoule-")} == packages
    # package data the code reads: the cloud instances' coefficients (agent --instance-type, scheduler curves)
    assert "common/cloud/instances.csv" in names
    assert not [r for r in requires if "torch" in r and 'extra == "ml"' not in r]


@pytest.mark.parametrize(
    ("image", "script", "user_is_root"),
    [
        ("agent", "kubejoule-agent", True),
        ("scheduler", "kubejoule-scheduler", False),
        ("rl", "kubejoule-rl", False),
    ],
)
def test_entrypoint_is_a_console_script_and_user_is_as_documented(
    image: str, script: str, user_is_root: bool
) -> None:
    stage = final_stage(IMAGES / f"{image}.Dockerfile")
    entrypoint = json.loads(next(args for word, args in stage if word == "ENTRYPOINT"))
    assert entrypoint == [script]
    assert script in PYPROJECT["project"]["scripts"]
    user = next(args for word, args in stage if word == "USER")
    assert (user.split(":")[0] == "0") is user_is_root


def test_manifests_run_the_images_entrypoints_with_known_subcommands() -> None:
    objects = build(ROOT / "daemonset" / "overlays" / "intel")
    subcommands = {"kubejoule-agent": {"run"}, "kubejoule-scheduler": {"run", "extender"}}
    for obj in objects:
        if obj["kind"] not in ("DaemonSet", "Deployment"):
            continue
        for container in obj["spec"]["template"]["spec"]["containers"]:
            assert "command" not in container  # the image's ENTRYPOINT is the program
            script = container["image"].rsplit("/", 1)[1].split(":")[0]
            assert container["args"][0] in subcommands[script]


def _import_all_with_blocked(
    package: str, blocked: tuple[str, ...], cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    program = f"""
import importlib, importlib.abc, pkgutil, sys
BLOCKED = {blocked!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is not in this image")
        return None
sys.meta_path.insert(0, Block())
package = importlib.import_module({package!r})
names = [m.name for m in pkgutil.walk_packages(package.__path__, {package!r} + ".")]
for name in sorted(names):
    importlib.import_module(name)
outside = [n for n, m in sys.modules.items() if n.split(".")[0] in ("common", "agent", "scheduler", "rl")
           and getattr(m, "__file__", None) and not m.__file__.startswith({str(cwd)!r})]
assert not outside, f"loaded from outside {str(cwd)!r}: {{outside}}"
print(len(names))
"""
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def test_agent_code_imports_without_what_its_image_leaves_out() -> None:
    result = _import_all_with_blocked("agent", AGENT_IMAGE_EXCLUDES)
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.strip()) > 5


def test_rl_image_installs_the_simulator_without_torch() -> None:
    dockerfile = IMAGES / "rl.Dockerfile"
    runs = " ".join(args for word, args in instructions(dockerfile) if word == "RUN")
    assert '".[scheduler,sim]"' in runs and '"kubejoule[scheduler,sim]"' in runs
    assert "torch" not in runs and "ml]" not in runs
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert not any(d.startswith(("torch", "gymnasium")) for d in extras["sim"] + extras["scheduler"])


def test_rl_commands_the_image_runs_import_without_torch_or_gymnasium() -> None:
    """benchmark, gate, merge and trace (training needs the `ml` extra, not in the image)."""
    program = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "gymnasium"):
            raise ImportError(f"{name} is not in this image")
        return None
sys.meta_path.insert(0, Block())
import rl.cmd.cli, rl.evaluation.parallel, rl.evaluation.shards, rl.evaluation.gate_run, rl.evaluation.results, rl.evaluation.plots
sys.exit(rl.cmd.cli.main(["scenarios"]))
"""
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "heterogeneous-autoscaler" in result.stdout


def test_scheduler_code_imports_from_its_image_files_without_torch(tmp_path: Path) -> None:
    """Every scheduler module imports from exactly the files the image copies (common/'s
    modules, no agent module), with torch, gymnasium, matplotlib and rl blocked."""
    context = image_context("scheduler", tmp_path)
    result = _import_all_with_blocked("scheduler", SCHEDULER_IMAGE_EXCLUDES, cwd=context)
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.strip()) > 5
