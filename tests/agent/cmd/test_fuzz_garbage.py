"""Generated garbage (issue 17, item 3): any bytes in one of the files the agent reads give a
valid record and no wrong number (the verdict of tests/agent/cmd/test_fuzz_corpus.py)."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.agent_cli import check_record, strict_json
from tests.helpers.fuzz_replay import (
    BASE,
    DRAM,
    RAPL,
    WEB_CPU,
    Case,
    Outcome,
    violations,
)

# -- generated garbage: any bytes in one of the files the agent reads ------------------------

TARGETS = {
    "package energy_uj": f"{RAPL}/energy_uj",
    "package max_energy_range_uj": f"{RAPL}/max_energy_range_uj",
    "package constraint_0_max_power_uw": f"{RAPL}/constraint_0_max_power_uw",
    "dram energy_uj": f"{DRAM}/energy_uj",
    "dram name": f"{DRAM}/name",
    "/proc/stat": "proc/stat",
    "pod cpu.stat": WEB_CPU,
    "VM stat": "proc/2403/stat",
    "VM cmdline": "proc/2403/cmdline",
}


def looks_valid(target: str, data: bytes) -> bool:
    """Whether DATA could be a true reading of TARGET (then a different number is no error)."""
    text = data.strip()
    if target == "dram name":  # a word is a zone of another kind (not in node power, by design)
        return re.fullmatch(rb"[A-Za-z0-9][A-Za-z0-9_.-]*", text) is not None
    if target == "/proc/stat":
        first = data.split(b"\n", 1)[0].split()
        return first[:1] == [b"cpu"] and len(first) >= 9 and all(f.isdigit() for f in first[1:9])
    if target == "pod cpu.stat":
        return b"usage_usec " in data
    if target.startswith("VM"):
        return True  # a VM's CPU and name may be anything: only the structural verdict
    return text.isdigit()


@pytest.fixture(scope="module")
def scratch_trees() -> Iterator[tuple[Path, Path]]:
    base = Path(tempfile.mkdtemp(prefix="kj-fuzz-gen-"))
    try:
        shutil.copytree(BASE / "before", base / "before", symlinks=True)
        shutil.copytree(BASE / "after", base / "after", symlinks=True)
        yield base / "before", base / "after"
    finally:
        shutil.rmtree(base)


def replay_in_process(before: Path, after: Path) -> Outcome:
    """The replay command in this process (fast enough for generated examples; a hang is
    caught by hypothesis' deadline, a crash raises)."""
    from agent.cmd import cli
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["replay", str(before), str(after), "--interval", "2", "--json", "--node", "n1"])
    return Outcome(code, out.getvalue(), err.getvalue())


GARBAGE = st.one_of(
    st.binary(max_size=48),
    st.text(alphabet="0123456789-+.eE xinfa\n\t", max_size=32).map(str.encode),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70).map(lambda n: f"{n}\n".encode()),
)


@given(target=st.sampled_from(sorted(TARGETS)), data=GARBAGE, tree=st.sampled_from(["before", "after"]))
@settings(max_examples=40, deadline=10_000, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_bytes_in_any_file_give_a_valid_record_and_no_wrong_number(
    scratch_trees: tuple[Path, Path], truth: dict[str, Any], target: str, data: bytes, tree: str
) -> None:
    before, after = scratch_trees
    path = (before if tree == "before" else after) / TARGETS[target]
    original = path.read_bytes()
    path.write_bytes(data)
    try:
        outcome = replay_in_process(before, after)
    finally:
        path.write_bytes(original)
    assert outcome.code == 0, outcome.err
    record = strict_json(outcome.out)
    check_record(record)
    if target == "package constraint_0_max_power_uw":
        # a hint: whatever it holds, the intact counters' measurement stands, exactly
        assert violations(Case(lambda _b, _a: None, None, (), True), outcome, truth) == []
        return
    if looks_valid(target, data):
        return
    case = Case(lambda _b, _a: None, None, (), None)  # no wrong number, whatever was lost
    assert violations(case, outcome, truth) == []
