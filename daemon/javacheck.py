"""Find a Java runtime that Spark can use, or say exactly what to install.

Spark 4.1 runs on Java 17 or 21. The check runs once at start-up (before any executor is
spawned), so it may block briefly; it never runs on the event loop.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from daemon.errors import JavaUnavailable

MIN_JAVA = 17
INSTALL_HINT = (
    "install a Java 17 or 21 runtime (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) "
    "or point JAVA_HOME at one"
)
_VERSION_RE = re.compile(r'version "(?P<v>[^"]+)"')


@dataclass(frozen=True)
class Java:
    executable: Path
    major: int
    version: str


def parse_major(version: str) -> int:
    """'17.0.15' → 17, '1.8.0_392' → 8, '21' → 21."""
    parts = re.split(r"[._+-]", version)
    first = int(parts[0])
    if first == 1 and len(parts) > 1:
        return int(parts[1])
    return first


def find_java(env: dict[str, str] | None = None) -> Java:
    """Locate `java` (JAVA_HOME first, then PATH) and check its version.

    Raises JavaUnavailable with what to install when none is found or it is older than 17.
    """
    env = dict(os.environ if env is None else env)
    candidates: list[Path] = []
    if env.get("JAVA_HOME"):
        candidates.append(Path(env["JAVA_HOME"]) / "bin" / "java")
    on_path = shutil.which("java", path=env.get("PATH"))
    if on_path:
        candidates.append(Path(on_path))
    for exe in candidates:
        if not (exe.is_file() and os.access(exe, os.X_OK)):
            continue
        try:
            proc = subprocess.run(
                [str(exe), "-version"], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise JavaUnavailable(f"could not run {exe} -version ({exc}); {INSTALL_HINT}") from exc
        match = _VERSION_RE.search(proc.stderr + proc.stdout)
        if not match and proc.returncode < 0:  # not a Java problem: say what happened
            raise JavaUnavailable(
                f"{exe} -version was killed by signal {-proc.returncode} before it printed its"
                " version; start connectd again"
            )
        if not match:
            raise JavaUnavailable(f"could not read the version printed by {exe}; {INSTALL_HINT}")
        version = match.group("v")
        major = parse_major(version)
        if major < MIN_JAVA:
            raise JavaUnavailable(
                f"Java {version} at {exe} is too old: Spark needs Java {MIN_JAVA} or newer; "
                f"{INSTALL_HINT}"
            )
        return Java(executable=exe, major=major, version=version)
    where = "JAVA_HOME or PATH"
    raise JavaUnavailable(f"no Java runtime found on {where}; {INSTALL_HINT}")
