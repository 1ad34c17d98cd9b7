"""The Snapshot's `network` section: a network sample (agent/device/network.py) in record form,
with pod names, and its gaps."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from agent.device.network import NetworkSample, network_gaps
from agent.monitor.snapshot import Snapshot


def with_network(
    snapshot: Snapshot, sample: NetworkSample | None, names: Mapping[str, tuple[str | None, str | None]] | None = None
) -> Snapshot:
    """The snapshot with the `network` section (record form) added.

    Pod names come from NAMES, else from the snapshot's own pods (already named by podmeta).
    """
    if sample is None:
        return snapshot
    known: dict[str, tuple[str | None, str | None]] = {p.uid: (p.namespace, p.name) for p in snapshot.pods}
    known.update(names or {})
    return dataclasses.replace(
        snapshot,
        network=sample.to_record(known),
        gaps=snapshot.gaps + tuple(g for g in network_gaps(sample) if g not in snapshot.gaps),
    )
