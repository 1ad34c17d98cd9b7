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
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import select
import shutil
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.make_powercap import MAX_RANGE
from tests.helpers.agent_cli import FIXTURES, check_record, strict_json

BASE = FIXTURES / "workloads" / "v2-systemd-containerd"
MANIFEST = json.loads((BASE / "workload.json").read_text())
PODS = {p["name"]: p for p in MANIFEST["pods"]}
NODE_WATTS = 27.5  # package +50 J and dram +5 J over 2 s
RAPL = "sys/devices/virtual/powercap/intel-rapl/intel-rapl:0"
DRAM = f"{RAPL}/intel-rapl:0:1"
MAX_POWER = f"{RAPL}/constraint_0_max_power_uw"
NOBODY = 65534
TIMEOUT_S = 30.0


def pod_file(pod: str, name: str) -> str:
    return f"sys/fs/cgroup/{PODS[pod]['cgroup']}/{name}"


@dataclass(frozen=True)
class Case:
    """One corruption: what it does to the trees, and what its verdict needs beyond the common one."""

    corrupt: Callable[[Path, Path], None]  # (before, after) trees, modified in place
    gap: str | None  # the start of an expected gap's `what` (None: the corruption loses nothing)
    kinds: tuple[str, ...]  # its kind, one of these
    node_known: bool | None  # True: node power must be exactly 27.5 W; False: null; None: either
    unreadable: tuple[str, ...] = ()  # paths (in the after tree) that must be unreadable: run as nobody
    unknown_pod: str | None = None  # a pod whose watts must be null


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


WEB_CPU = pod_file("web-7d9f8", "cpu.stat")
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


@dataclass
class Outcome:
    code: int | None  # None: killed at the timeout (a hang)
    out: str = ""
    err: str = ""
    denied: list[bool] = field(default_factory=list)  # per unreadable path: not readable by the child


def replay_in_child(before: Path, after: Path, user: int | None, unreadable: list[Path],
                    timeout: float = TIMEOUT_S) -> Outcome:
    """`kubejoule-agent replay BEFORE AFTER --interval 2 --json` in a forked child (as USER when
    given), killed after TIMEOUT seconds."""
    from agent import cli

    argv = ["replay", str(before), str(after), "--interval", "2", "--json", "--node", "n1"]
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        result: dict[str, Any] = {"code": 1, "denied": []}
        out, err = io.StringIO(), io.StringIO()
        try:
            if user is not None:
                os.setgroups([])
                os.setgid(user)
                os.setuid(user)
            result["denied"] = [not os.access(path, os.R_OK) for path in unreadable]
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    result["code"] = cli.main(argv)
                except SystemExit as exc:
                    result["code"] = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # a crash: its traceback is the finding
            err.write(traceback.format_exc())
        finally:
            result.update(out=out.getvalue(), err=err.getvalue())
            view = memoryview(json.dumps(result).encode())
            while view:
                view = view[os.write(write_fd, view):]
            os._exit(0)
    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            ready = select.select([read_fd], [], [], max(remaining, 0))[0] if remaining > 0 else []
            if not ready:
                os.kill(pid, signal.SIGKILL)
                return Outcome(None)
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    result = json.loads(b"".join(chunks))
    return Outcome(result["code"], result["out"], result["err"], result["denied"])


def numbers(record: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every measured number of a record, by a key that names it."""
    for key in ("node_watts", "idle_watts", "active_watts", "cpu_utilization", "busy_cpu_seconds", "host_watts"):
        if key in record:
            yield key, record[key]
    for zone in record["zones"]:
        yield f"zone {zone['path'].rsplit('/', 1)[-1]}", zone["watts"]
    for pod in record["pods"]:
        yield f"pod {pod['uid']} watts", pod["watts"]
        yield f"pod {pod['uid']} cpu", pod["cpu_seconds"]
        for container in pod["containers"]:
            yield f"container {container['id']} watts", container["watts"]
            yield f"container {container['id']} cpu", container["cpu_seconds"]
    for vm in record["vms"]:
        yield f"vm {vm['pid']} watts", vm["watts"]
        yield f"vm {vm['pid']} cpu", vm["cpu_seconds"]


@pytest.fixture(scope="module")
def truth() -> dict[str, Any]:
    """The uncorrupted trees' record: what every number must be when it is not null."""
    outcome = replay_in_child(BASE / "before", BASE / "after", None, [])
    assert outcome.code == 0, outcome.err
    record = strict_json(outcome.out)
    assert record["gaps"] == [] and record["node_watts"] == pytest.approx(NODE_WATTS, rel=1e-12)
    return dict(numbers(record))


def violations(case: Case, outcome: Outcome, truth: dict[str, Any]) -> list[str]:
    """What is wrong with a case's outcome: empty when its verdict holds."""
    if outcome.code is None:
        return [f"hang: no answer within {TIMEOUT_S:g} s"]
    found: list[str] = []
    if not all(outcome.denied):
        found.append("the unreadable path was readable to the child: the case tests nothing")
    if outcome.code != 0:
        return [*found, f"crash: exit {outcome.code}: {outcome.err[-2000:]}"]
    try:
        record = strict_json(outcome.out)
        check_record(record)
    except Exception as exc:  # noqa: BLE001 - any invalid output is the finding
        return [*found, f"invalid record: {exc!r}"]
    for key, value in numbers(record):
        if value is None:
            continue
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            found.append(f"wrong number: {key} = {value!r}")
        elif key not in truth or truth[key] is None or not math.isclose(value, truth[key], rel_tol=1e-9, abs_tol=1e-12):
            found.append(f"wrong number: {key} = {value!r}, the true value is {truth.get(key)!r}")
    node = record["node_watts"]
    if case.node_known is True and node is None:
        found.append("node power lost although every zone it needs was read")
    if case.node_known is False and node is not None:
        found.append(f"node power {node} W given although a zone it needs is missing")
    if node is not None:
        pods = sum(p["watts"] or 0.0 for p in record["pods"])
        if pods > node * (1 + 1e-9):
            found.append(f"pods add up to {pods} W, more than the node's {node} W")
    if case.unknown_pod is not None:
        uid = PODS[case.unknown_pod]["uid"]
        pod = next((p for p in record["pods"] if p["uid"] == uid), None)
        if pod is None:
            found.append(f"pod {case.unknown_pod} disappeared (its power would move into the host)")
        elif pod["watts"] is not None:
            found.append(f"pod {case.unknown_pod} has {pod['watts']} W from a corrupt read")
        if record["host_watts"] is not None:
            found.append("host power given although a pod's CPU time is unknown")
    if case.gap is not None and not any(g["what"].startswith(case.gap) and g["kind"] in case.kinds
                                        for g in record["gaps"]):
        found.append(f"no gap '{case.gap}…' of kind {case.kinds}: {record['gaps']}")
    return found


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
    from agent import cli

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
