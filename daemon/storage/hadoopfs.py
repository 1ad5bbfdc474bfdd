"""A table on any Hadoop filesystem (``hdfs://``, ``viewfs://``, ``abfs://``, ``s3a://`` …),
reached through the JVM of an executor process (``spark._jvm``, the session's Hadoop
configuration), so it runs only inside executor jobs: the daemon has no JVM, and a hung
filesystem call is killed with its executor like any write.

What is guaranteed where (``TableFs.publish_exclusive`` is the commit point of the log):

- **HDFS** (``hdfs://``, ``webhdfs://``, ``viewfs://`` mounted on HDFS): the record is written
  and closed (``hsync``) under a temporary name, then ``rename``d to its final name. The
  namenode performs a rename atomically and refuses an existing destination, so exactly one
  of racing committers gets a sequence number. Guaranteed.
- **ABFS** (``abfs://``, ``abfss://``) with a hierarchical namespace: the same rename, which
  the service performs atomically and refuses onto an existing path. Guaranteed only with the
  hierarchical namespace enabled (the connector cannot see it; the operator must know).
- **Local files through Hadoop** (``viewfs://`` mounted on ``file://``, also ``file://`` given
  to this backend): Hadoop's local ``rename`` replaces an existing file and its
  ``create(overwrite=false)`` checks then creates, so neither is exclusive. The record is
  instead hard-linked on the resolved local path (``daemon.storage.atomic``), exactly as the
  local backend does. Guaranteed.
- **S3A** (``s3a://``): a rename is a copy and a delete, not atomic. Hadoop 3.4.2 (the version
  Spark 4.1 bundles; checked in hadoop-aws-3.4.2's ``Constants``) can create with
  ``If-None-Match: *`` (``fs.s3a.create.conditional.enabled``, HADOOP-19256): the object
  appears whole at ``close()`` or the write fails. Used when the filesystem reports that path
  capability; otherwise the table is refused with an error saying so.
- Anything else (``gs://``, ``wasb://``, ``oss://`` …) is refused with an error naming the
  scheme: no atomic exclusive create is known there.

Staging dirs have no ``flock`` here: a staging dir is written, listed and committed by one
executor job, which the pool kills at its deadline. Its commit id starts with its creation
time, so once it is older than ``stale_after`` (set well above the write deadline) no live
writer can still publish a record naming it, and ``recover`` may delete it (after re-reading
the log). Until then a killed write's leftovers stay under ``_connectd/staging``, where no
reader looks. The clocks of the hosts involved must agree to well within ``stale_after``.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from daemon.errors import ConfigError
from daemon.storage import atomic
from daemon.storage.fs import is_hidden, join, parent

#: Schemes whose rename is atomic and refuses an existing destination.
ATOMIC_RENAME = ("hdfs", "webhdfs", "swebhdfs", "abfs", "abfss")
S3A_CONDITIONAL = "fs.s3a.create.conditional.enabled"
TEMP_SUFFIX = ".tmp"


class HadoopFs:
    """A table at ``location`` (a Hadoop URI) through ``spark``'s JVM; see the module docs.

    ``ConfigError`` if the filesystem cannot give exclusive creation.
    """

    def __init__(self, spark: Any, location: str, *, stale_after: float = 600.0) -> None:
        self.location = location.rstrip("/")
        self._stale_after = stale_after
        jvm = spark._jvm
        self._jvm = jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        conf = spark._jsc.hadoopConfiguration()
        root = self._Path(self.location)
        self._fs = root.getFileSystem(conf)
        self._held: set[str] = set()
        self._fs.mkdirs(root)
        resolved = self._fs.resolvePath(root)
        self.scheme = str(resolved.toUri().getScheme() or "file").lower()
        self._local_root: str | None = None
        if self.scheme == "file":
            self._mode = "link"
            self._local_root = str(resolved.toUri().getPath())
        elif self.scheme in ATOMIC_RENAME:
            self._mode = "rename"
        elif self.scheme == "s3a" and bool(
            resolved.getFileSystem(conf).hasPathCapability(resolved, S3A_CONDITIONAL)
        ):
            self._mode = "conditional-create"
        else:
            raise ConfigError(
                f"path: {location} is on a {self.scheme}:// filesystem, which offers no atomic "
                "exclusive create (needed for the exactly-once commit log); use HDFS, ABFS "
                "with a hierarchical namespace, S3A with fs.s3a.create.conditional.enabled=true"
                " on a store that supports conditional writes, or a local directory"
            )
        self.kind = f"{self.scheme} ({self._mode})"

    # ---- paths and errors ----

    def uri(self, name: str) -> str:
        return f"{self.location}/{name}" if name else self.location

    def _p(self, name: str) -> Any:
        return self._Path(self.uri(name))

    def _local(self, name: str) -> str:
        assert self._local_root is not None
        return f"{self._local_root.rstrip('/')}/{name}" if name else self._local_root

    # ---- TableFs ----

    def ensure_root(self) -> None:
        self._fs.mkdirs(self._p(""))

    def mkdirs(self, name: str) -> set[str]:
        if name:
            self._fs.mkdirs(self._p(name))
        return set()  # the filesystem makes its metadata durable itself

    def listdir(self, name: str) -> list[str]:
        try:
            entries = _j(self._fs.listStatus, self._p(name))
        except FileNotFoundError:
            return []
        return [str(s.getPath().getName()) for s in entries]

    def _status(self, name: str) -> Any | None:
        try:
            return _j(self._fs.getFileStatus, self._p(name))
        except FileNotFoundError:
            return None

    def read(self, name: str) -> bytes | None:
        try:
            stream = _j(self._fs.open, self._p(name))
        except FileNotFoundError:
            return None
        try:
            return bytes(_j(self._jvm.org.apache.commons.io.IOUtils.toByteArray, stream))
        finally:
            stream.close()

    def exists(self, name: str) -> bool:
        return self._status(name) is not None

    def is_file(self, name: str) -> bool:
        status = self._status(name)
        return status is not None and bool(status.isFile())

    def _write(self, name: str, data: bytes) -> None:
        out = _j(self._fs.create, self._p(name), False)
        try:
            _j(out.write, bytearray(data))
            if out.hasCapability("hsync"):
                _j(out.hsync)
        finally:
            _j(out.close)  # S3A: the conditional PUT happens here, and may fail here

    def publish_exclusive(self, name: str, data: bytes) -> None:
        if self._mode == "link":
            atomic.publish_exclusive(self._local(name), data)
        elif self._mode == "conditional-create":
            self._write(name, data)
        else:
            temp = join(parent(name), f".{name.rpartition('/')[2]}.{uuid.uuid4().hex}{TEMP_SUFFIX}")
            self._write(temp, data)
            moved = bool(_j(self._fs.rename, self._p(temp), self._p(name)))
            if not moved:
                self.remove_tree(temp)
                if self.exists(name):
                    raise FileExistsError(self.uri(name))
                raise OSError(f"could not rename {self.uri(temp)} to {self.uri(name)}")

    def create_marker(self, name: str) -> bool:
        try:
            return bool(_j(self._fs.createNewFile, self._p(name)))
        except FileExistsError:
            return False

    def rename(self, src: str, dst: str) -> None:
        if bool(_j(self._fs.rename, self._p(src), self._p(dst))):
            return
        if not self.exists(src):
            raise FileNotFoundError(self.uri(src))
        if self.is_file(dst):
            # A copying rename (S3A) was killed after the copy: the copy is whole (objects
            # appear whole) and data files are never rewritten, so the move is done.
            self.remove_tree(src)
            return
        raise OSError(f"could not rename {self.uri(src)} to {self.uri(dst)}")

    def sync_dirs(self, names: Iterable[str]) -> None:
        return None  # renames and creations are durable when the call returns

    def remove_tree(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            _j(self._fs.delete, self._p(name), True)

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            _j(self._fs.delete, self._p(name), False)

    def walk_files(self, name: str) -> list[str]:
        found: list[str] = []
        pending = [""]
        while pending:
            rel = pending.pop()
            try:
                entries = _j(self._fs.listStatus, self._p(join(name, rel)))
            except FileNotFoundError:
                continue
            for status in entries:
                entry = str(status.getPath().getName())
                if is_hidden(entry):
                    continue
                if status.isDirectory():
                    pending.append(join(rel, entry))
                else:
                    found.append(join(rel, entry))
        return sorted(found)

    def remove_stale_temps(self, name: str, older_than: float) -> None:
        cutoff_ms = (time.time() - older_than) * 1000
        try:
            entries = list(_j(self._fs.listStatus, self._p(name)))
        except FileNotFoundError:
            return
        for status in entries:
            entry = str(status.getPath().getName())
            stale = status.getModificationTime() <= cutoff_ms
            if entry.startswith(".") and entry.endswith(TEMP_SUFFIX) and stale:
                self.remove_tree(join(name, entry))

    # ---- staging guard: an age lease ----

    def hold(self, commit_id: str) -> None:
        self._held.add(commit_id)

    def release(self, commit_id: str) -> None:
        self._held.discard(commit_id)

    @contextlib.contextmanager
    def orphan(self, commit_id: str) -> Iterator[bool]:
        if commit_id in self._held:
            yield False
            return
        yield self._age(commit_id) > self._stale_after

    def _age(self, commit_id: str) -> float:
        prefix = commit_id.partition("-")[0]
        if len(prefix) == 13 and prefix.isdigit():
            created = int(prefix) / 1000.0
        else:
            status = self._status(join("_connectd/staging", commit_id))
            created = time.time() if status is None else status.getModificationTime() / 1000.0
        return time.time() - created

    def sweep_guards(self, staging: set[str], held: set[str]) -> None:
        return None  # no guard files

    def close(self) -> None:
        self._held.clear()


_JAVA_ERRORS: dict[str, type[OSError]] = {
    "java.io.FileNotFoundException": FileNotFoundError,
    "org.apache.hadoop.fs.FileAlreadyExistsException": FileExistsError,
    "org.apache.hadoop.fs.s3a.RemoteFileChangedException": FileExistsError,
}


def _j(method: Any, *args: Any) -> Any:
    """Call a Java method; Java's ``FileNotFoundException`` and ``FileAlreadyExistsException``
    come out as Python's ``FileNotFoundError`` and ``FileExistsError``."""
    try:
        return method(*args)
    except Exception as exc:
        java = getattr(exc, "java_exception", None)
        if java is None:
            raise
        error = _JAVA_ERRORS.get(str(java.getClass().getName()))
        if error is None:
            raise
        raise error(str(java.getMessage())) from exc
