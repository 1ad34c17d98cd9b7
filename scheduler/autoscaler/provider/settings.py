"""The cloud provider's configuration (YAML, `--provider-config`): node groups of machines, the
allow-list, shadow mode and the deadlines. Every mistake is refused at start with the key named
(ConfigError): a group with no machines, a machine in two groups, a BMC URL that is not a Redfish
ComputerSystem over https (http only with `insecure_http: true`, for a lab), credentials that
cannot be read, min > max, a machine on the allow-list that no group has.

    backend: redfish                 # or simulated (KWOK Nodes; tests and benchmarks)
    shadow: true                     # log, annotate and post Events; touch no machine
    allow: [node-a, node-b]          # the only machines ever switched (Node names)
    groups:
      - id: rack-a
        min: 1
        max: 3
        machines:
          - node: node-a             # the Node name the machine registers as
            bmc: https://10.0.0.11/redfish/v1/Systems/1
            credentials: /etc/kubejoule/bmc/node-a   # a mounted Secret: files username, password
            curve: [95, 130, 150, 170, 190, 210, 230, 250, 270, 290, 310]  # measured, optional
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from common.curves import PowerCurve
from scheduler.config.basics import ConfigError

BACKENDS = ("redfish", "simulated")
PROVIDER_ID_PREFIX = "kubejoule://"
GROUP_LABEL = "kubejoule.io/node-group"
_SYSTEM_PATH = re.compile(r"^/redfish/v1/Systems/[^/]+/?$")
_GROUP_ID = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclass(frozen=True)
class Machine:
    node: str  # the Node name it registers as
    group: str
    bmc: str = ""  # https://HOST[:PORT]/redfish/v1/Systems/ID (redfish backend)
    credentials: str = ""  # directory with files `username` and `password`
    ca_file: str = ""  # PEM bundle the BMC's certificate is checked against ("" = system CAs)
    insecure_http: bool = False
    curve: PowerCurve | None = None
    cores: float = 0.0
    # simulated backend: the Node's capacity and labels
    capacity: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def provider_id(self) -> str:
        return PROVIDER_ID_PREFIX + self.node


@dataclass(frozen=True)
class Group:
    id: str
    min_size: int
    max_size: int
    machines: tuple[Machine, ...]


@dataclass(frozen=True)
class ProviderSettings:
    groups: tuple[Group, ...]
    allow: frozenset[str]
    backend: str = "redfish"
    shadow: bool = False
    # Reset On accepted → PowerState On within this, else "accepted but not performed"
    power_state_deadline_seconds: float = 120.0
    # powered on → its Node registered and Ready within this, else failed (CA backs off)
    boot_deadline_seconds: float = 900.0
    # GracefulShutdown → ForceOff after this; ForceOff → Off within power_state_deadline
    graceful_shutdown_seconds: float = 300.0
    keep_node_object: bool = False  # False: the Node object is deleted once the machine is off
    bmc_timeout_seconds: float = 10.0
    reference_utilization: float = 0.5  # where the curves are compared
    simulated_boot_seconds: float = 300.0

    def group(self, group_id: str) -> Group | None:
        return next((g for g in self.groups if g.id == group_id), None)

    def machines(self) -> list[Machine]:
        return [m for g in self.groups for m in g.machines]


def _number(raw: Mapping[str, object], key: str, where: str, default: float, minimum: float = 0.0) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise ConfigError(f"{where}.{key}: a number ≥ {minimum:g}, got {value!r}")
    return float(value)


def _flag(raw: Mapping[str, object], key: str, where: str, default: bool = False) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key}: true or false, got {value!r}")
    return value


def check_bmc_url(url: object, insecure_http: bool, where: str) -> str:
    """The URL of a Redfish ComputerSystem (https, or http with insecure_http); ConfigError naming
    `where` otherwise."""
    if not isinstance(url, str) or not url:
        raise ConfigError(f"{where}: the BMC's Redfish system URL is required")
    parts = urlsplit(url)
    if parts.scheme == "http" and not insecure_http:
        raise ConfigError(
            f"{where}: {url!r} is plain http (the BMC password would cross the network in clear); "
            "use https, or set insecure_http: true on the machine for a lab"
        )
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError(f"{where}: {url!r} is not an https URL")
    if not _SYSTEM_PATH.match(parts.path):
        raise ConfigError(
            f"{where}: {url!r} is not a Redfish ComputerSystem (expected "
            "https://HOST[:PORT]/redfish/v1/Systems/ID)"
        )
    return url.rstrip("/")


def read_credentials(directory: str, where: str) -> tuple[str, str]:
    """(username, password) from a mounted Secret's directory; ConfigError naming `where`."""
    try:
        username = (Path(directory) / "username").read_text().strip()
        password = (Path(directory) / "password").read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read the BMC credentials: {exc.strerror}: {exc.filename}") from exc
    if not username or not password:
        raise ConfigError(f"{where}: {directory}'s username or password file is empty")
    return username, password


