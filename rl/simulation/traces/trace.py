"""Workload traces (CSV) and their PodDisruptionBudgets (YAML): the formats, their pods, errors.

Trace: CSV with the header `submit_s,duration_s,cpu_request,mem_request_gib,cpu_usage`, optionally
followed by any of these columns, in any order (old traces without them still load):

* `owner_kind` — the controlling owner's kind (Job, ReplicaSet, StatefulSet, …; empty for a bare
  pod, which cluster-autoscaler will not evict: rl/simulation/engine/workloads.py);
* `priority` — an integer (0 when empty);
* `workload` — the controller the pod belongs to: pods of one Deployment, StatefulSet or Job share
  it, and a PodDisruptionBudget names it (empty: the pod has none);
* `safe_to_evict` — the pod's `cluster-autoscaler.kubernetes.io/safe-to-evict` annotation:
  `true`, `false`, or empty for none.

One row per pod. `duration_s` is the run time with the CPU it wants (`cpu_usage` cores, the mean
while running, which may exceed `cpu_request`); contention stretches it (rl/simulation/engine/simulator.py).

PodDisruptionBudgets (`--pdbs FILE`): a YAML list of `{workload, max_unavailable}` or
`{workload, min_available}`, each an integer or a percentage as policy/v1 writes them (`1`,
`"25%"`), at most one per workload (the eviction API refuses a pod that two budgets cover).

Every error names the file, the line and the field, and is a ScenarioError (exit status 2 in the
CLI): a bad row is never skipped, a bad budget never ignored.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import yaml

from rl.simulation.traces.kubeobjects import SAFE_TO_EVICT_ANNOTATION, PodObject, pod_object
from scheduler.cluster.kubeobjects import pod_info_from_k8s
from scheduler.domain.model import PodInfo

TRACE_HEADER = ("submit_s", "duration_s", "cpu_request", "mem_request_gib", "cpu_usage")
TRACE_OPTIONAL = ("owner_kind", "priority", "workload", "safe_to_evict")
SAFE_TO_EVICT = {"true": True, "false": False, "": None}  # the annotation's values


class ScenarioError(ValueError):
    """A node-group file, a trace or a PDB file that does not follow the format."""


def parse_number(value: object, what: str, minimum: float = 0.0, strict: bool = False) -> float:
    try:
        if not isinstance(value, str | int | float):
            raise TypeError(f"a {type(value).__name__}")
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"{what}: not a number: {value!r}") from exc
    if number != number or number < minimum or (strict and number <= minimum):
        bound = ">" if strict else ">="
        raise ScenarioError(f"{what}: must be {bound} {minimum}, got {value!r}")
    return number


@dataclass(frozen=True)
class PodSpec:
    """One pod of a trace. Times in seconds, CPU in cores, memory in GiB."""

    index: int
    submit_s: float
    duration_s: float
    cpu_request: float
    mem_request_gib: float
    cpu_usage: float
    owner_kind: str | None = None  # the controlling owner's kind (feature schema v2)
    priority: int = 0
    workload: str | None = None  # the controller it belongs to (a PDB names it)
    safe_to_evict: bool | None = None  # cluster-autoscaler's safe-to-evict annotation

    @property
    def work_core_seconds(self) -> float:
        return self.cpu_usage * self.duration_s

    def pod_object(self) -> PodObject:
        """The pod as the Kubernetes API would show it (`rl.simulation.traces.kubeobjects`): its workload is
        its controller's name, `safe_to_evict` cluster-autoscaler's annotation."""
        annotations = {}
        if self.safe_to_evict is not None:
            annotations[SAFE_TO_EVICT_ANNOTATION] = "true" if self.safe_to_evict else "false"
        return pod_object(
            f"pod-{self.index}",
            f"sim-{self.index}",
            self.cpu_request,
            self.mem_request_gib,
            self.owner_kind,
            self.workload,
            priority=self.priority,
            annotations=annotations,
        )

    def pod_info(self) -> PodInfo:
        """The pod as the scheduler reads it (one container requesting the trace's CPU and
        memory, no limits; a zero request is an absent key), parsed once per pod."""
        return self._parsed

    @cached_property
    def _parsed(self) -> PodInfo:
        return pod_info_from_k8s(self.pod_object())


def _optional_columns(header: tuple[str, ...], source: str) -> tuple[str, ...]:
    required = len(TRACE_HEADER)
    extra = header[required:]
    if (
        header[:required] != TRACE_HEADER
        or len(set(extra)) != len(extra)
        or any(name not in TRACE_OPTIONAL for name in extra)
    ):
        raise ScenarioError(
            f"{source}: header must be {','.join(TRACE_HEADER)} optionally followed by any of "
            f"{', '.join(TRACE_OPTIONAL)}, got {','.join(header)}"
        )
    return extra


def _integer(value: str, what: str) -> int:
    try:
        return int(value.strip() or "0")
    except ValueError as exc:
        raise ScenarioError(f"{what}: not an integer: {value!r}") from exc


def _safe_to_evict(value: str, what: str) -> bool | None:
    key = value.strip()
    if key not in SAFE_TO_EVICT:
        raise ScenarioError(f"{what}: must be true, false or empty, got {value!r}")
    return SAFE_TO_EVICT[key]


def parse_trace(text: str, source: str = "trace") -> list[PodSpec]:
    """Pods from trace CSV text, sorted by submit time (stable, so file order breaks ties).
    `source` names the file in errors ("<source> line N: <field>: …")."""
    reader = csv.reader(io.StringIO(text))
    rows = [(reader.line_num, row) for row in reader if row and any(c.strip() for c in row)]
    if not rows:
        raise ScenarioError(f"{source}: empty")
    header = tuple(cell.strip() for cell in rows[0][1])
    extra = _optional_columns(header, source)
    pods: list[PodSpec] = []
    for line, row in rows[1:]:
        where = f"{source} line {line}"
        if len(row) != len(header):
            raise ScenarioError(f"{where}: expected {len(header)} fields")
        submit, duration, request, memory, usage = row[: len(TRACE_HEADER)]
        optional = dict(zip(extra, row[len(TRACE_HEADER) :], strict=True))
        pods.append(
            PodSpec(
                index=len(pods),
                submit_s=parse_number(submit, f"{where}: submit_s"),
                duration_s=parse_number(duration, f"{where}: duration_s", strict=True),
                cpu_request=parse_number(request, f"{where}: cpu_request"),
                mem_request_gib=parse_number(memory, f"{where}: mem_request_gib"),
                cpu_usage=parse_number(usage, f"{where}: cpu_usage"),
                owner_kind=optional.get("owner_kind", "").strip() or None,
                priority=_integer(optional.get("priority", "0"), f"{where}: priority"),
                workload=optional.get("workload", "").strip() or None,
                safe_to_evict=_safe_to_evict(
                    optional.get("safe_to_evict", ""), f"{where}: safe_to_evict"
                ),
            )
        )
    ordered = sorted(pods, key=lambda p: p.submit_s)
    return [replace(p, index=i) for i, p in enumerate(ordered)]


def load_trace(path: str | Path) -> list[PodSpec]:
    return parse_trace(Path(path).read_text(), str(path))


def parse_window(text: str) -> tuple[float, float]:
    """`--window`'s hours: `END` (from the start) or `START:END`. ScenarioError on bad input."""
    start_text, _, end_text = text.rpartition(":")
    start = parse_number(start_text or "0", f"--window {text!r}: start hours")
    end = parse_number(end_text, f"--window {text!r}: end hours", strict=True)
    if end <= start:
        raise ScenarioError(f"--window {text!r}: the end must be after the start")
    return start, end


