"""What the development tools (dev/kafka/kafkactl.py, dev/registry/registryctl.py) share: ports on
loopback, a lock per run directory, Java ≥ 17, and the /proc view of a process they started.

Standard library only: the tools run with any Python 3.11 (`make kafka-down` uses the system's).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int, *, reuse: bool = False) -> bool:
    """Whether `port` on 127.0.0.1 can be bound. `reuse`: as the JVM binds it (SO_REUSEADDR),
    so connections a stopped server left in TIME_WAIT do not count."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Serialise concurrent runs of a tool on one directory (several helpers share a box)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def find_java(missing: type[Exception], needed_by: str) -> str:
    """The java executable ($JAVA_HOME first), checked to be version 17 or newer; else
    `missing` saying what to install (`needed_by` names what needs it)."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise missing(
            "java not found: install Java 17 or newer "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    major = 0 if not m else int(m.group(2) if m.group(1) == "1" else m.group(1))
    if major < 17:
        raise missing(
            f"{java} is Java {major or '?'}; {needed_by} needs Java 17 or newer "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    return java


def proc_state(pid: int) -> str | None:
    """The /proc state letter of `pid`, or None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2]


def is_alive(pid: int) -> bool:
    """True while `pid` runs; reaps it if it is our child and has exited."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
        if proc_state(pid) in ("Z", "X"):
            # Our child whose main thread has ended while the JVM's other threads still exit:
            # WNOHANG says "running" until the last one is gone, so collect it now.
            os.waitpid(pid, 0)
            return False
    return proc_state(pid) not in (None, "Z", "X")


def tail(path: Path, n: int = 40) -> str:
    """The last `n` lines of a log file, or a note that it is missing."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return f"({path} not found)"


def die_with_parent() -> None:
    """`preexec_fn`: SIGKILL this child when the process that started it dies
    (PR_SET_PDEATHSIG), so a killed test session leaves no JVM behind."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
