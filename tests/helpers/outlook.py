"""One node of an energy plugin `Outlook`'s columns, as the tests check them."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.plugins.energy.levers import Outlook


@dataclass(frozen=True)
class NodeOutlook:
    """One node's row of `Outlook.nodes()`: `empty_in_s` (None where not known) and `unneeded`."""

    empty_in_s: float | None
    unneeded: bool = False


def one_node(outlook: Outlook, name: str) -> NodeOutlook:
    """One node's outlook from an Outlook's columns (None where it is not known)."""
    ends, unneeded = outlook.nodes([name])
    end = float(ends[0])
    return NodeOutlook(None if end != end else end, bool(unneeded[0]))
