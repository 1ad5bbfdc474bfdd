"""Java detection with real executables standing in for `java` (shell scripts in a tmp dir)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from daemon.errors import JavaUnavailable
from daemon.javacheck import find_java, parse_major


@pytest.mark.parametrize(
    ("text", "major"), [("17.0.15", 17), ("21", 21), ("1.8.0_392", 8), ("11.0.2+9", 11)]
)
def test_parse_major(text: str, major: int) -> None:
    assert parse_major(text) == major


def fake_java(home: Path, version: str) -> Path:
    bin_dir = home / "bin"
    bin_dir.mkdir(parents=True)
    exe = bin_dir / "java"
    exe.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2025-04-15' >&2\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_java_home_wins_and_version_is_read(tmp_path: Path) -> None:
    exe = fake_java(tmp_path / "jdk", "21.0.2")
    java = find_java({"JAVA_HOME": str(tmp_path / "jdk"), "PATH": "/nonexistent"})
    assert java.executable == exe
    assert java.major == 21


def test_too_old_java_names_what_to_install(tmp_path: Path) -> None:
    fake_java(tmp_path / "jdk", "1.8.0_392")
    with pytest.raises(JavaUnavailable, match=r"too old.*openjdk-17-jre-headless"):
        find_java({"JAVA_HOME": str(tmp_path / "jdk"), "PATH": "/nonexistent"})


def test_a_java_killed_by_a_signal_is_not_called_unreadable(tmp_path: Path) -> None:
    bin_dir = tmp_path / "jdk" / "bin"
    bin_dir.mkdir(parents=True)
    exe = bin_dir / "java"
    exe.write_text("#!/bin/sh\nkill -KILL $$\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(JavaUnavailable, match=r"-version was killed by signal 9"):
        find_java({"JAVA_HOME": str(tmp_path / "jdk"), "PATH": "/nonexistent"})


def test_no_java_names_what_to_install() -> None:
    with pytest.raises(JavaUnavailable, match=r"no Java runtime found.*JAVA_HOME"):
        find_java({"PATH": "/nonexistent"})


def test_the_machines_java_is_usable() -> None:
    java = find_java()
    assert java.major >= 17
