"""The fuzz corpus (issue 17, item 3): corrupted host trees, each with its verdict.

Every corruption class of issue 17 is applied to a copy of a workload fixture (one Intel socket,
27.5 W; four pods, a KubeVirt VM in a pod and a libvirt VM on the host; tests/fixtures/
make_workloads.py makes it) and replayed with `kubejoule-agent replay --json` in a child process
with a timeout. The verdict is the same for all of them:

* no crash: exit code 0 (no traceback);
* no hang: the child finishes within its timeout;
* strict JSON: no NaN or Infinity (parse_constant refuses them), and the record is valid
  (tests/helpers/agent_cli.check_record: schema, no negative watts, Σ pods + host + idle = node);
* a gap that says what is missing and why (its `what`, its `kind`);
* no wrong number: every number in the record is either null or exactly what the uncorrupted
  trees give (node power is never a partial sum, a pod never takes another's power), and pods
  never add up to more than the node.

"Unreadable" cases are a mode-000 file or directory read by an unprivileged user (root reads
anything): the child drops to nobody before replaying, and first checks with os.access that the
path really is unreadable to it.

Generated garbage (any bytes in one file the agent reads) is tests/agent/cmd/test_fuzz_garbage.py;
the replay and the verdict are tests/helpers/fuzz_replay.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.make_powercap import MAX_RANGE
from tests.helpers.fuzz_replay import (
    BASE,
    DRAM,
    MAX_POWER,
    NOBODY,
    PODS,
    RAPL,
    WEB_CPU,
    Case,
    Outcome,
    pod_file,
    replay_in_child,
    violations,
)


def text(path: str, value: str | bytes, tree: str = "after") -> Callable[[Path, Path], None]:
    data = value.encode() if isinstance(value, str) else value

    def corrupt(before: Path, after: Path) -> None:
        (after if tree == "after" else before).joinpath(path).write_bytes(data)
    return corrupt


def mode_000(path: str) -> Callable[[Path, Path], None]:
    def corrupt(_before: Path, after: Path) -> None:
        os.chmod(after / path, 0)
    return corrupt


def dram_replaced_by_a_file(_before: Path, after: Path) -> None:
    shutil.rmtree(after / DRAM)
    (after / DRAM).write_text("not a directory\n")


def dram_symlink_loop(_before: Path, after: Path) -> None:
    shutil.rmtree(after / DRAM)
    (after / DRAM).symlink_to("intel-rapl:0:1")  # itself: ELOOP on every lookup through it


def cpu_stat(usage: str) -> str:
    return f"usage_usec {usage}\nuser_usec 1\nsystem_usec 1\n"


def stat_fields(fields: str) -> Callable[[Path, Path], None]:
    def corrupt(_before: Path, after: Path) -> None:
        lines = (after / "proc/stat").read_text().splitlines()
        lines[0] = f"cpu  {fields}"
        (after / "proc/stat").write_text("\n".join(lines) + "\n")
    return corrupt


VM_POD = "virt-launcher-fedora-abcde"

CORPUS: dict[str, Case] = {
    # -- RAPL counters
    "counter-above-max-range": Case(text(f"{RAPL}/energy_uj", f"{MAX_RANGE + 1_000_000}\n"),
                                    "zone intel-rapl:0", ("implausible",), False),
    "counter-above-2^64": Case(text(f"{RAPL}/energy_uj", f"{2 ** 64 + 5}\n"), "zone intel-rapl:0",
                               ("implausible", "unreadable"), False),
    "counter-half-written-taken-for-a-wrap": Case(text(f"{RAPL}/energy_uj", "10500\n"), "zone intel-rapl:0",
                                                  ("implausible",), False),
    "counter-garbage": Case(text(f"{RAPL}/energy_uj", "12a4\n"), "zone intel-rapl:0", ("unreadable",), False),
    "counter-empty": Case(text(f"{RAPL}/energy_uj", ""), "zone intel-rapl:0", ("unreadable",), False),
    "counter-negative": Case(text(f"{RAPL}/energy_uj", "-5\n"), "zone intel-rapl:0", ("unreadable",), False),
    "counter-other-digits": Case(text(f"{RAPL}/energy_uj", "١٠٥٠٠٠٠٠٠٠\n"), "zone intel-rapl:0", ("unreadable",),
                                 False),  # Arabic-Indic digits: int() would take them
    "counter-underscores": Case(text(f"{RAPL}/energy_uj", "1_050_000_000\n"), "zone intel-rapl:0",
                                ("unreadable",), False),
    "counter-unreadable": Case(mode_000(f"{RAPL}/energy_uj"), "zone intel-rapl:0", ("unreadable",), False,
                               (f"{RAPL}/energy_uj",)),
    "dram-counter-above-max-range": Case(text(f"{DRAM}/energy_uj", f"{10 ** 15}\n"), "zone intel-rapl:0:1",
                                         ("implausible",), False),
    "core-counter-garbage": Case(text(f"{RAPL}/intel-rapl:0:0/energy_uj", "zzz\n"), "zone intel-rapl:0:0",
                                 ("unreadable",), True),  # core is never part of node power
    # -- a broken dram zone: node power is never the package alone
    "dram-dir-replaced-by-a-file": Case(dram_replaced_by_a_file, "zone", ("unreadable", "incomplete"), False),
    "dram-symlink-loop": Case(dram_symlink_loop, "zone", ("unreadable", "incomplete"), False),
    "dram-name-empty": Case(text(f"{DRAM}/name", ""), "zone", ("unreadable", "incomplete"), False),
    "dram-name-unreadable": Case(mode_000(f"{DRAM}/name"), "zone", ("unreadable", "incomplete"), False,
                                 (f"{DRAM}/name",)),
    "powercap-class-dir-unreadable": Case(mode_000("sys/class/powercap"), "node", ("unreadable", "incomplete"),
                                          False, ("sys/class/powercap",)),
    # -- /proc/stat
    "proc-stat-inf": Case(stat_fields("10300 0 5100 inf 0 0 0 0 0 0"), "cpu", ("unreadable",), True),
    "proc-stat-nan": Case(stat_fields("10300 0 nan 100400 0 0 0 0 0 0"), "cpu", ("unreadable",), True),
    "proc-stat-negative": Case(stat_fields("10300 -5 5100 100400 0 0 0 0 0 0"), "cpu", ("unreadable",), True),
    "proc-stat-missing-fields": Case(stat_fields("10300 0 5100"), "cpu", ("unreadable",), True),
    "proc-stat-other-digits": Case(stat_fields("١٠٣٠٠ 0 5100 100400 0 0 0 0 0 0"), "cpu", ("unreadable",), True),
    "proc-stat-backwards": Case(stat_fields("9000 0 5100 100400 0 0 0 0 0 0"), "cpu", ("implausible",), True),
    "proc-stat-empty": Case(text("proc/stat", ""), "cpu", ("unreadable",), True),
    "proc-stat-unreadable": Case(mode_000("proc/stat"), "cpu", ("unreadable",), True, ("proc/stat",)),
    # -- a pod's cgroup
    "pod-cpu-stat-garbage": Case(text(WEB_CPU, b"\x00\xff garbage\n"), "pod", ("unreadable",), True,
                                 unknown_pod="web-7d9f8"),
    "pod-cpu-stat-empty": Case(text(WEB_CPU, ""), "pod", ("unreadable",), True, unknown_pod="web-7d9f8"),
    "pod-cpu-stat-unreadable": Case(mode_000(WEB_CPU), "pod", ("unreadable",), True, (WEB_CPU,),
                                    unknown_pod="web-7d9f8"),
    "pod-usage-negative": Case(text(WEB_CPU, cpu_stat("-5")), "pod", ("unreadable",), True,
                               unknown_pod="web-7d9f8"),
    "pod-usage-1e30": Case(text(WEB_CPU, cpu_stat("1e30")), "pod", ("unreadable",), True, unknown_pod="web-7d9f8"),
    "pod-usage-10^30": Case(text(WEB_CPU, cpu_stat(str(10 ** 30))), "pod", ("implausible",), True,
                            unknown_pod="web-7d9f8"),
    "pod-usage-backwards": Case(text(WEB_CPU, cpu_stat("1")), "pod", ("implausible",), True,
                                unknown_pod="web-7d9f8"),
    # the read before failed, this one is good: the pod's CPU since its last good read spans
    # more than this interval (never its lifetime CPU charged to one interval)
    "pod-failed-read-then-a-good-one": Case(text(WEB_CPU, "garbage\n", tree="before"), "pod", ("incomplete",),
                                            True, unknown_pod="web-7d9f8"),
    "pod-dir-unlistable": Case(mode_000(f"sys/fs/cgroup/{PODS['web-7d9f8']['cgroup']}"), "pod",
                               ("unreadable", "incomplete"), True, (f"sys/fs/cgroup/{PODS['web-7d9f8']['cgroup']}",),
                               unknown_pod="web-7d9f8"),
    "kubepods-unlistable": Case(mode_000("sys/fs/cgroup/kubepods.slice"), "cgroups", ("unreadable",), True,
                                ("sys/fs/cgroup/kubepods.slice",)),
    "vm-pod-cgroup-procs-garbage": Case(text(pod_file(VM_POD, PODS[VM_POD]["containers"][1]["cgroup"]
                                                      + "/cgroup.procs"), "x y\n"), "cgroups", ("unreadable",), True),
    "proc-stat-huge-jump": Case(stat_fields(f"{10 ** 20} 0 5100 100400 0 0 0 0 0 0"), "cpu", ("implausible",), True),
    # the aggregate line is all that is used: without per-CPU lines the numbers stand (no bound on them)
    "proc-stat-no-cpu-lines": Case(text("proc/stat", "cpu  10300 0 5100 100400 0 0 0 0 0 0\nintr 0\n"), None,
                                   (), True),
    "max-range-garbage": Case(text(f"{RAPL}/max_energy_range_uj", "lots\n"), "zone intel-rapl:0",
                              ("unreadable", "implausible"), None),
    # -- a package zone's constraint_*_max_power_uw is a plausibility hint, never a reason to lose
    # intact counters (issue 27: garbage here made node, idle and active watts null; truth 27.5 W)
    "max-power-garbage": Case(text(MAX_POWER, "lots\n"), None, (), True),
    "max-power-empty": Case(text(MAX_POWER, ""), None, (), True),
    "max-power-zero": Case(text(MAX_POWER, "0\n"), None, (), True),
    "max-power-negative": Case(text(MAX_POWER, "-1\n"), None, (), True),
    "max-power-one-microwatt": Case(text(MAX_POWER, "1\n"), None, (), True),
    "max-power-absurd": Case(text(MAX_POWER, f"{10 ** 18}\n"), None, (), True),
    "max-power-beyond-u64": Case(text(MAX_POWER, f"{2 ** 64 + 5}\n"), None, (), True),
    "max-power-unreadable": Case(mode_000(MAX_POWER), None, (), True, (MAX_POWER,)),
    "max-power-garbage-in-before": Case(text(MAX_POWER, "x\n", tree="before"), None, (), True),
    "dram-name-binary": Case(text(f"{DRAM}/name", b"\xff\xfe\n"), "zone", ("unreadable", "incomplete"), False),
    "pod-usage-two-values": Case(text(WEB_CPU, "usage_usec 5 6\n"), "pod", ("unreadable",), True,
                                 unknown_pod="web-7d9f8"),
    # -- processes
    "vm-stat-huge-ticks": Case(text("proc/2403/stat", (BASE / "after/proc/2403/stat").read_text().replace(
        " 68088 17022 ", f" {10 ** 20} 17022 ", 1)), "processes", ("implausible",), True),
    "vm-stat-garbage": Case(text("proc/2403/stat", "2403 qemu-kvm S\n"), "processes", ("unreadable",), True),
    "vm-stat-unreadable": Case(mode_000("proc/2403/stat"), "processes", ("unreadable",), True,
                               ("proc/2403/stat",)),
}


@contextlib.contextmanager
def trees(case: Case) -> Iterator[tuple[Path, Path]]:
    """Copies of the base trees with the case's corruption, in a directory nobody can traverse
    (a test's tmp_path is root's alone)."""
    base = Path(tempfile.mkdtemp(prefix="kj-fuzz-", dir="/tmp"))
    os.chmod(base, 0o755)
    try:
        before, after = base / "before", base / "after"
        shutil.copytree(BASE / "before", before, symlinks=True)
        shutil.copytree(BASE / "after", after, symlinks=True)
        case.corrupt(before, after)
        yield before, after
    finally:
        for path in base.rglob("*"):  # give back what a case took away, so the tree can go
            if not path.is_symlink():
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o755)
        shutil.rmtree(base)


def run_case(name: str, truth: dict[str, Any]) -> list[str]:
    case = CORPUS[name]
    with trees(case) as (before, after):
        unreadable = [after / path for path in case.unreadable]
        assert all(os.access(path, os.R_OK) for path in unreadable)  # root reads mode 000: hence nobody
        outcome = replay_in_child(before, after, NOBODY if case.unreadable else None, unreadable)
    return violations(case, outcome, truth)


@pytest.fixture(scope="module")
def verdicts(truth: dict[str, Any]) -> dict[str, list[str] | None]:
    """Every case run once: its violations (None: not run here, an unreadable case without root)."""
    root = os.geteuid() == 0
    return {name: run_case(name, truth) if root or not CORPUS[name].unreadable else None for name in sorted(CORPUS)}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_case_verdict(name: str, verdicts: dict[str, list[str] | None]) -> None:
    """exit 0, strict JSON, a gap with its reason and kind, no wrong number, no hang."""
    if verdicts[name] is None:
        pytest.skip("an unreadable case drops privileges to nobody, which needs root")
    assert verdicts[name] == []


def category(violation: str) -> str:
    """What kind of failure a violation is, for the corpus' totals."""
    if violation.startswith("hang"):
        return "hangs"
    if violation.startswith(("crash", "invalid record")):
        return "crashes"
    if violation.startswith("no gap"):
        return "missing gaps"
    if violation.startswith(("node power lost", "the unreadable path")):
        return "other"
    return "wrong numbers"  # a wrong value, a partial node, a pod charged or lost, a host from unknowns


