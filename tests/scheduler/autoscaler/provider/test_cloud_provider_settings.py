"""The cloud provider's configuration: bad input refused at start with the key named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler.autoscaler.provider.settings import parse_settings
from scheduler.config.parse import ConfigError


def raw(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    secret = tmp_path / "bmc"
    secret.mkdir(exist_ok=True)
    (secret / "username").write_text("admin\n")
    (secret / "password").write_text("s3cret\n")
    base: dict[str, Any] = {
        "allow": ["a"],
        "groups": [{"id": "rack", "min": 0, "max": 1, "machines": [
            {"node": "a", "bmc": "https://10.0.0.1/redfish/v1/Systems/1", "credentials": str(secret)}]}],
    }
    base.update(changes)
    return base


def machine(tmp_path: Path, **fields: Any) -> dict[str, Any]:
    return {"node": "a", "bmc": "https://10.0.0.1/redfish/v1/Systems/1", "credentials": str(tmp_path / "bmc"), **fields}


def test_a_good_configuration(tmp_path: Path) -> None:
    settings = parse_settings(raw(tmp_path))
    (only,) = settings.machines()
    assert (only.node, only.group, only.provider_id) == ("a", "rack", "kubejoule://a")
    assert settings.allow == {"a"} and not settings.shadow


@pytest.mark.parametrize(("change", "named"), [
    ({"groups": [{"id": "rack", "machines": []}]}, "groups[0].machines: group rack has no machines"),
    ("two-groups", "machine a is in two groups (rack and other)"),
    ({"bmc": "http://10.0.0.1/redfish/v1/Systems/1"}, "groups[0].machines[0].bmc: 'http://10.0.0.1/redfish/v1/Systems/1' is plain http"),
    ({"bmc": "https://10.0.0.1/api/power"}, "groups[0].machines[0].bmc: 'https://10.0.0.1/api/power' is not a Redfish ComputerSystem"),
    ({"bmc": "ipmi://10.0.0.1"}, "is not an https URL"),
    ({"credentials": "/nonexistent/secret"}, "groups[0].machines[0].credentials: cannot read the BMC credentials"),
    ({"node": ""}, "groups[0].machines[0].node"),
    ({"curve": [1, 2]}, "groups[0].machines[0].curve"),
    ({"allow": ["a", "ghost"]}, "allow: ghost is in no group"),
    ({"allow": None}, "allow: the list of the machines"),
    ({"backend": "ipmi"}, "backend: one of redfish, simulated"),
    ({"shadwo": True}, "unknown key(s) shadwo"),
    ({"groups": [{"id": "rack", "min": 2, "max": 1, "machines": ["x"]}]}, "groups[0].machines[0]: expected a mapping"),
])
def test_bad_input_is_refused_with_the_key_named(tmp_path: Path, change: Any, named: str) -> None:
    config = raw(tmp_path)
    if change == "two-groups":
        config["groups"].append({"id": "other", "machines": [machine(tmp_path)]})
    elif set(change) <= {"bmc", "credentials", "node", "curve"}:
        config["groups"][0]["machines"][0].update(change)
    else:
        config.update(change)
    with pytest.raises(ConfigError) as raised:
        parse_settings(config)
    assert named in str(raised.value)


def test_http_only_with_the_lab_flag_and_min_over_max(tmp_path: Path) -> None:
    config = raw(tmp_path)
    config["groups"][0]["machines"][0].update(bmc="http://10.0.0.1/redfish/v1/Systems/1", insecure_http=True)
    assert parse_settings(config).machines()[0].insecure_http
    config["groups"][0].update(min=2, max=1)
    with pytest.raises(ConfigError, match=r"groups\[0\]: min 2 ≤ max 1"):
        parse_settings(config)


def test_the_command_refuses_a_bad_configuration_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from benchmarks.harness.expander_grpc import self_signed
    from scheduler.cmd.cli import main

    tls = self_signed(tmp_path)
    config = raw(tmp_path)
    config["groups"].append({"id": "other", "machines": [machine(tmp_path)]})
    path = tmp_path / "provider.yaml"
    path.write_text(yaml.safe_dump(config))
    code = main(["cloud-provider", "--provider-config", str(path), "--tls-cert", str(tls.cert_path),
                 "--tls-key", str(tls.key_path), "--metrics-listen", "off"])
    assert code == 2
    assert "machine a is in two groups (rack and other)" in capsys.readouterr().err
