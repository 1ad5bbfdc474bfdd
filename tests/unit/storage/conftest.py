"""Helpers for the storage tests: killing a forked child at any filesystem step, stand-in
Parquet files for Spark's output, and reading a table back the way a reader would."""

from __future__ import annotations

import io
import itertools
import os
import sys
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.storage.commitlog import META, CommitLog

KILLED = 77
#: The os functions that touch the filesystem; the child dies just before the k-th call.
FS_CALLS = ("open", "write", "fsync", "link", "unlink", "rename", "replace", "mkdir", "rmdir")
REAL_WRITE = os.write  # for reporting from a child without counting as a step


class Kit:
    """What the storage tests share (given by the ``kit`` fixture)."""

    killed = KILLED

    @staticmethod
    def run_killed_at(step: int, fn: Callable[[], object]) -> int:
        """Run ``fn`` in a forked child killed (``os._exit``) right before its ``step``-th
        filesystem call. Returns the child's exit code: ``KILLED``, or 0 if ``fn`` finished
        first. Any other code means ``fn`` raised (the traceback is on stderr)."""
        sys.stdout.flush()
        sys.stderr.flush()
        with warnings.catch_warnings():  # 3.12+ warns about fork in threaded processes
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            code = 3
            try:
                counter = itertools.count()

                def wrap(real: Callable[..., Any]) -> Callable[..., Any]:
                    def call(*args: Any, **kwargs: Any) -> Any:
                        if next(counter) == step:
                            os._exit(KILLED)
                        return real(*args, **kwargs)

                    return call

                for name in FS_CALLS:
                    setattr(os, name, wrap(getattr(os, name)))
                fn()
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)

    @staticmethod
    def parquet(tp: TopicPartition, start: int, end: int) -> bytes:
        """A small Parquet file holding rows for offsets ``start..end-1`` (Spark's stand-in)."""
        table = pa.table(
            {
                "kafka_topic": [tp.topic] * (end - start),
                "kafka_partition": pa.array([tp.partition] * (end - start), pa.int32()),
                "kafka_offset": pa.array(range(start, end), pa.int64()),
            }
        )
        buf = io.BytesIO()
        pq.write_table(table, buf)
        return buf.getvalue()

    @staticmethod
    def write_files(directory: Path, files: Mapping[str, bytes]) -> None:
        """Write files with os-level calls (so a kill can land in the middle of a write)."""
        for rel, data in files.items():
            path = directory / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            half = len(data) // 2
            os.write(fd, data[:half])
            os.write(fd, data[half:])
            os.close(fd)

    def stage_and_commit(
        self,
        table: Path,
        files: Mapping[str, bytes],
        ranges: Iterable[OffsetRange],
        *,
        epoch: int,
        task: int = 0,
        connector: str = "sink",
    ) -> None:
        """What a sink task does for one batch: stage the write, then commit it."""
        log = CommitLog(table).open()
        commit_id = log.new_commit_id()
        self.write_files(log.stage_dir(commit_id), files)
        log.commit(connector, task, epoch, ranges, commit_id=commit_id)
        log.close()

    @staticmethod
    def offsets_in(table: Path) -> Counter[tuple[int, int]]:
        """How many times a reader of the table sees each (partition, offset)."""
        dataset = ds.dataset(str(table), format="parquet", partitioning="hive")
        rows = dataset.to_table(columns=["kafka_partition", "kafka_offset"]).to_pydict()
        return Counter(zip(rows["kafka_partition"], rows["kafka_offset"], strict=True))

    def assert_exactly_once(self, table: Path, ends: Mapping[TopicPartition, int]) -> None:
        """Readers see every offset below each partition's end exactly once, nothing else."""
        expected = Counter((tp.partition, o) for tp, end in ends.items() for o in range(end))
        assert self.offsets_in(table) == expected

    @staticmethod
    def assert_clean(table: Path) -> None:
        """After recovery: no staging dir, lock or temp file left; every record done."""
        meta = table / META
        assert os.listdir(meta / "staging") == []
        assert os.listdir(meta / "locks") == []
        logs = sorted(os.listdir(meta / "log"))
        assert all(n.endswith(".json") and not n.startswith(".") for n in logs), logs
        assert sorted(os.listdir(meta / "done")) == [n.removesuffix(".json") for n in logs]


@pytest.fixture
def kit() -> Kit:
    return Kit()