def test_corpus_totals(verdicts: dict[str, list[str] | None]) -> None:
    """The corpus' targets, counted: 0 crashes, 0 wrong numbers, 0 hangs (and no verdict missing a gap)."""
    found = [v for violations_ in verdicts.values() if violations_ for v in violations_]
    totals = dict.fromkeys(("crashes", "wrong numbers", "hangs", "missing gaps", "other"), 0)
    for violation in found:
        totals[category(violation)] += 1
    ran = sum(1 for v in verdicts.values() if v is not None)
    assert ran == (len(CORPUS) if os.geteuid() == 0 else sum(1 for c in CORPUS.values() if not c.unreadable))
    assert totals == {"crashes": 0, "wrong numbers": 0, "hangs": 0, "missing gaps": 0, "other": 0}, found


def test_the_verdict_catches_what_it_is_for(truth: dict[str, Any]) -> None:
    """The checks themselves: a crash, a hang, NaN, a partial node and a wrong pod are found."""
    case = CORPUS["pod-cpu-stat-garbage"]
    assert category(violations(case, Outcome(None), truth)[0]) == "hangs"
    assert category(violations(case, Outcome(1, err="x"), truth)[0]) == "crashes"
    assert violations(case, Outcome(1, err="Traceback"), truth)[0].startswith("crash")
    good = replay_in_child(BASE / "before", BASE / "after", None, [])
    record = json.loads(good.out)
    assert any(v.startswith("invalid record") for v in violations(case, Outcome(0, good.out.replace(
        json.dumps(record["node_watts"]), "NaN", 1)), truth))
    partial = dict(record, node_watts=25.0, idle_watts=None, active_watts=None, host_watts=None,
                   pods=[dict(p, watts=None, containers=[]) for p in record["pods"]])
    found = violations(CORPUS["dram-name-empty"], Outcome(0, json.dumps(partial)), truth)
    assert any("wrong number: node_watts = 25.0" in v for v in found)
    assert any("node power 25.0 W given" in v for v in found)
    assert {category(v) for v in found} == {"wrong numbers", "missing gaps"}  # and no gap said why
    web = PODS["web-7d9f8"]["uid"]
    charged = dict(record, pods=[dict(p, cpu_seconds=301.6 if p["uid"] == web else p["cpu_seconds"])
                                 for p in record["pods"]])
    assert any(f"wrong number: pod {web} cpu = 301.6" in v for v in violations(case, Outcome(0, json.dumps(charged)),
                                                                             truth))
