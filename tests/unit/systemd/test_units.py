"""The shipped unit files pass systemd's own checks and keep the settings the design needs."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
UNITS = ("connectd.service", "connectd@.service")


def read_unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(ROOT / "systemd" / name)
    return parser


@pytest.mark.parametrize("name", UNITS)
def test_unit_has_the_settings_the_design_needs(name: str) -> None:
    service = read_unit(name)["Service"]
    assert service["Type"] == "notify"
    assert service["NotifyAccess"] == "main"
    assert service["Restart"] == "on-failure"
    assert service["RestartPreventExitStatus"] == "78"
    assert service["KillMode"] == "control-group"
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert service["WatchdogSec"].endswith("s")
    stop = int(service["TimeoutStopSec"].removesuffix("s"))
    assert stop > 5 + 2, "must exceed task.shutdown.graceful.timeout.ms plus the kill margin"
    for hardening in ("NoNewPrivileges", "ProtectHome", "PrivateTmp"):
        assert service[hardening] == "yes"
    assert service["ProtectSystem"] == "strict"
    assert "AF_INET" in service["RestrictAddressFamilies"]
    assert "MemoryDenyWriteExecute" not in service  # the JVM's JIT needs W+X pages


@pytest.mark.parametrize("name", UNITS)
def test_systemd_analyze_verify(name: str, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package: systemd)")
    connectd = Path(sys.executable).parent / "connectd"
    text = (ROOT / "systemd" / name).read_text().replace("/usr/local/bin/connectd", str(connectd))
    unit = tmp_path / name
    unit.write_text(text)
    target = unit if "@" not in name else tmp_path / "connectd@demo.service"
    if target != unit:
        target.symlink_to(unit)
    result = subprocess.run(
        [analyze, "verify", str(target)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "connectd" not in result.stderr, result.stderr  # no warning about our unit
