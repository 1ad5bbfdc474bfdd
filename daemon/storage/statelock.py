"""One daemon per ``state.dir``: an exclusive lock held for the daemon's whole lifetime.

Two daemons on one state directory would both run the connectors stored there and overwrite
each other's state file (a connector created through one, answered 201, would be gone after a
restart). ``StateDirLock.acquire`` takes a non-blocking ``flock`` on ``<state.dir>/connectd.lock``
before anything else is started or read, and writes the holder's PID into it so that the daemon
refused can name it. The kernel drops the lock when the holder's process ends, however it ends
(a SIGKILL leaves no stale lock). The file descriptor is not inherited by child processes
(executors, the REST front), so an orphaned child never keeps a directory locked.

Distinct from the per-draw lock ``storage.epochs`` takes on ``epochs/.lock``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from daemon.errors import ConfigError, ConnectdError

LOCK_NAME = "connectd.lock"


class StateDirLocked(ConnectdError):
    """Another live process holds the state directory's lock (exit 75, EX_TEMPFAIL: it may be
    free later, once the other daemon has stopped)."""

    retriable = False


class StateDirLock:
    """The lock on ``state_dir`` (see the module docstring). ``acquire`` once; ``release`` is
    idempotent."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, creating the directory if needed; ``StateDirLocked`` naming the
        directory and the holder's PID if another process has it, ``ConfigError`` if the
        directory cannot be created or written."""
        if self._fd is not None:
            return
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ConfigError(
                f"state.dir {self.state_dir} cannot be used ({exc.strerror or exc}); set state.dir"
                " in the worker file to a directory this user can write"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ConfigError(
                    f"state.dir {self.state_dir}: cannot lock {self.path} ({exc.strerror})"
                ) from exc
            who = f"pid {holder}" if holder is not None else "a process whose pid is not known"
            raise StateDirLocked(
                f"state.dir {self.state_dir} is in use by another connectd daemon ({who} holds "
                f"{self.path}); stop that daemon, or give this one its own state.dir"
            ) from None
        # Ours now: record who holds it (read only by a daemon that is refused).
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Let the next daemon have the directory. The file stays: unlinking it while another
        process waits on the old inode would let two daemons each hold "the" lock."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
