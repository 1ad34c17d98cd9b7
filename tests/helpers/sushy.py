"""sushy-tools' `sushy-emulator` (a real Redfish service, from PyPI) on loopback: the fake systems
driver, its default chassis, HTTP Basic authentication from an htpasswd file (bcrypt, as it
requires), optionally HTTPS. It serves the walk a BMC serves, and no power readings."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness.processes import free_port, stop

USERNAME, PASSWORD = "kubejoule", "emulated-bmc-password"


@dataclass(frozen=True)
class Emulator:
    url: str
    process: subprocess.Popen[str]


def _executable() -> str:
    found = shutil.which("sushy-emulator") or str(Path(sys.executable).with_name("sushy-emulator"))
    if not Path(found).exists():
        raise RuntimeError("sushy-emulator is not installed (pyproject.toml's dev extra: sushy-tools)")
    return found


@contextmanager
def emulator(
    directory: Path, cert: Path | None = None, key: Path | None = None, extra: Sequence[str] = ()
) -> Iterator[Emulator]:
    """`extra`: more lines of the emulator's configuration (e.g. SUSHY_EMULATOR_DISABLE_POWER_OFF = True)."""
    import bcrypt  # sushy-tools' own dependency

    port = free_port()
    digest = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    (directory / "htpasswd").write_text(f"{USERNAME}:{digest}\n")
    config = [
        "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'",
        f"SUSHY_EMULATOR_LISTEN_PORT = {port}",
        "SUSHY_EMULATOR_FAKE_DRIVER = True",
        f"SUSHY_EMULATOR_STATE_DIR = {str(directory / 'state')!r}",
        f"SUSHY_EMULATOR_AUTH_FILE = {str(directory / 'htpasswd')!r}",
    ]
    if cert is not None and key is not None:
        config += [f"SUSHY_EMULATOR_SSL_CERT = {str(cert)!r}", f"SUSHY_EMULATOR_SSL_KEY = {str(key)!r}"]
    config += list(extra)
    (directory / "emulator.conf").write_text("\n".join(config) + "\n")
    process = subprocess.Popen([_executable(), "--config", str(directory / "emulator.conf")], cwd=directory,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"{'https' if cert is not None else 'http'}://127.0.0.1:{port}"
    context = ssl.create_default_context(cafile=str(cert)) if cert is not None else None
    deadline = time.monotonic() + 60
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"sushy-emulator exited with {process.returncode}: {process.stderr.read()}")
            try:
                with urllib.request.urlopen(url + "/redfish/v1/", timeout=2, context=context):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError("sushy-emulator did not answer within 60 s") from None
                time.sleep(0.2)
        yield Emulator(url, process)
    finally:
        stop(process)
