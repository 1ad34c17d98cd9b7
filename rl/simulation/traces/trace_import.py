"""`kubejoule-rl trace import`: a production pod list as a simulator trace.

Format read: Alibaba's `cluster-trace-gpu-v2023` pod lists (github.com/alibaba/clusterdata,
`cluster-trace-gpu-v2023/csv/openb_pod_list_*.csv`; Weng, Yang et al., "Beware of Fragmentation:
Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC '23), a CSV
with the header

    name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time

CPU in millicores and memory in MiB requested; times in seconds from the trace's start;
`scheduled_time` empty for a pod that was never scheduled. The trace is not redistributable
under an open licence (its README allows use "for research or study purpose"), so none of it is
bundled: download a pod list and import it.

The CPU view, and what the trace lacks (each a documented assumption, each an option):

* a pod ran from `scheduled_time` to `deletion_time` (Failed pods too: they held their
  requests); a pod never scheduled, or whose deletion is not after its scheduling, never ran and
  is left out;
* the window `[--from-day, --to-day)`: pods created in it arrive at `creation_time − start`;
  pods running when it opens arrive at 0 with the time they had left (`--running-at-start`,
  on by default: the cluster is not empty at the window's start); run times are cut at the
  window's end (a service that runs for months would otherwise run the simulation for months);
* requests: `cpu_milli` × `--request-scale` and `memory_mib` × `--memory-scale` (default: the
  request scale; the trace's nodes are 32–128-core machines with 4–8 GiB per core: scale them to
  the simulated cluster's); GPUs are not modelled (CPU view: a GPU pod's CPU and memory only)
  unless `--cpu-only-pods` drops every pod that requests one; pods whose scaled request exceeds
  `--max-cpu` cores or `--max-memory-gib` are left out (they would fit no node and stay Pending
  for the whole run);
* CPU usage, absent from the trace: `--usage-ratio` × the request (default 0.6, the generator's
  median);
* the owner kind from `qos` (the trace has no owner references): LS (latency-sensitive, long
  running) → ReplicaSet, BE (best effort, batch) → Job, Burstable → Job, Guaranteed → ReplicaSet;
  `--owner QOS=KIND` changes one. An unknown `qos` is an error, never a guess.

Every error names the file, the line and the field (exit status 2).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rl.simulation.traces.trace import PodSpec, ScenarioError

COLUMNS = (
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
    "creation_time", "deletion_time", "scheduled_time",
)
DEFAULT_OWNERS = {"LS": "ReplicaSet", "BE": "Job", "Burstable": "Job", "Guaranteed": "ReplicaSet"}
SECONDS_PER_DAY = 86400.0
MIB_PER_GIB = 1024.0


@dataclass(frozen=True)
class ImportOptions:
    from_day: float = 0.0
    to_day: float | None = None  # None: the last deletion in the file
    request_scale: float = 1.0
    usage_ratio: float = 0.6
    max_cpu: float | None = None
    memory_scale: float | None = None  # None: request_scale
    max_memory_gib: float | None = None
    cpu_only_pods: bool = False
    running_at_start: bool = True
    owners: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_OWNERS))

    def __post_init__(self) -> None:
        if not self.from_day >= 0:
            raise ScenarioError(f"--from-day: must be >= 0, got {self.from_day}")
        if self.to_day is not None and not self.to_day > self.from_day:
            raise ScenarioError(f"--to-day: must be after --from-day, got {self.to_day}")
        if not self.request_scale > 0:
            raise ScenarioError(f"--request-scale: must be > 0, got {self.request_scale}")
        if not self.usage_ratio > 0:
            raise ScenarioError(f"--usage-ratio: must be > 0, got {self.usage_ratio}")
        if self.max_cpu is not None and not self.max_cpu > 0:
            raise ScenarioError(f"--max-cpu: must be > 0, got {self.max_cpu}")
        if self.memory_scale is not None and not self.memory_scale > 0:
            raise ScenarioError(f"--memory-scale: must be > 0, got {self.memory_scale}")
        if self.max_memory_gib is not None and not self.max_memory_gib > 0:
            raise ScenarioError(f"--max-memory-gib: must be > 0, got {self.max_memory_gib}")


@dataclass(frozen=True)
class Row:
    line: int
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    qos: str
    created: int
    deleted: int
    scheduled: int | None


@dataclass
class ImportSummary:
    pods: int = 0
    never_ran: int = 0
    outside: int = 0
    gpu: int = 0
    too_large: int = 0

    def describe(self) -> str:
        return (
            f"{self.pods} pods; left out: {self.never_ran} never ran, {self.outside} outside "
            f"the window, {self.gpu} requesting GPUs, {self.too_large} above --max-cpu or "
            "--max-memory-gib"
        )


def _integer(text: str, where: str, name: str) -> int:
    text = text.strip()
    try:
        value = int(text)
    except ValueError:
        raise ScenarioError(f"{where}: {name}: not a whole number: {text!r}") from None
    if value < 0:
        raise ScenarioError(f"{where}: {name}: must be >= 0, got {value}")
    return value


def read_rows(path: str) -> list[Row]:
    """The pod list's rows, checked. ScenarioError naming the file, line and field."""
    try:
        with open(path, newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None or tuple(h.strip() for h in header) != COLUMNS:
                raise ScenarioError(
                    f"{path}:1: header: expected {','.join(COLUMNS)}, got {','.join(header or [])}"
                )
            rows = []
            for line, values in enumerate(reader, start=2):
                if not values:
                    continue
                where = f"{path}:{line}"
                if len(values) != len(COLUMNS):
                    raise ScenarioError(f"{where}: expected {len(COLUMNS)} fields, got {len(values)}")
                data = dict(zip(COLUMNS, values, strict=True))
                created = _integer(data["creation_time"], where, "creation_time")
                deleted = _integer(data["deletion_time"], where, "deletion_time")
                scheduled = None
                if data["scheduled_time"].strip():
                    scheduled = _integer(data["scheduled_time"], where, "scheduled_time")
                if deleted < created:
                    raise ScenarioError(f"{where}: deletion_time: before creation_time")
                if scheduled is not None and scheduled < created:
                    raise ScenarioError(f"{where}: scheduled_time: before creation_time")
                rows.append(
                    Row(
                        line,
                        _integer(data["cpu_milli"], where, "cpu_milli"),
                        _integer(data["memory_mib"], where, "memory_mib"),
                        _integer(data["num_gpu"], where, "num_gpu"),
                        data["qos"].strip(),
                        created,
                        deleted,
                        scheduled,
                    )
                )
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ScenarioError(f"{path}: not a CSV text file: {exc}") from exc
    return rows


def import_pods(
    rows: Sequence[Row], options: ImportOptions, path: str = "pods"
) -> tuple[list[PodSpec], ImportSummary]:
    """The trace of `rows` under `options` (module docstring), sorted by arrival."""
    summary = ImportSummary()
    start = options.from_day * SECONDS_PER_DAY
    last = max((r.deleted for r in rows), default=0)
    end = last if options.to_day is None else options.to_day * SECONDS_PER_DAY
    pods: list[tuple[float, int, PodSpec]] = []
    for row in rows:
        owner = options.owners.get(row.qos)
        if owner is None:
            raise ScenarioError(
                f"{path}:{row.line}: qos: unknown {row.qos!r}; known: "
                f"{', '.join(options.owners)} (add one with --owner QOS=KIND)"
            )
        if row.scheduled is None or row.deleted <= row.scheduled:
            summary.never_ran += 1
            continue
        running_at_start = options.running_at_start and row.deleted > start
        if row.created >= end or (row.created < start and not running_at_start):
            summary.outside += 1
            continue
        if options.cpu_only_pods and row.num_gpu > 0:
            summary.gpu += 1
            continue
        cpu = row.cpu_milli / 1000.0 * options.request_scale
        memory_scale = options.request_scale if options.memory_scale is None else options.memory_scale
        memory = row.memory_mib / MIB_PER_GIB * memory_scale
        too_large = (options.max_cpu is not None and cpu > options.max_cpu) or (
            options.max_memory_gib is not None and memory > options.max_memory_gib
        )
        if too_large:
            summary.too_large += 1
            continue
        arrival = max(row.created, start) - start
        runs_from = max(row.scheduled, start)
        duration = min(row.deleted, end) - runs_from
        if duration <= 0:  # scheduled only after the window closed
            summary.outside += 1
            continue
        spec = PodSpec(
            index=0,
            submit_s=float(arrival),
            duration_s=float(duration),
            cpu_request=cpu,
            mem_request_gib=memory,
            cpu_usage=cpu * options.usage_ratio,
            owner_kind=owner,
        )
        pods.append((spec.submit_s, row.line, spec))
    pods.sort(key=lambda item: item[:2])
    ordered = [
        PodSpec(i, p.submit_s, p.duration_s, p.cpu_request, p.mem_request_gib, p.cpu_usage, p.owner_kind)
        for i, (_, _, p) in enumerate(pods)
    ]
    summary.pods = len(ordered)
    if not ordered:
        raise ScenarioError(f"{path}: no pod ran in the window (days {options.from_day:g} to "
                            f"{'the end' if options.to_day is None else f'{options.to_day:g}'})")
    return ordered, summary
