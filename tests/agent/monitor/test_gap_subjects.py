"""Gaps are typed: the errors_total kind comes from a gap's subject, never from its text."""

from __future__ import annotations

import pytest

from agent.device.gaps import GAP_IMPLAUSIBLE, GAP_UNREADABLE, Gap, Subject
from agent.monitor.energy_ledger import error_kind


@pytest.mark.parametrize(("gap", "what", "kind"), [
    (Gap(Subject.NODE, "r"), "node", "rapl"),
    (Gap(Subject.RAPL, "r"), "rapl", "rapl"),
    (Gap(Subject.ZONE, "r", name="intel-rapl:0 (package-0)"), "zone intel-rapl:0 (package-0)", "rapl"),
    (Gap(Subject.GPU, "r", name="0 (GPU-1)"), "gpu 0 (GPU-1)", "gpu"),
    (Gap(Subject.PLATFORM, "r"), "platform", "platform"),
    (Gap(Subject.CPU, "r"), "cpu", "procstat"),
    (Gap(Subject.CGROUPS, "r"), "cgroups", "cgroup"),
    (Gap(Subject.PROCESSES, "r"), "processes", "process"),
    (Gap(Subject.POD, "r", GAP_IMPLAUSIBLE, name="u1"), "pod u1", "cgroup"),  # a corrupt value read
    (Gap(Subject.POD, "r", GAP_UNREADABLE, name="u1"), "pod u1", None),  # already the cgroups gap
    (Gap(Subject.CONTAINER, "r", GAP_IMPLAUSIBLE, name="c1"), "container c1", "cgroup"),
    (Gap(Subject.HOST, "r"), "host", None),
    (Gap(Subject.IDLE_SPLIT, "r"), "idle split", None),
    (Gap(Subject.ATTRIBUTION, "r"), "attribution", None),
    (Gap(Subject.HOST_ENERGY, "r"), "host energy", None),
    (Gap(Subject.NETWORK, "r"), "network", "network"),
    (Gap(Subject.POD_NETWORK, "r"), "pod network", "network"),
    (Gap(Subject.ESTIMATE, "r"), "estimate", "other"),
    (Gap(Subject.VMS, "r"), "vms", "other"),
    (Gap(Subject.FIELD, "r", name="pods[0].watts"), "pods[0].watts", "other"),
])
def test_each_subject_reads_as_before_and_counts_as_its_kind(gap: Gap, what: str, kind: str | None) -> None:
    assert gap.what == what and gap.to_record()["what"] == what
    assert error_kind(gap) == kind


def test_the_kind_follows_the_subject_not_the_text() -> None:
    """A pod whose uid reads like a zone, a field named "node": what they say does not count."""
    assert error_kind(Gap(Subject.POD, "r", GAP_UNREADABLE, name="zone intel-rapl:0")) is None
    assert error_kind(Gap(Subject.FIELD, "r", name="node")) == "other"
    assert error_kind(Gap(Subject.HOST, "r", name="gpu 0")) is None