def window_trace(pods: Sequence[PodSpec], start_h: float, end_h: float) -> list[PodSpec]:
    """The pods that arrive in [start_h, end_h) hours, their arrivals moved back by start_h; each
    keeps its whole duration (the run ends when the last pod does). Re-indexed from 0; a window
    with no pod is a ScenarioError."""
    start_s, end_s = start_h * 3600.0, end_h * 3600.0
    kept = [
        replace(p, index=i, submit_s=p.submit_s - start_s)
        for i, p in enumerate(p for p in pods if start_s <= p.submit_s < end_s)
    ]
    if not kept:
        raise ScenarioError(f"no pod of the trace arrives between {start_h:g} h and {end_h:g} h")
    return kept


def format_trace(pods: Iterable[PodSpec]) -> str:
    """Trace CSV text (the inverse of parse_trace, to 6 significant decimals). `owner_kind` and
    `priority` are written when some pod has an owner kind or a priority, `workload` and
    `safe_to_evict` when some pod has one."""
    pods = list(pods)
    columns: list[str] = []
    if any(p.owner_kind is not None or p.priority != 0 for p in pods):
        columns += ["owner_kind", "priority"]
    if any(p.workload is not None for p in pods):
        columns.append("workload")
    if any(p.safe_to_evict is not None for p in pods):
        columns.append("safe_to_evict")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TRACE_HEADER + tuple(columns))
    for p in pods:
        values = {
            "owner_kind": p.owner_kind or "",
            "priority": str(p.priority),
            "workload": p.workload or "",
            "safe_to_evict": "" if p.safe_to_evict is None else str(p.safe_to_evict).lower(),
        }
        writer.writerow(
            [
                f"{p.submit_s:.3f}",
                f"{p.duration_s:.3f}",
                f"{p.cpu_request:.3f}",
                f"{p.mem_request_gib:.3f}",
                f"{p.cpu_usage:.4f}",
                *(values[c] for c in columns),
            ]
        )
    return out.getvalue()


