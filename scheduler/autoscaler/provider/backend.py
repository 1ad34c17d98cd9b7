"""What a power backend is: a machine's power state read, and a Reset asked for.

Power states are Redfish's `PowerState` values (On, Off, PoweringOn, PoweringOff, Paused);
reset types are Redfish's `ResetType` values kubejoule uses: On, GracefulShutdown, ForceOff."""

from __future__ import annotations

from typing import Protocol

from scheduler.autoscaler.provider.settings import Machine

ON, OFF, POWERING_ON, POWERING_OFF = "On", "Off", "PoweringOn", "PoweringOff"
RESET_ON, RESET_GRACEFUL, RESET_FORCE = "On", "GracefulShutdown", "ForceOff"


class BackendError(Exception):
    """The BMC did not answer, refused the credentials, refused the Reset or answered nonsense;
    the message says which. `refused`: it answered, and said no (a retry will not help)."""

    def __init__(self, reason: str, refused: bool = False) -> None:
        super().__init__(reason)
        self.refused = refused


class PowerBackend(Protocol):
    def power_state(self, machine: Machine) -> str: ...

    def reset(self, machine: Machine, reset_type: str) -> None: ...
