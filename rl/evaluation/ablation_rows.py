"""The ablation's results as typed records: one `AblationRow` per row its table shows (sums over
the cases, against the baseline and bin packing, with the paired 95 % intervals over seeds) and
the `AblationDocument` holding them beside each case's benchmark results
(rl/evaluation/rows.py). JSON (`kubejoule.rl-ablation/v1`) is only their serialization: the
fields in their declared order, an interval at 2 decimals, and a comparison whose reference did
not run left out; `from_json` reads a document back (the report, `merge`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from rl.evaluation.paired import Interval
from rl.evaluation.rows import BenchmarkDocument

SCHEMA = "kubejoule.rl-ablation/v1"
INTERVAL_DIGITS = 2
# Written only when their reference ran (the paired comparisons).
_OPTIONAL = ("vs_baseline_interval_pct", "vs_packing_interval_pct", "vs_packing_axes")


def rounded_interval(interval: Interval) -> Interval:
    """As the document holds it (2 decimals)."""
    return Interval(**interval.as_json(INTERVAL_DIGITS))


@dataclass(frozen=True)
class AblationRow:
    """One row: its label, its benchmark entry and results key, what it is, its energy summed
    over the cases and how it compares."""

    label: str
    entry: str
    key: str  # its runs' key in each case's results
    what: str
    energy_kwh: float
    vs_baseline_pct: float | None
    vs_packing_pct: float | None
    gap_closed_pct: float | None
    worst_case_vs_baseline_pct: float | None
    slowdown_mean: float | None
    evictions: float
    never_scheduled: float
    vs_baseline_interval_pct: Interval | None = None
    vs_packing_interval_pct: Interval | None = None
    vs_packing_axes: dict[str, Interval] | None = None

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name not in _OPTIONAL:
                out[f.name] = value
            elif isinstance(value, Interval):
                out[f.name] = value.as_json(INTERVAL_DIGITS)
            elif value is not None:
                out[f.name] = {axis: i.as_json(INTERVAL_DIGITS) for axis, i in value.items()}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AblationRow:
        values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(cls) if f.name not in _OPTIONAL}
        for name in _OPTIONAL[:2]:
            if data.get(name) is not None:
                values[name] = Interval(**data[name])
        if data.get("vs_packing_axes") is not None:
            values["vs_packing_axes"] = {axis: Interval(**i) for axis, i in data["vs_packing_axes"].items()}
        return cls(**values)


@dataclass(frozen=True)
class AblationDocument:
    """An ablation's results: its rows, the oracle bound summed over the cases, and each case's
    benchmark results by case name."""

    source: Any  # the plan's description of where its cases come from
    seeds: int
    cases: int
    rows: tuple[AblationRow, ...]
    oracle_kwh: float
    results: dict[str, BenchmarkDocument]

    def as_json(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "source": self.source,
            "seeds": self.seeds,
            "cases": self.cases,
            "rows": [r.as_json() for r in self.rows],
            "oracle_kwh": self.oracle_kwh,
            "results": {name: d.as_json() for name, d in self.results.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AblationDocument:
        return cls(
            source=data.get("source"),
            seeds=data.get("seeds", 0),
            cases=data.get("cases", 0),
            rows=tuple(AblationRow.from_json(r) for r in data.get("rows", ())),
            oracle_kwh=data.get("oracle_kwh", 0.0),
            results={name: BenchmarkDocument.from_json(d) for name, d in (data.get("results") or {}).items()},
        )


def ablation_of(document: AblationDocument | Mapping[str, Any]) -> AblationDocument:
    """An ablation document as records (read from its JSON when it is one)."""
    return document if isinstance(document, AblationDocument) else AblationDocument.from_json(document)