# --- PodDisruptionBudgets ----------------------------------------------------------------------

Budget = int | str  # policy/v1's IntOrString: 3, or "25%"
_PERCENT = re.compile(r"^([0-9]+)%$")


@dataclass(frozen=True)
class PdbSpec:
    """A PodDisruptionBudget over one workload's pods: exactly one of the two budgets."""

    workload: str
    max_unavailable: Budget | None = None
    min_available: Budget | None = None
    line: int = field(default=0, compare=False)  # where it was written (0: not from a file)

    def __post_init__(self) -> None:
        if (self.max_unavailable is None) == (self.min_available is None):
            raise ValueError("a PDB has exactly one of max_unavailable and min_available")

    def as_yaml(self) -> dict[str, Budget]:
        if self.max_unavailable is not None:
            return {"workload": self.workload, "max_unavailable": self.max_unavailable}
        assert self.min_available is not None
        return {"workload": self.workload, "min_available": self.min_available}


def _budget(value: object, where: str) -> Budget:
    """policy/v1's validation of an IntOrString budget: an integer >= 0 or a percentage in
    0%–100%."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ScenarioError(f"{where}: must be >= 0, got {value}")
        return value
    if isinstance(value, str) and (match := _PERCENT.match(value.strip())):
        if int(match.group(1)) > 100:
            raise ScenarioError(f"{where}: must be a percentage in 0%–100%, got {value!r}")
        return value.strip()
    raise ScenarioError(f"{where}: must be an integer >= 0 or a percentage like \"25%\", got {value!r}")


def parse_pdbs(text: str, source: str, workloads: Iterable[str | None]) -> tuple[PdbSpec, ...]:
    """PDBs from YAML text; each must name a workload of the trace (`workloads`)."""
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: not YAML: {exc}") from exc
    if data is None:
        return ()
    if not isinstance(data, list) or not isinstance(root, yaml.SequenceNode):
        raise ScenarioError(f"{source} line 1: expected a YAML list of PDBs")
    known = {w for w in workloads if w}
    pdbs: dict[str, PdbSpec] = {}
    for item, node in zip(data, root.value, strict=True):
        line = node.start_mark.line + 1
        if not isinstance(item, Mapping) or not isinstance(node, yaml.MappingNode):
            raise ScenarioError(f"{source} line {line}: expected a mapping with a workload")
        lines = {k.value: v.start_mark.line + 1 for k, v in node.value if isinstance(k.value, str)}

        def where(key: str, item_lines: Mapping[str, int] = lines, first: int = line) -> str:
            return f"{source} line {item_lines.get(key, first)}: {key}"

        unknown = sorted(str(k) for k in item if k not in ("workload", "max_unavailable", "min_available"))
        if unknown:
            raise ScenarioError(f"{where(unknown[0])}: unknown field (known: workload, max_unavailable, min_available)")
        workload = item.get("workload")
        if not isinstance(workload, str) or not workload:
            raise ScenarioError(f"{where('workload')}: missing or not a name")
        if workload not in known:
            raise ScenarioError(f"{where('workload')}: names no workload of the trace: {workload!r}")
        if workload in pdbs:
            raise ScenarioError(
                f"{where('workload')}: a second PDB for {workload!r} (first on line "
                f"{pdbs[workload].line}; the eviction API refuses a pod two budgets cover)"
            )
        given = [k for k in ("max_unavailable", "min_available") if item.get(k) is not None]
        if len(given) != 1:
            raise ScenarioError(f"{where(given[-1] if given else 'workload')}: give exactly one of max_unavailable and min_available")
        budget = _budget(item[given[0]], where(given[0]))
        pdbs[workload] = PdbSpec(workload, line=line, **{given[0]: budget})
    return tuple(pdbs.values())


def load_pdbs(path: str | Path, pods: Sequence[PodSpec]) -> tuple[PdbSpec, ...]:
    return parse_pdbs(Path(path).read_text(), str(path), (p.workload for p in pods))


def format_pdbs(pdbs: Iterable[PdbSpec]) -> str:
    """The YAML of `pdbs` (parse_pdbs reads it back)."""
    items = [p.as_yaml() for p in pdbs]
    return yaml.safe_dump(items, sort_keys=False) if items else "[]\n"
