"""The benchmark's results as typed records, one per row the tables show: `RunRow` (one seed's
run), `PolicyRow` (a results key: the means over its runs, its comparisons, its runs, its
paired differences), `OracleRow` (the bound) and `BenchmarkDocument`, which holds them.

JSON (`kubejoule.rl-benchmark/v1`, rl/evaluation/results.py) is only their serialization: each
record's fields in their declared order, each rounded as its field says (`digits`); `from_json`
reads a document back (the report, the plots, the ablation, `merge`). A record built from a
benchmark's runs holds the rounded values the document holds, so a document read back and
written again is the same bytes. A field marked `carbon` is written only when the document
has a carbon intensity series (`units.carbon`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from rl.evaluation.paired import Interval

SCHEMA = "kubejoule.rl-benchmark/v1"

Split = dict[str, float | None]  # kWh by where the energy goes (rl/simulation/engine/energy.py)


def _digits(digits: int) -> dict[str, object]:
    """A field's metadata: written rounded to `digits`."""
    return {"digits": digits}


def _carbon(digits: int | None = None) -> dict[str, object]:
    """A field's metadata: written only with a carbon intensity series."""
    return {"carbon": True, "digits": digits}


def _mean(digits: int) -> dict[str, object]:
    """A `PolicyRow` field's metadata: the mean of the same field of its runs (before they
    are rounded), at its own `digits`."""
    return {"digits": digits, "mean": True}


def round_value(value: Any, digits: int | None) -> Any:
    """`value` rounded to `digits` (a split's every part); None, ints and text as they are."""
    if digits is None or value is None:
        return value
    if isinstance(value, dict):
        return {k: round_value(v, digits) for k, v in value.items()}
    return round(value, digits)


R = TypeVar("R", "RunRow", "PolicyRow")


def rounded(row: R) -> R:
    """The row as its document holds it (each field at its `digits`)."""
    return replace(row, **{
        f.name: round_value(getattr(row, f.name), f.metadata.get("digits"))
        for f in fields(row) if f.metadata.get("digits") is not None
    })


def _written(row: RunRow | PolicyRow, carbon: bool) -> dict[str, object]:
    return {
        f.name: getattr(row, f.name)
        for f in fields(row)
        if (carbon or not f.metadata.get("carbon")) and f.name not in ("runs", "paired")
    }


@dataclass(frozen=True)
class RunRow:
    """One seed's run of a results key (the document's `runs` entries)."""

    seed: int
    energy_kwh: float = field(metadata=_digits(4))
    slowdown_mean: float | None = field(metadata=_digits(3))  # percent, mean over pods
    slowdown_p99: float | None = field(metadata=_digits(3))
    unschedulable: int
    never_scheduled: int
    boots: int
    end_s: float = field(metadata=_digits(3))
    pending_seconds_mean: float | None = field(metadata=_digits(3))
    pending_seconds_p99: float | None = field(metadata=_digits(3))
    scale_ups: int
    scale_downs: int
    evictions: int
    restarted_pods: int
    lost_cpu_hours: float = field(metadata=_digits(3))
    disrupted_workloads: int
    deleted_pods: int
    energy_split_kwh: Split | None = field(metadata=_digits(4))
    node_hours: float = field(metadata=_digits(3))
    carbon_g: float | None = field(default=None, metadata=_carbon(3))
    carbon_gap: str | None = field(default=None, metadata=_carbon())

    def as_json(self, carbon: bool) -> dict[str, object]:
        return _written(self, carbon)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRow:
        values: dict[str, Any] = {
            f.name: data.get(f.name) for f in fields(cls) if f.name in data or not f.metadata.get("carbon")
        }
        return cls(**values)


@dataclass(frozen=True)
class Paired:
    """A row's paired per-seed differences (rl/evaluation/paired.py): its energy against the
    baseline, and each axis against bin packing with our expander (None: not compared)."""

    energy_vs_baseline_pct: Interval | None = None
    vs_packing: dict[str, Interval] | None = None

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.energy_vs_baseline_pct is not None:
            out["energy_vs_baseline_pct"] = self.energy_vs_baseline_pct.as_json()
        if self.vs_packing is not None:
            out["vs_packing"] = {axis: i.as_json() for axis, i in self.vs_packing.items()}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Paired:
        energy = data.get("energy_vs_baseline_pct")
        packing = data.get("vs_packing")
        return cls(
            None if energy is None else Interval(**energy),
            None if packing is None else {axis: Interval(**i) for axis, i in packing.items()},
        )


