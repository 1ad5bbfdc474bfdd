"""``root_cause``: the line a failed write's error leads with (issue 13, item 6), from the Java
traces a real Spark 4.1 write produced on a full and on a read-only tmpfs (abridged)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from daemon.executor.causes import leaves_state, root_cause

STAGE = "/mnt/t/_connectd/staging/c1"

DISK_FULL = "\n".join(
    [
        "An error occurred while calling o574.save.",
        ": org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows"
        f" to file:{STAGE}. SQLSTATE: 58030",
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRowsError"
        "(QueryExecutionErrors.scala:775)",
        "\tSuppressed: org.apache.spark.util.Utils$OriginalTryStackTraceException: Full"
        " stacktrace of original doTryWithCallerStacktrace caller",
        "Caused by: org.apache.parquet.util.AutoCloseables$ParquetCloseResourceException:"
        " Unable to close resource",
        "Caused by: org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device",
        "\tSuppressed: org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device",
        "Caused by: java.io.IOException: No space left on device",
        "\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)",
        "\t... 43 more",
    ]
)

_ATTEMPT = "file:{stage}/_temporary/0/_temporary/attempt_2026_0000_m_000000_0"
MKDIRS = "\n".join(
    [
        "An error occurred while calling o41.save.",
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage"
        " 0.0 failed 1 times, most recent failure: Lost task 0.0 in stage 0.0 (TID 0)"
        f" (192.0.2.2 executor driver): java.io.IOException: Mkdirs failed to create {_ATTEMPT}"
        " (exists=false, cwd=file:/work)",
        "\tat org.apache.hadoop.fs.ChecksumFileSystem.create(ChecksumFileSystem.java:774)",
        f"Caused by: java.io.IOException: Mkdirs failed to create {_ATTEMPT}"
        " (exists=false, cwd=file:/work)",
        "\tat org.apache.hadoop.fs.ChecksumFileSystem.create(ChecksumFileSystem.java:774)",
    ]
)


class Py4JJavaError(Exception):
    """Stands in for py4j's: what matters is the module it comes from."""


Py4JJavaError.__module__ = "py4j.protocol"


class AnalysisException(Exception):
    pass


AnalysisException.__module__ = "pyspark.errors.exceptions.captured"


def test_disk_full_names_enospc_and_the_directory_written_to() -> None:
    exc = Py4JJavaError(DISK_FULL)
    assert root_cause(exc, "/elsewhere") == f"No space left on device on {STAGE}"
    assert leaves_state(exc)


def test_mkdirs_failure_is_read_only_when_the_mount_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Hadoop says "Mkdirs failed" whatever the reason: on a writable file system that (the
    # deepest "Caused by:") is the cause; on a read-only mount (statvfs) the mount is named.
    stage = str(tmp_path / "t" / "_connectd" / "staging" / "c1")
    exc = Py4JJavaError(MKDIRS.replace("{stage}", stage))
    got = root_cause(exc)
    assert got is not None and got.startswith(f"Mkdirs failed to create {stage}/_temporary")
    assert got.endswith("(java.io.IOException)")

    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly())
    assert root_cause(exc) == f"Read-only file system on {stage}"


def test_python_os_errors_by_errno() -> None:
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/d/part-0.parquet")
    assert root_cause(full) == "No space left on device on /d/part-0.parquet"
    ro = OSError(errno.EROFS, os.strerror(errno.EROFS))
    assert root_cause(ro, "/d") == "Read-only file system on /d"
    wrapped = RuntimeError("write failed")
    wrapped.__cause__ = full
    assert root_cause(wrapped) == "No space left on device on /d/part-0.parquet"
    assert leaves_state(wrapped)


def test_generic_java_failure_is_its_deepest_cause() -> None:
    text = (
        "An error occurred while calling o9.save.\n"
        ": org.apache.spark.SparkException: Job aborted.\n\tat a.b(C.java:1)\n"
        "Caused by: java.lang.IllegalStateException: the real reason\n\tat d.e(F.java:2)\n"
    )
    assert root_cause(Py4JJavaError(text)) == "the real reason (java.lang.IllegalStateException)"


@pytest.mark.parametrize("exc", [ValueError("nope"), KeyError("k"), AnalysisException("x")])
def test_plain_python_errors_keep_their_message_and_the_executor(exc: Exception) -> None:
    assert root_cause(exc) is None
    assert not leaves_state(exc)


def test_analysis_error_raised_over_a_java_one_keeps_the_executor() -> None:
    # What PySpark does: ``raise converted from None`` inside ``except Py4JJavaError``.
    try:
        try:
            raise Py4JJavaError("An error occurred while calling o1.load.")
        except Py4JJavaError:
            raise AnalysisException("[PATH_NOT_FOUND] Path does not exist") from None
    except AnalysisException as exc:
        assert not leaves_state(exc)
