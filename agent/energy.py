"""RAPL counter arithmetic, in one place: microjoule deltas with wraparound, and unit conversion.

RAPL counters are microjoules that wrap at `max_energy_range_uj`: the kernel reports the true
energy modulo that range. Converting to joules happens once, here, at the reader.
"""

from __future__ import annotations

MICRO = 1e-6


class CounterError(ValueError):
    """A delta that cannot be known; the message is the reason recorded in the gap."""


def energy_delta_uj(previous_uj: int, current_uj: int, max_energy_range_uj: int | None) -> int:
    """Energy between two readings of one counter, in microjoules.

    `current - previous` when the counter did not fall; otherwise the counter wrapped once,
    and the delta is `current + (max_energy_range_uj - previous)`. With no usable range
    (unreadable, zero, or smaller than the previous reading) a falling counter is an error,
    never a negative or zero reading.
    """
    if previous_uj < 0 or current_uj < 0:
        raise CounterError("negative counter value")
    if current_uj >= previous_uj:
        return current_uj - previous_uj
    if not max_energy_range_uj or max_energy_range_uj <= 0:
        raise CounterError(
            "counter fell (wrapped or reset) and max_energy_range_uj is unreadable or zero, "
            "so the energy in this interval is unknown"
        )
    if previous_uj > max_energy_range_uj:
        raise CounterError(
            f"counter fell from {previous_uj} but max_energy_range_uj is {max_energy_range_uj}: "
            "the counter was reset, not wrapped"
        )
    return current_uj + (max_energy_range_uj - previous_uj)


def uj_to_joules(microjoules: int | float) -> float:
    return float(microjoules) * MICRO


def wrap_period_seconds(max_energy_range_uj: int | None, max_power_uw: int | None) -> float | None:
    """How long the counter takes to wrap at the zone's maximum power (µJ / µW = s)."""
    if not max_energy_range_uj or not max_power_uw or max_power_uw <= 0:
        return None
    return max_energy_range_uj / max_power_uw