@dataclass(frozen=True)
class PolicyRow:
    """A results key's row: the means over its seeds' runs, its difference from the baseline
    and its share of the oracle gap closed, its runs and its paired differences."""

    energy_kwh: float = field(metadata=_digits(4))  # of the mean energy
    energy_vs_default_pct: float | None = field(metadata=_digits(2))
    slowdown_mean: float | None = field(metadata=_mean(3))
    slowdown_p99: float | None = field(metadata=_mean(3))
    unschedulable: float | None = field(metadata=_mean(2))
    gap_closed_pct: float | None = field(metadata=_digits(2))
    never_scheduled: float | None = field(metadata=_mean(2))
    boots: float | None = field(metadata=_mean(2))
    pending_seconds_mean: float | None = field(metadata=_mean(3))
    pending_seconds_p99: float | None = field(metadata=_mean(3))
    scale_ups: float | None = field(metadata=_mean(2))
    scale_downs: float | None = field(metadata=_mean(2))
    evictions: float | None = field(metadata=_mean(2))
    restarted_pods: float | None = field(metadata=_mean(2))
    lost_cpu_hours: float | None = field(metadata=_mean(3))
    disrupted_workloads: float | None = field(metadata=_mean(2))
    deleted_pods: float | None = field(metadata=_mean(2))
    below_oracle: bool  # a run below the bound: the bound is wrong
    energy_split_kwh: Split | None = field(metadata=_digits(4))
    node_hours: float | None = field(metadata=_mean(2))
    runs: tuple[RunRow, ...]
    carbon_g: float | None = field(default=None, metadata=_carbon(3))  # None: some seed's is unknown
    paired: Paired = field(default_factory=Paired)

    @classmethod
    def mean_fields(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.metadata.get("mean")]

    def as_json(self, carbon: bool) -> dict[str, object]:
        out = _written(self, carbon)
        out.pop("carbon_g", None)
        out["runs"] = [r.as_json(carbon) for r in self.runs]
        if carbon:
            out["carbon_g"] = self.carbon_g
        out["paired"] = self.paired.as_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PolicyRow:
        values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(cls) if f.name not in ("runs", "paired")}
        return cls(
            **values,
            runs=tuple(RunRow.from_json(r) for r in data.get("runs", ())),
            paired=Paired.from_json(data.get("paired") or {}),
        )


@dataclass(frozen=True)
class OracleRow:
    """The oracle bound's row (rl/evaluation/oracle.py)."""

    energy_kwh: float | None
    idle_kwh: float | None = None
    work_core_hours: float | None = None
    watts_per_core: float | None = None
    horizon_s: float | None = None
    split_kwh: Split | None = None

    def as_json(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OracleRow:
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})


@dataclass(frozen=True)
class BenchmarkDocument:
    """A benchmark's results: its scenario's description, seeds, baseline, a row per results key
    and the oracle bound; `carbon`: the runs' grams of CO2 are part of it."""

    scenario: Mapping[str, Any]
    seeds: int
    baseline: str | None
    policies: dict[str, PolicyRow]
    oracle: OracleRow
    carbon: bool = False

    def units(self) -> dict[str, str]:
        return {
            "energy": "kWh",
            "slowdown": "percent: 100 × ((finish − submit) / duration − 1) per pod",
            "pending": "seconds from arrival to (first) start, per pod",
            **({"carbon": "gCO2eq"} if self.carbon else {}),
        }

    def as_json(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "scenario": dict(self.scenario),
            "seeds": self.seeds,
            "baseline": self.baseline,
            "units": self.units(),
            "policies": {k: row.as_json(self.carbon) for k, row in self.policies.items()},
            "oracle": self.oracle.as_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BenchmarkDocument:
        return cls(
            scenario=data.get("scenario") or {},
            seeds=data.get("seeds", 0),
            baseline=data.get("baseline"),
            policies={k: PolicyRow.from_json(row) for k, row in data["policies"].items()},
            oracle=OracleRow.from_json(data.get("oracle") or {}),
            carbon="carbon" in (data.get("units") or {}),
        )


def document_of(document: BenchmarkDocument | Mapping[str, Any]) -> BenchmarkDocument:
    """A results document as records (read from its JSON when it is one)."""
    return document if isinstance(document, BenchmarkDocument) else BenchmarkDocument.from_json(document)

