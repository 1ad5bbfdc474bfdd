"""Batch hand-off: records go to an executor as an Arrow IPC file in a RAM-backed directory.

The pool writes the batch (``write_table``, in a thread) to
``/dev/shm/connectd-<daemon pid>/<pool>/``; the executor memory-maps it (``Batch.table``, no copy)
and builds a Spark DataFrame from it without a per-row Python loop (``Batch.df``). The pool
deletes the file when the write ends, on every path including a kill; a daemon killed outright
leaves its directory behind, and the next daemon removes directories of dead pids
(``sweep_stale``).

The same scheme gives each executor a scratch directory on disk (``spark.local.dir``, TMPDIR):
a killed JVM cannot clean up after itself, so the pool deletes the directory after the reap.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

_PREFIX = "connectd-"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_pool_ids = itertools.count(1)


def default_handoff_root() -> Path:
    """``/dev/shm`` when it is a writable directory (RAM-backed), else the temp directory."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return Path(tempfile.gettempdir())


def default_work_root() -> Path:
    return Path(tempfile.gettempdir())


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(root: Path) -> list[Path]:
    """Remove ``root/connectd-<pid>`` directories whose daemon is no longer alive."""
    removed: list[Path] = []
    with contextlib.suppress(FileNotFoundError):
        for entry in root.iterdir():
            pid = entry.name.removeprefix(_PREFIX)
            if entry.name.startswith(_PREFIX) and pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


class ScratchDir:
    """A per-pool directory under ``root/connectd-<daemon pid>/``; ``remove()`` deletes it and
    the daemon directory too once no other pool of this process uses it."""

    def __init__(self, root: Path) -> None:
        self.daemon_dir = root / f"{_PREFIX}{os.getpid()}"
        self.path = self.daemon_dir / f"pool-{next(_pool_ids)}"
        self._names = itertools.count(1)

    def create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def new_path(self, label: str, suffix: str = "") -> Path:
        """A fresh name in the directory (not created)."""
        return self.path / f"{_SAFE.sub('_', label)[:80]}-{next(self._names)}{suffix}"

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.daemon_dir.rmdir()  # fails while another pool of this daemon still uses it


def write_table(table: pa.Table, path: Path) -> Path:
    """Write ``table`` as an Arrow IPC file at ``path`` (blocking; run it in a thread).

    Written under a temporary name and renamed, so the executor never sees half a file.
    """
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return path


def unlink_quietly(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def staging_path(path: Path) -> Path:
    """Where ``Batch.df`` stages the batch as Parquet: next to the hand-off file, so the pool
    deletes it with that file on every path, kills included."""
    return path.with_name(f"{path.name}.parquet")


class Batch:
    """The batch as a write function sees it, inside the executor; valid until it returns.

    * ``table``: the Arrow table, memory-mapped from the hand-off file (no copy).
    * ``df``: a Spark DataFrame of it. pyarrow writes the table as Parquet next to the hand-off
      file (RAM-backed) and Spark reads that with the schema given: columnar all the way.
      Measured here (warm executor, local[2], 200-byte records, write to Parquet): 275k
      records/s at 100k per batch and 620k at 500k, against 160k and 240k through
      ``createDataFrame(pyarrow.Table)``, which ships the data inside the tasks.
    * ``arrow_df()``: the same DataFrame through ``spark.createDataFrame(pyarrow.Table)``, for
      types Parquet cannot carry (Spark 4.0 and newer: Spark 3.5 takes pandas frames only).
    * ``path``: the Arrow IPC file itself.
    """

    def __init__(self, path: Path, spark: Any) -> None:
        self.path = path
        self._spark = spark
        self._source: Any = None

    @cached_property
    def table(self) -> pa.Table:
        import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

        self._source = pa.memory_map(str(self.path), "r")
        return pa.ipc.open_file(self._source).read_all()

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows)

    @cached_property
    def df(self) -> Any:
        import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

        spark = self._require_spark()
        staged = staging_path(self.path)
        pq.write_table(self.table, str(staged), compression="none")
        reader = spark.read
        try:
            from pyspark.sql.pandas.types import from_arrow_schema

            # A known schema spares Spark a job that reads it back from the file.
            reader = reader.schema(from_arrow_schema(self.table.schema))
        except Exception:  # a type Spark cannot map from Arrow: let Spark read the footer
            pass
        return reader.parquet(str(staged))

    def arrow_df(self) -> Any:
        spark = self._require_spark()
        if int(spark.version.split(".")[0]) < 4:
            raise RuntimeError(
                f"Spark {spark.version} cannot make a DataFrame of a pyarrow.Table"
                " (createDataFrame takes one from Spark 4.0 on): use batch.df"
            )
        return spark.createDataFrame(self.table)

    def _require_spark(self) -> Any:
        if self._spark is None:
            raise RuntimeError("this pool runs without Spark (with_spark=False): use batch.table")
        return self._spark

    def release(self) -> None:
        """Drop the references so the mapped file's memory is freed with the file."""
        self.__dict__.pop("df", None)
        self.__dict__.pop("table", None)
        if self._source is not None:
            self._source.close()
            self._source = None


def iter_files(directory: Path) -> Iterator[Path]:
    """Files left in a hand-off directory (for checks and tests)."""
    if directory.is_dir():
        yield from (p for p in directory.rglob("*") if p.is_file())
