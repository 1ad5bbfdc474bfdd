"""Write functions that misbehave on purpose, and a few plain ones.

They run inside an executor (``pool.run(task, "daemon.executor.testing:<name>", ...)``); tests
use them, and operators can use them to check that a deployment kills hung writes::

    await pool.run("check", "daemon.executor.testing:hang_in_udf", None, timeout=5.0)
    # → WriteTimeout after 5 s, with the killed PIDs in the message
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from pathlib import Path
from typing import Any

from daemon.executor.handoff import Batch


def _touch(marker: str | None, text: str) -> None:
    if marker:
        tmp = f"{marker}.tmp"
        Path(tmp).write_text(text)
        os.replace(tmp, marker)


def hang_in_udf(spark: Any, batch: Batch | None, marker: str | None = None) -> None:
    """A Spark job whose Python UDF sleeps forever (in a PySpark worker, below the JVM).

    ``marker``: a file the UDF writes (its pid) when it starts sleeping.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    # A lambda: PySpark reads a def's type hints as a pandas UDF declaration.
    stall = F.udf(lambda x: _stall(marker), LongType())
    spark.range(1, numPartitions=1).select(stall("id")).collect()


def _stall(marker: str | None) -> int:
    _touch(marker, str(os.getpid()))
    while True:
        time.sleep(3600)


def hang_in_python(spark: Any, batch: Batch | None, marker: str | None = None) -> None:
    """Block forever in the executor's own Python code, before Spark is called."""
    _touch(marker, str(os.getpid()))
    threading.Event().wait()


def sleep(spark: Any, batch: Batch | None, seconds: float = 1.0) -> float:
    """Sleep, then return the seconds slept (a write that takes a known time)."""
    time.sleep(seconds)
    return seconds


def crash(spark: Any, batch: Batch | None, code: int = 9) -> None:
    """End the executor process at once, as an OOM kill or a segfault would."""
    os._exit(code)


def fail(spark: Any, batch: Batch | None, message: str = "failing on purpose") -> None:
    raise ValueError(message)


def fail_io(spark: Any, batch: Batch | None, path: str, code: int = 28) -> None:
    """Fail as a write on a full (ENOSPC, 28) or read-only (EROFS, 30) disk does: an
    ``OSError`` naming a file under ``path``."""
    raise OSError(code, os.strerror(code), os.path.join(path, "part-00000.parquet"))


def whoami(spark: Any, batch: Batch | None) -> dict[str, Any]:
    """Where the write ran: executor pid, its JVM's pid, the batch's row count, the time."""
    java = spark.sparkContext._gateway.proc.pid if spark is not None else None
    rows = batch.num_rows if batch is not None else 0
    return {"pid": os.getpid(), "java_pid": java, "rows": rows, "at": time.time()}


def python_job(spark: Any, batch: Batch | None) -> int:
    """A small Spark job run by PySpark's Python workers; returns 10."""
    return int(spark.sparkContext.parallelize(range(4), 2).map(lambda x: x + 1).sum())


def count_rows(spark: Any, batch: Batch | None) -> int:
    """Rows of the batch, counted by Spark from the DataFrame."""
    return int(batch.df.count()) if batch is not None else 0


def write_parquet(spark: Any, batch: Batch | None, path: str, mode: str = "append") -> int:
    """Write the batch with Spark as Parquet to ``path``; returns the rows written."""
    if batch is None:
        return 0
    batch.df.write.mode(mode).parquet(path)
    return batch.num_rows


def count_parquet(spark: Any, batch: Batch | None, path: str) -> int:
    """Rows of the Parquet data at ``path``, counted by Spark."""
    return int(spark.read.parquet(path).count())


def write_parquet_via_file(spark: Any, batch: Batch | None, path: str, stage: str) -> int:
    """The same, with pyarrow writing a staging Parquet file that Spark then reads."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    if batch is None:
        return 0
    pq.write_table(batch.table, stage)
    spark.read.parquet(stage).write.mode("append").parquet(path)
    return batch.num_rows


def table_checksum(table: Any) -> tuple[int, int]:
    """(rows, order-independent checksum) of an Arrow table: the sum of each row's CRC32."""
    total = 0
    columns = [table.column(name).to_pylist() for name in sorted(table.column_names)]
    for row in zip(*columns, strict=True):
        total += zlib.crc32(repr(row).encode())
    return table.num_rows, total
