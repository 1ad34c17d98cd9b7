"""The Redfish client against mockup bodies on loopback (benchmarks/harness/redfish_mockup.py): the
walk from /redfish/v1 to each vendor's reading, and every way a BMC can fail — each a
RedfishError with its reason, in bounded time and memory, never a number."""

from __future__ import annotations

import re
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from agent.device.redfish import (
    READING_ENVIRONMENT,
    READING_POWER_CONTROL,
    Credentials,
    RedfishClient,
    RedfishError,
    find_sources,
    read_platform,
    redact_url,
)
from benchmarks.harness import redfish_mockup
from benchmarks.harness.expander_grpc import self_signed
from benchmarks.harness.redfish_mockup import PASSWORD, USERNAME, Fault, serve

GOOD = Credentials(USERNAME, PASSWORD)


def reading(bodies: dict[str, Any], credentials: Credentials = GOOD, timeout: float = 5.0, **client: Any) -> Any:
    with serve(bodies) as mockup:
        api = RedfishClient(mockup.url, credentials, timeout_seconds=timeout, allow_http=True, **client)
        try:
            return read_platform(api, find_sources(api))
        finally:
            api.close()


@pytest.mark.parametrize(
    ("bodies", "watts", "kind", "chassis"),
    [
        (redfish_mockup.dell(312), 312.0, READING_POWER_CONTROL, "/redfish/v1/Chassis/System.Embedded.1"),
        (redfish_mockup.hpe(241), 241.0, READING_POWER_CONTROL, "/redfish/v1/Chassis/1/"),
        (redfish_mockup.lenovo(388), 388.0, READING_POWER_CONTROL, "/redfish/v1/Chassis/Tray_1"),  # not the CPU entry
        (redfish_mockup.environment(374.5), 374.5, READING_ENVIRONMENT, "/redfish/v1/Chassis/1U"),  # not Power's 999
    ],
    ids=["dell", "hpe", "lenovo", "environment-metrics"],
)
def test_each_vendors_reading_is_found_by_walking_from_the_root(bodies: dict[str, Any], watts: float, kind: str,
                                                                chassis: str) -> None:
    got = reading(bodies)
    assert (got.watts, got.source.reading, got.source.chassis) == (watts, kind, chassis)
    assert got.energy_kwh == (325.675 if kind == READING_ENVIRONMENT else None)


def test_environment_metrics_without_a_reading_falls_back_to_power() -> None:
    assert reading(redfish_mockup.environment(None, power_watts=401)).watts == 401.0


@pytest.mark.parametrize(
    ("power", "words"),
    [
        (Fault(status=500, body=b'{"error": "internal"}'), "HTTP 500 (a BMC error)"),
        (Fault(body=b"<html><body>Please log in</body></html>", content_type="text/html"), "an HTML page"),
        (Fault(body=b"{\"PowerControl\": [", content_type="application/json"), "not JSON"),
        (Fault(huge_bytes=50 * 1024 * 1024), "50,000,000"),  # 50 MiB announced: refused before reading
        (Fault(huge_bytes=50 * 1024 * 1024, declare_length=False), "above the 1,048,576 bytes"),
        (Fault(trickle_seconds=0.3, body=b'{"PowerControl": [{"PowerConsumedWatts": 300}]}'), "no complete answer"),
    ],
    ids=["500", "html", "truncated", "50MB-declared", "50MB-streamed", "slow-socket"],
)
def test_a_misbehaving_bmc_is_a_reason_in_bounded_time_and_memory(power: Fault, words: str) -> None:
    bodies = redfish_mockup.dell(312)
    bodies["/redfish/v1/Chassis/System.Embedded.1/Power"] = power
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(RedfishError) as caught:
            reading(bodies, timeout=2.0)
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert words.replace("50,000,000", "52,428,800") in str(caught.value)
    assert elapsed < 2.0 + 1.5  # the deadline holds, whatever the socket does
    assert peak < 4 * 1024 * 1024  # at most the 1 MiB limit is ever held (and its copies)


@pytest.mark.parametrize(
    ("value", "words", "kind"),
    [(None, "is null", "unreadable"), (1e9, "is 1e+09", "implausible"), (0, "is 0", "implausible"),
     (-50, "is -50", "implausible"), ("312 W", "not a number", "implausible"), (True, "not a number", "implausible")],
)
def test_a_reading_that_cannot_be_right_is_a_gap(value: Any, words: str, kind: str) -> None:
    with pytest.raises(RedfishError, match=re.escape(words)) as caught:
        reading(redfish_mockup.dell(value))
    assert caught.value.kind == kind


def test_refused_credentials_and_a_bmc_without_power() -> None:
    with pytest.raises(RedfishError, match=r"refused the credentials \(HTTP 401\)") as caught:
        reading(redfish_mockup.dell(312), Credentials(USERNAME, "wrong"))
    assert PASSWORD not in str(caught.value) and "wrong" not in str(caught.value)
    bodies = redfish_mockup.dell(312)
    del bodies["/redfish/v1/Chassis/System.Embedded.1"]["Power"]
    with pytest.raises(RedfishError, match="serves no power reading"):
        reading(bodies)


