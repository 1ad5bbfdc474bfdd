"""Crash-safe file primitives on the local filesystem (POSIX).

Each function leaves a file either fully written under its final name or not there at all, even
if the process is killed at any point, and returns only once the result is durable (file and
directory fsynced). Leftover temporary files are dot-prefixed (``.<name>.<random>.tmp``) in the
target's directory; ``remove_stale_temps`` clears them.

These are blocking calls (fsync can take milliseconds): call them off the event loop.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from pathlib import Path

TEMP_SUFFIX = ".tmp"


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a directory's entries (created, renamed, removed names) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}{TEMP_SUFFIX}")


def _write_temp(path: Path, data: bytes, mode: int) -> Path:
    temp = _temp_path(path)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    os.close(fd)
    return temp


def atomic_write(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically: readers see the old content or the new one.

    A temporary file in the same directory is written and fsynced, renamed over ``path``, and the
    directory is fsynced.
    """
    target = Path(path)
    temp = _write_temp(target, data, mode)
    try:
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    fsync_dir(target.parent)


def publish_exclusive(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
    """Create ``path`` with ``data``, atomically and only if it does not exist yet.

    Raises ``FileExistsError`` if the name is taken. Unlike ``O_CREAT|O_EXCL`` followed by a
    write, no reader (or racing creator) can ever see the file empty or half written: the content
    is written and fsynced under a temporary name, then hard-linked to ``path`` (``link`` fails
    with ``EEXIST`` atomically), then the directory is fsynced. Needs a filesystem with hard
    links (any local POSIX one).
    """
    target = Path(path)
    temp = _write_temp(target, data, mode)
    try:
        os.link(temp, target)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
    fsync_dir(target.parent)


def create_marker(path: str | os.PathLike[str]) -> bool:
    """Create an empty file durably; ``False`` if it already existed (idempotent)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    fsync_dir(Path(path).parent)
    return True


def remove_stale_temps(directory: str | os.PathLike[str], older_than: float = 600.0) -> int:
    """Delete this module's temporary files in ``directory`` last modified more than
    ``older_than`` seconds ago (a live writer's temp lives milliseconds). Returns the count."""
    removed = 0
    cutoff = time.time() - older_than
    with contextlib.suppress(FileNotFoundError), os.scandir(directory) as entries:
        for entry in entries:
            if not (entry.name.startswith(".") and entry.name.endswith(TEMP_SUFFIX)):
                continue
            with contextlib.suppress(FileNotFoundError):
                if entry.stat(follow_symlinks=False).st_mtime <= cutoff:
                    os.unlink(entry.path)
                    removed += 1
    return removed
