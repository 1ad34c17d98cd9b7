"""PodDisruptionBudgets (policy/v1) as the eviction API applies them: which budget covers a pod
(its namespace, its label selector) and how many disruptions it allows now
(`status.disruptionsAllowed`). A pod covered by more than one budget cannot be evicted at all
(the API server refuses it), and a budget whose status is not there allows nothing — nor one whose
status is older than its spec (`status.observedGeneration` < `metadata.generation`, a budget just
edited): the API server refuses every eviction under it (429) until the disruption controller has
caught up, whatever `disruptionsAllowed` still says."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from common.jsonvalue import subobject, subobjects
from scheduler.domain.filters import requirement_matches
from scheduler.domain.model import SelectorRequirement

MULTIPLE = "multiple_pdbs"


@dataclass(frozen=True)
class Budget:
    namespace: str
    name: str
    match_labels: tuple[tuple[str, str], ...]
    expressions: tuple[SelectorRequirement, ...]
    selects_nothing: bool  # a budget without a selector
    allowed: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.selects_nothing or namespace != self.namespace:
            return False
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        return all(requirement_matches(r, labels) is True for r in self.expressions)


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def budget_from_k8s(pdb: Mapping[str, object]) -> Budget:
    """A PodDisruptionBudget from JSON; ValueError on a malformed one."""
    meta = subobject(pdb, "metadata")
    spec = subobject(pdb, "spec")
    status = subobject(pdb, "status")
    selector = spec.get("selector")
    if selector is not None and not isinstance(selector, Mapping):
        raise ValueError("spec.selector: expected an object")
    selector = selector or {}
    labels = subobject(selector, "matchLabels")
    expressions = tuple(
        SelectorRequirement(str(e.get("key") or ""), str(e.get("operator") or ""),
                            tuple(str(v) for v in _list(e.get("values"))))
        for e in subobjects(selector, "matchExpressions")
    )
    allowed = status.get("disruptionsAllowed", 0)
    if isinstance(allowed, bool) or not isinstance(allowed, int):
        raise ValueError(f"status.disruptionsAllowed: expected an integer, got {allowed!r}")
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    if isinstance(generation, int) and (not isinstance(observed, int) or observed < generation):
        allowed = 0  # the spec changed since the status was computed: the API allows nothing yet
    return Budget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        match_labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        expressions=expressions,
        selects_nothing=spec.get("selector") is None,
        allowed=allowed,
    )


def covering(budgets: Sequence[Budget], namespace: str, labels: Mapping[str, str]) -> Budget | str | None:
    """The one budget covering a pod; MULTIPLE when several do; None without one."""
    found = [b for b in budgets if b.selects(namespace, labels)]
    if len(found) > 1:
        return MULTIPLE
    return found[0] if found else None