def test_tls_is_verified_by_default_and_a_ca_bundle_makes_it_trusted(tmp_path: Path) -> None:
    tls = self_signed(tmp_path, ("127.0.0.1",))
    with serve(redfish_mockup.hpe(241), tls=tls) as mockup:
        untrusted = RedfishClient(mockup.url, GOOD)
        with pytest.raises(RedfishError, match="TLS certificate is not trusted"):
            find_sources(untrusted)
        trusted = RedfishClient(mockup.url, GOOD, ca_bundle=tls.cert_path)
        assert read_platform(trusted, find_sources(trusted)).watts == 241.0
        trusted.close()


def test_credentials_come_from_a_secret_directory_never_the_url(tmp_path: Path) -> None:
    (tmp_path / "username").write_text("admin\n")
    (tmp_path / "password").write_text("p4ss\n")
    credentials = Credentials.load(tmp_path)
    assert (credentials.username, credentials.password) == ("admin", "p4ss") and "p4ss" not in repr(credentials)
    (tmp_path / "password").write_text("")
    with pytest.raises(ValueError, match="password is empty"):
        Credentials.load(tmp_path)
    with pytest.raises(ValueError, match="must not carry credentials"):
        RedfishClient("https://admin:p4ss@bmc.example", credentials)
    with pytest.raises(ValueError, match="not a BMC URL"):
        RedfishClient("ftp://bmc.example", credentials)



def test_http_is_refused_unless_asked_for_in_a_lab() -> None:
    with pytest.raises(ValueError, match="in clear"):
        RedfishClient("http://bmc.example", GOOD)
    assert RedfishClient("http://bmc.example", GOOD, allow_http=True).url == "http://bmc.example"


@pytest.mark.parametrize("url, shown", [
    ("https://root:s3cret@bmc.example:8443/redfish", "https://***@bmc.example:8443/redfish"),
    ("https://root@bmc.example", "https://***@bmc.example"),
    ("https://bmc.example", "https://bmc.example"),
    ("https://root:s3cret@[fd00::1]:443", "https://***@[fd00::1]:443"),
    ("https://root:s3cret@bmc:notaport", "https://(unparsable)"),
])
def test_userinfo_is_redacted(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_no_error_or_log_line_repeats_a_password_from_the_url(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import argparse

    from agent.cmd.devices_cli import bmc_options, open_platform

    for url in ("https://root:s3cret@bmc.example", "ftp://root:s3cret@bmc.example", "https://root:s3cret@bmc:x"):
        with pytest.raises(ValueError) as refused:
            RedfishClient(url, GOOD)
        assert "s3cret" not in str(refused.value)
    (tmp_path / "username").write_text("monitor\n")
    (tmp_path / "password").write_text("pw\n")
    (tmp_path / "url").write_text("https://root:s3cret@bmc.example\n")  # a ConfigMap edited wrongly
    args = argparse.ArgumentParser(parents=[bmc_options()]).parse_args(
        ["--bmc-url-file", str(tmp_path / "url"), "--bmc-credentials", str(tmp_path),
         "--bmc-ca-bundle", str(tmp_path / "ca.crt")])
    with caplog.at_level("INFO"):
        assert open_platform(args, "n1") is None
    text = "\n".join(f"{r.getMessage()} {getattr(r, 'fields', '')}" for r in caplog.records)
    assert "no platform power" in text and "s3cret" not in text and "***@bmc.example" in text


def test_an_https_bmc_needs_its_ca_bundle_at_run_time(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import argparse

    from agent.cmd.devices_cli import bmc_options, open_platform

    (tmp_path / "username").write_text("monitor\n")
    (tmp_path / "password").write_text("pw\n")
    args = argparse.ArgumentParser(parents=[bmc_options()]).parse_args(
        ["--bmc-url", "https://bmc.example", "--bmc-credentials", str(tmp_path),
         "--bmc-ca-bundle", str(tmp_path / "absent.crt")])  # the optional ConfigMap not created
    with caplog.at_level("INFO"):
        assert open_platform(args, "n1") is None
    assert any("no CA bundle" in str(getattr(r, "fields", {})) for r in caplog.records), [getattr(r, "fields", None) for r in caplog.records]


def test_a_node_reads_its_own_account_when_it_has_one(tmp_path: Path) -> None:
    for directory, user in ((tmp_path, "shared"), (tmp_path / "node-a", "only-a")):
        directory.mkdir(exist_ok=True)
        (directory / "username").write_text(f"{user}\n")
        (directory / "password").write_text("pw\n")
    assert Credentials.load(tmp_path, "node-a").username == "only-a"
    assert Credentials.load(tmp_path, "node-b").username == "shared"
    assert Credentials.load(tmp_path).username == "shared"
