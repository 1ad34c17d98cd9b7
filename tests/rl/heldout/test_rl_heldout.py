"""The committed held-out set: its shape, that its script reproduces it, and that training code
never refers to it (the training run itself is watched in test_rl_dqn.py)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from rl.evaluation.gate_run import load_cases
from rl.simulation.traces.pool import TRAINING_SIZES

ROOT = Path(__file__).resolve().parents[3]
HELDOUT = ROOT / "rl" / "heldout"
# Modules that training runs; none may name the held-out set in code.
TRAINING_MODULES = (
    "rl/simulation/traces/pool.py",
    "rl/learning/env.py",
    "rl/simulation/traces/tracegen.py",
    "rl/learning/dqn",
    "rl/learning/mlp.py",
    "rl/learning/sim_decision_log.py",
    "rl/cmd/train_cli.py",
    "rl/cmd/pool_cli.py",
    "rl/cmd/decision_log_cli.py",
)


def test_the_committed_set_has_the_promised_shape():
    cases = load_cases(HELDOUT)
    assert len(cases) >= 30
    families = {c.name.split("-", 1)[1].rsplit("-", 1)[0] for c in cases}
    assert families == {"diurnal", "batch-services", "bursts"}
    low, high = TRAINING_SIZES
    assert any(not low <= len(c.nodes) <= high for c in cases)
    assert all(c.pods for c in cases)


def test_the_script_reproduces_the_committed_set(tmp_path):
    spec = importlib.util.spec_from_file_location("make_heldout", HELDOUT / "make_heldout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(str(tmp_path))
    committed = sorted(
        p.relative_to(HELDOUT)
        for p in HELDOUT.rglob("*")
        if p.is_file() and p.suffix in (".yaml", ".csv")
    )
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert written == committed
    for rel in written:
        assert (tmp_path / rel).read_bytes() == (HELDOUT / rel).read_bytes(), rel


def _code_strings(path: Path) -> list[str]:
    """String constants of a module, docstrings excepted."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_training_modules_never_name_the_heldout_set():
    files = []
    for entry in TRAINING_MODULES:
        path = ROOT / entry
        files += sorted(path.glob("*.py")) if path.is_dir() else [path] if path.exists() else []
    missing = [e for e in TRAINING_MODULES if not (ROOT / e).exists()]
    assert not missing, f"training modules moved: {missing}"  # else the check checks nothing
    for path in files:
        for text in _code_strings(path):
            # The directory's name (the MLP's "held_out_nodes" are nodes of its own log).
            assert "heldout" not in text.lower(), (path, text)


def test_a_validation_set_comes_from_training_seeds_clear_of_the_gates(tmp_path, capsys):
    from rl.cmd.pool_cli import main as pool_main
    from rl.simulation.traces.pool import RESERVED_SEEDS

    spec = importlib.util.spec_from_file_location("make_heldout", HELDOUT / "make_heldout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.HELDOUT_SEED_BASE in RESERVED_SEEDS
    assert module.HELDOUT_SEED_BASE + len(load_cases(HELDOUT)) - 1 in RESERVED_SEEDS
    assert pool_main(["--out", str(tmp_path / "v"), "--seed-base", "100000", "--sizes", "5"]) == 0
    cases = load_cases(tmp_path / "v")
    assert [c.name for c in cases] == ["00-diurnal-5n", "01-batch-services-5n", "02-bursts-5n"]
    assert (
        "validation case 0: seed 100000"
        in (tmp_path / "v" / "00-diurnal-5n" / "nodes.yaml").read_text()
    )
    capsys.readouterr()
    assert pool_main(["--out", str(tmp_path / "w"), "--seed-base", "899998", "--sizes", "5"]) == 2
    assert "overlap the reserved" in capsys.readouterr().err
    assert pool_main(["--out", str(tmp_path / "w"), "--seed-base", "1", "--sizes", "80"]) == 2
    assert not (tmp_path / "w").exists()
