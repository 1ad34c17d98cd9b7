from __future__ import annotations

import pytest

from agent.device.procstat import cpu_delta, parse_proc_stat

STAT = "cpu  {u} {n} {s} {i} {w} {q} {sq} {st} 7 0\ncpu0 1 2 3 4 5 6 7 8 0 0\ncpu1 1 2 3 4 5 6 7 8 0 0\n"


def stat(u: int = 0, n: int = 0, s: int = 0, i: int = 0, w: int = 0, q: int = 0, sq: int = 0, st: int = 0) -> str:
    return STAT.format(u=u, n=n, s=s, i=i, w=w, q=q, sq=sq, st=st)


def test_busy_counts_user_nice_system_irq_softirq_not_idle_iowait_steal() -> None:
    before = parse_proc_stat(stat(), ticks_per_second=100)
    after = parse_proc_stat(stat(u=100, n=50, s=30, i=500, w=100, q=10, sq=10, st=999), ticks_per_second=100)
    assert after.cpus == 2
    delta = cpu_delta(before, after)
    assert delta.busy_seconds == pytest.approx(2.0)
    assert delta.not_busy_seconds == pytest.approx(6.0)
    assert delta.utilization == pytest.approx(0.25)


def test_iowait_running_backwards_never_makes_time_negative() -> None:
    before = parse_proc_stat(stat(u=100, i=100, w=50), ticks_per_second=100)
    after = parse_proc_stat(stat(u=200, i=300, w=40), ticks_per_second=100)
    delta = cpu_delta(before, after)
    assert delta.busy_seconds == pytest.approx(1.0)
    assert delta.not_busy_seconds == pytest.approx(2.0)


def test_no_time_passed_gives_unknown_utilization() -> None:
    same = parse_proc_stat(stat(u=5), ticks_per_second=100)
    assert cpu_delta(same, same).utilization is None


def test_missing_cpu_line_is_an_error() -> None:
    with pytest.raises(ValueError, match="cpu"):
        parse_proc_stat("intr 0\n")