def _strings(raw: object, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping")
    return {str(k): str(v) for k, v in raw.items()}


def _machine(raw: object, group: str, backend: str, where: str) -> Machine:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping with node, bmc, credentials")
    node = raw.get("node")
    if not isinstance(node, str) or not node:
        raise ConfigError(f"{where}.node: the Node name the machine registers as is required")
    insecure = _flag(raw, "insecure_http", where)
    curve = None
    if raw.get("curve") is not None:
        try:
            curve = PowerCurve.from_points(raw["curve"])
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}.curve: {exc}") from exc
    bmc = credentials = ""
    if backend == "redfish":
        bmc = check_bmc_url(raw.get("bmc"), insecure, f"{where}.bmc")
        given = raw.get("credentials")
        if not isinstance(given, str) or not given:
            raise ConfigError(f"{where}.credentials: the directory of the BMC credentials Secret is required")
        read_credentials(given, f"{where}.credentials")
        credentials = given
    ca_file = raw.get("ca_file", "")
    if backend == "redfish" and ca_file and not Path(str(ca_file)).is_file():
        raise ConfigError(f"{where}.ca_file: {ca_file} is not a file")
    return Machine(
        node=node, group=group, bmc=bmc, credentials=credentials, ca_file=str(ca_file or ""),
        insecure_http=insecure, curve=curve, cores=_number(raw, "cores", where, 0.0),
        capacity=_strings(raw.get("capacity"), f"{where}.capacity"),
        labels=_strings(raw.get("labels"), f"{where}.labels"),
    )


def _group(raw: object, backend: str, where: str) -> Group:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping with id, min, max, machines")
    group_id = raw.get("id")
    if not isinstance(group_id, str) or not _GROUP_ID.match(group_id):
        raise ConfigError(f"{where}.id: a lower-case name, got {group_id!r}")
    machines_raw = raw.get("machines")
    if not isinstance(machines_raw, Sequence) or isinstance(machines_raw, str) or not machines_raw:
        raise ConfigError(f"{where}.machines: group {group_id} has no machines")
    defaults = {k: raw[k] for k in ("capacity", "labels", "curve", "cores") if k in raw}
    machines = tuple(
        _machine({**defaults, **m} if isinstance(m, Mapping) else m, group_id, backend,
                 f"{where}.machines[{i}]")
        for i, m in enumerate(machines_raw)
    )
    low = int(_number(raw, "min", where, 0))
    high = int(_number(raw, "max", where, len(machines)))
    if low > high or high > len(machines):
        raise ConfigError(f"{where}: min {low} ≤ max {high} ≤ {len(machines)} machines does not hold")
    return Group(group_id, low, high, machines)


def parse_settings(raw: object) -> ProviderSettings:
    if not isinstance(raw, Mapping):
        raise ConfigError("provider config: expected a mapping with groups and allow")
    known = {"backend", "shadow", "allow", "groups", "power_state_deadline_seconds",
             "boot_deadline_seconds", "graceful_shutdown_seconds", "keep_node_object",
             "bmc_timeout_seconds", "reference_utilization", "simulated_boot_seconds"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"provider config: unknown key(s) {', '.join(unknown)}")
    backend = raw.get("backend", "redfish")
    if backend not in BACKENDS:
        raise ConfigError(f"backend: one of {', '.join(BACKENDS)}, got {backend!r}")
    groups_raw = raw.get("groups")
    if not isinstance(groups_raw, Sequence) or isinstance(groups_raw, str) or not groups_raw:
        raise ConfigError("groups: at least one node group is required")
    groups = tuple(_group(g, backend, f"groups[{i}]") for i, g in enumerate(groups_raw))
    seen: dict[str, str] = {}
    for group in groups:
        if sum(g.id == group.id for g in groups) > 1:
            raise ConfigError(f"groups: the id {group.id} is used twice")
        for machine in group.machines:
            if machine.node in seen:
                raise ConfigError(
                    f"groups: machine {machine.node} is in two groups ({seen[machine.node]} and {group.id})"
                )
            seen[machine.node] = group.id
    allow_raw = raw.get("allow")
    if not isinstance(allow_raw, Sequence) or isinstance(allow_raw, str):
        raise ConfigError("allow: the list of the machines (Node names) that may be switched is required")
    allow = frozenset(str(n) for n in allow_raw)
    stray = sorted(allow - set(seen))
    if stray:
        raise ConfigError(f"allow: {', '.join(stray)} is in no group")
    utilization = _number(raw, "reference_utilization", "provider config", ProviderSettings.reference_utilization)
    if utilization > 1:
        raise ConfigError(f"reference_utilization: between 0 and 1, got {utilization}")
    return ProviderSettings(
        groups=groups, allow=allow, backend=backend, shadow=_flag(raw, "shadow", "provider config"),
        power_state_deadline_seconds=_number(raw, "power_state_deadline_seconds", "provider config",
                                             ProviderSettings.power_state_deadline_seconds, 1),
        boot_deadline_seconds=_number(raw, "boot_deadline_seconds", "provider config",
                                      ProviderSettings.boot_deadline_seconds, 1),
        graceful_shutdown_seconds=_number(raw, "graceful_shutdown_seconds", "provider config",
                                          ProviderSettings.graceful_shutdown_seconds, 0),
        keep_node_object=_flag(raw, "keep_node_object", "provider config"),
        bmc_timeout_seconds=_number(raw, "bmc_timeout_seconds", "provider config",
                                    ProviderSettings.bmc_timeout_seconds, 0.1),
        reference_utilization=utilization,
        simulated_boot_seconds=_number(raw, "simulated_boot_seconds", "provider config",
                                       ProviderSettings.simulated_boot_seconds, 0),
    )


def load_settings(path: str) -> ProviderSettings:
    import yaml

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"--provider-config {path}: {exc.strerror}") from exc
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--provider-config {path}: not YAML: {exc}") from exc
    return parse_settings(raw)
