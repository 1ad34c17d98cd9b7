"""agent/monitor/accounts.py: one immutable view published per interval. A reader holding a view
sees it as it was published, whatever the sampling loop adds or counts afterwards; the next read
sees what was added."""

from __future__ import annotations

from agent.monitor.accounts import EnergyAccounts
from agent.monitor.energy_ledger import ExportLevels
from agent.monitor.snapshot import PodPower, Snapshot, ZonePower


def snapshot(node_watts: float, pods: tuple[PodPower, ...]) -> Snapshot:
    return Snapshot(
        node="n1", interval_seconds=2.0, timestamp=1_700_000_000.0, source="rapl", node_watts=node_watts,
        idle_watts=10.0, active_watts=node_watts - 10.0, idle_source="utilization", cpu_utilization=0.5,
        busy_cpu_seconds=1.0, pods=pods,
        zones=(ZonePower("package-1-die-0", "intel-rapl:0", 1, "class/powercap/intel-rapl:0", node_watts, 2 * node_watts),),
    )


def test_a_view_once_published_never_changes_and_the_next_read_has_what_came_after() -> None:
    accounts = EnergyAccounts(ExportLevels())
    before = accounts.read()
    assert before.latest is None and before.totals is None and before.errors["sample"] == 0.0
    web = PodPower("uid-a", "Burstable", 1.0, 20.0, namespace="shop", name="web")
    accounts.add(snapshot(50.0, (web,)))
    first = accounts.read()
    accounts.count_error("sample")
    accounts.add(snapshot(30.0, ()))  # the pod is gone: its series goes with it
    # what the first reader holds is as published
    assert first.totals is not None and first.errors["sample"] == 0.0
    assert dict(first.totals.node) == {"rapl": 100.0} and dict(first.totals.pods) == {("uid-a", "cpu"): 40.0}
    assert [(s.labels, s.watts) for s in first.totals.interval.pods] == [(("shop", "web", "uid-a", "cpu"), 20.0)]
    # the zone's kind came with it from where it was measured: the series is (package, socket 1)
    assert [(s.key, s.watts, s.joules) for s in first.totals.interval.zones] == [(("package", "1"), 50.0, 100.0)]
    latest = accounts.read()
    assert latest.totals is not None and latest.errors["sample"] == 1.0
    assert dict(latest.totals.node) == {"rapl": 160.0} and dict(latest.totals.pods) == {}
    assert latest.totals.interval.pods == () and dict(latest.totals.zones) == {("package", "1"): 160.0}
