"""The filesystem under a table's commit log: the operations it needs, and the local backend.

``CommitLog`` touches its table only through a ``TableFs``, with names relative to the table's
root (``"_connectd/log/000…1.json"``, ``""`` is the root itself). Two backends:

- ``LocalFs`` (this module): a plain path or ``file:`` URI, through the daemon's own system
  calls. Exclusive creation is a hard link of a fully written and fsynced temporary file
  (``link`` fails with ``EEXIST`` atomically); moves are ``rename``; every change is fsynced
  (files and directories); a live writer's staging dir is protected by an ``flock``.
- ``HadoopFs`` (``daemon.storage.hadoopfs``): any Hadoop filesystem URI, through the JVM of an
  executor process (py4j). See that module for which filesystems give the guarantees.

What every backend guarantees (the commit log's correctness rests on exactly these):

- ``publish_exclusive(name, data)``: afterwards ``name`` exists with exactly ``data``, or
  ``FileExistsError`` was raised and someone else's content is there. No reader (or racing
  creator) ever sees the file partly written, even if the process is killed at any instant.
- ``rename(src, dst)``: moves one file; ``FileNotFoundError`` if ``src`` is missing. Data files
  have unique names, so overwrite semantics never matter.
- Durability: a call returns once its effect survives a crash of this host (fsync locally; the
  filesystem's own durability otherwise). ``sync_dirs`` makes renames and creations durable.
- Staging guard: ``hold(id)`` marks a staging dir as written by a live writer; ``orphan(id)``
  yields ``True`` only if no live writer can still publish a commit record naming it (then the
  caller may delete it after re-reading the log). ``LocalFs`` uses ``flock`` (a killed writer's
  lock is released by the kernel at once); ``HadoopFs`` an age lease (see there).

Every method blocks on I/O: call them off the event loop.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from daemon.storage.atomic import create_marker, fsync_dir, publish_exclusive, remove_stale_temps


def is_hidden(name: str) -> bool:
    """Names every reader skips (Spark, pyarrow, Hive): ``_SUCCESS``, ``_temporary``, ``.crc``."""
    return name.startswith(("_", "."))


def join(*parts: str) -> str:
    """Join relative names with ``/`` (empty parts dropped)."""
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


def parent(name: str) -> str:
    return name.rpartition("/")[0]


class TableFs(Protocol):
    """The operations of a table's filesystem; names are relative to the table's root."""

    #: The table's root as configured (a local path, or a URI).
    location: str
    #: A short description for messages and logs (``local``, ``hdfs (atomic rename)`` …).
    kind: str

    def uri(self, name: str) -> str:
        """Where ``name`` is, as Spark would be given it (a path or a URI)."""
        ...

    def ensure_root(self) -> None: ...

    def mkdirs(self, name: str) -> set[str]:
        """``mkdir -p``; the directories whose entries changed (for ``sync_dirs``)."""
        ...

    def listdir(self, name: str) -> list[str]:
        """Entry names of directory ``name``; ``[]`` if it does not exist."""
        ...

    def read(self, name: str) -> bytes | None:
        """The content of file ``name``; ``None`` if it does not exist."""
        ...

    def exists(self, name: str) -> bool: ...

    def is_file(self, name: str) -> bool: ...

    def publish_exclusive(self, name: str, data: bytes) -> None: ...

    def create_marker(self, name: str) -> bool:
        """Create an empty file (idempotent); ``False`` if it existed."""
        ...

    def rename(self, src: str, dst: str) -> None: ...

    def sync_dirs(self, names: Iterable[str]) -> None: ...

    def remove_tree(self, name: str) -> None:
        """Delete a file or directory tree; missing is fine."""
        ...

    def remove(self, name: str) -> None:
        """Delete one file; missing is fine (clean-up of the log: records, markers)."""
        ...

    def walk_files(self, name: str) -> list[str]:
        """Files under directory ``name``, relative to it, sorted; hidden names skipped."""
        ...

    def remove_stale_temps(self, name: str, older_than: float) -> None: ...

    def hold(self, commit_id: str) -> None: ...

    def release(self, commit_id: str) -> None: ...

    def orphan(self, commit_id: str) -> contextlib.AbstractContextManager[bool]: ...

    def sweep_guards(self, staging: set[str], held: set[str]) -> None:
        """Drop guard leftovers of writes whose staging dir is gone."""
        ...

    def close(self) -> None:
        """Release every guard this instance holds."""
        ...


class LocalFs:
    """A table on the local filesystem (see the module docs)."""

    kind = "local"

    def __init__(self, root: str | os.PathLike[str], meta: str = "_connectd") -> None:
        self.root = Path(root)
        self.location = str(self.root)
        self._locks = join(meta, "locks")
        self._fds: dict[str, int] = {}

    def _p(self, name: str) -> Path:
        return self.root / name if name else self.root

    def uri(self, name: str) -> str:
        return str(self._p(name))

    def ensure_root(self) -> None:
        if not self.root.is_dir():
            self.root.mkdir(parents=True, exist_ok=True)
            fsync_dir(self.root.parent)

    def mkdirs(self, name: str) -> set[str]:
        if not name or self._p(name).is_dir():
            return set()
        changed = self.mkdirs(parent(name))
        with contextlib.suppress(FileExistsError):
            self._p(name).mkdir()
        fsync_dir(self._p(parent(name)))
        return changed | {parent(name)}

    def listdir(self, name: str) -> list[str]:
        try:
            return os.listdir(self._p(name))
        except FileNotFoundError:
            return []

    def read(self, name: str) -> bytes | None:
        try:
            return self._p(name).read_bytes()
        except FileNotFoundError:
            return None

    def exists(self, name: str) -> bool:
        return self._p(name).exists()

    def is_file(self, name: str) -> bool:
        return self._p(name).is_file()

    def publish_exclusive(self, name: str, data: bytes) -> None:
        publish_exclusive(self._p(name), data)

    def create_marker(self, name: str) -> bool:
        return create_marker(self._p(name))

    def rename(self, src: str, dst: str) -> None:
        os.rename(self._p(src), self._p(dst))

    def sync_dirs(self, names: Iterable[str]) -> None:
        for name in sorted(set(names)):
            fsync_dir(self._p(name))

    def remove_tree(self, name: str) -> None:
        shutil.rmtree(self._p(name), ignore_errors=True)

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._p(name))

    def walk_files(self, name: str) -> list[str]:
        root = self._p(name)
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not is_hidden(d))
            rel = Path(dirpath).relative_to(root)
            found += [str(rel / n) for n in filenames if not is_hidden(n)]
        return sorted(found)

    def remove_stale_temps(self, name: str, older_than: float) -> None:
        remove_stale_temps(self._p(name), older_than)

    # ---- staging guard: flock ----

    def _lock_path(self, commit_id: str) -> Path:
        return self._p(join(self._locks, f"{commit_id}.lock"))

    def hold(self, commit_id: str) -> None:
        if commit_id not in self._fds:
            self._fds[commit_id] = _lock(self._lock_path(commit_id))

    def release(self, commit_id: str) -> None:
        fd = self._fds.pop(commit_id, None)
        if fd is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._lock_path(commit_id))
            os.close(fd)

    @contextlib.contextmanager
    def orphan(self, commit_id: str) -> Iterator[bool]:
        if commit_id in self._fds:
            yield False
            return
        fd = _try_lock(self._lock_path(commit_id))
        if fd is None:
            yield False  # a live writer holds it
            return
        try:
            yield True
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._lock_path(commit_id))
        finally:
            os.close(fd)

    def sweep_guards(self, staging: set[str], held: set[str]) -> None:
        for entry in self.listdir(self._locks):
            commit_id = entry.removesuffix(".lock")
            if commit_id in held or commit_id in self._fds or commit_id in staging:
                continue
            # Left by a writer killed before it made its staging dir, or after its commit.
            fd = _try_lock(self._lock_path(commit_id))
            if fd is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._lock_path(commit_id))
                os.close(fd)

    def close(self) -> None:
        for commit_id in list(self._fds):
            os.close(self._fds.pop(commit_id))


def _lock(path: Path) -> int:
    """Hold an exclusive ``flock`` on ``path`` (waits); the fd keeps it until closed."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _same_file(fd, path):
            return fd
        os.close(fd)  # a cleaner unlinked it between our open and flock: take the new one


def _try_lock(path: Path) -> int | None:
    """``_lock`` without waiting: ``None`` if someone holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    if not _same_file(fd, path):
        os.close(fd)
        return None
    return fd


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
