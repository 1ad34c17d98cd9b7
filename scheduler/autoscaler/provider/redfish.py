"""The Redfish power backend: a machine's `PowerState` and `ComputerSystem.Reset` on its BMC
(DMTF DSP0266). Kept apart from the agent's reader (agent/device/redfish.py reads power; this switches
machines), small on purpose: one GET for the state, one GET and one POST for a Reset.

Every request is bounded by `timeout_seconds`; HTTP Basic authentication with the credentials
read from the mounted Secret's files at each request (a rotated Secret is picked up); TLS checked
against the system's CAs or the machine's `ca_file`. A failure is a BackendError saying what
happened: no answer, credentials refused (401/403), the Reset refused (a 4xx/5xx answer, or a
ResetType the system does not list), or an answer that is not a Redfish ComputerSystem."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from urllib.parse import urljoin, urlsplit

import httpx

from common.jsonvalue import subobject
from scheduler.autoscaler.provider.backend import BackendError
from scheduler.autoscaler.provider.settings import Machine, read_credentials
from scheduler.config.basics import ConfigError

RESET_ACTION = "#ComputerSystem.Reset"
POWER_STATES = ("On", "Off", "PoweringOn", "PoweringOff", "Paused")
_ACCEPTED = (200, 202, 204)


class RedfishBackend:
    def __init__(self, timeout_seconds: float = 10.0) -> None:
        self.timeout_seconds = timeout_seconds

    def _request(
        self, machine: Machine, method: str, url: str, body: Mapping[str, str] | None = None
    ) -> httpx.Response:
        try:
            username, password = read_credentials(machine.credentials, machine.node)
        except ConfigError as exc:
            raise BackendError(str(exc), refused=True) from exc
        verify = ssl.create_default_context(cafile=machine.ca_file or None)
        try:
            with httpx.Client(auth=(username, password), verify=verify, timeout=self.timeout_seconds,
                              follow_redirects=False) as client:
                response = client.request(method, url, json=body)
        except httpx.TimeoutException as exc:
            raise BackendError(f"BMC {_host(url)}: no answer within {self.timeout_seconds:g} s") from exc
        except httpx.HTTPError as exc:
            raise BackendError(f"BMC {_host(url)}: {type(exc).__name__}: {exc}") from exc
        if response.status_code in (401, 403):
            raise BackendError(
                f"BMC {_host(url)}: credentials refused (HTTP {response.status_code}); check the "
                f"Secret mounted at {machine.credentials}", refused=True,
            )
        return response

    def _system(self, machine: Machine) -> dict[str, object]:
        response = self._request(machine, "GET", machine.bmc)
        if response.status_code != 200:
            raise BackendError(f"BMC {_host(machine.bmc)}: GET {urlsplit(machine.bmc).path}: HTTP {response.status_code}")
        try:
            system = response.json()
        except ValueError as exc:
            raise BackendError(f"{machine.bmc}: not JSON: not a Redfish service") from exc
        if not isinstance(system, dict) or system.get("PowerState") not in POWER_STATES:
            raise BackendError(f"{machine.bmc}: not a Redfish ComputerSystem (no PowerState)", refused=True)
        return system

    def power_state(self, machine: Machine) -> str:
        return str(self._system(machine)["PowerState"])

    def reset(self, machine: Machine, reset_type: str) -> None:
        action = subobject(subobject(self._system(machine), "Actions"), RESET_ACTION)
        target = action.get("target")
        if not isinstance(target, str):
            raise BackendError(f"{machine.bmc}: the system offers no {RESET_ACTION} action", refused=True)
        allowed = action.get("ResetType@Redfish.AllowableValues")
        if isinstance(allowed, list) and reset_type not in allowed:
            raise BackendError(
                f"{machine.bmc}: ResetType {reset_type} is not one the BMC allows ({', '.join(map(str, allowed))})",
                refused=True,
            )
        url = urljoin(machine.bmc, target)
        if urlsplit(url).netloc != urlsplit(machine.bmc).netloc:
            raise BackendError(f"{machine.bmc}: the Reset target {target!r} is on another host", refused=True)
        response = self._request(machine, "POST", url, {"ResetType": reset_type})
        if response.status_code not in _ACCEPTED:
            raise BackendError(
                f"BMC {_host(url)}: Reset {reset_type} refused: HTTP {response.status_code} "
                f"{_message(response)}", refused=True,
            )


def _host(url: str) -> str:
    return urlsplit(url).netloc


def _message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error", {})
        extended = error.get("@Message.ExtendedInfo") or [{}]
        return str(extended[0].get("Message") or error.get("message") or "")[:300]
    except (ValueError, AttributeError, TypeError):
        return response.text[:300]
