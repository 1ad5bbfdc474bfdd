"""ParquetSink's executor side: write one commit's rows into its staging directory.

``write_staged`` runs inside an executor process (the task calls it by name through
``context.run_in_executor``), so this module imports only the standard library at import time;
pyarrow and PySpark are imported where they are used. It writes into the staging directory it
is given and nowhere else: the task's commit moves the files into the table, so a write killed
at any instant leaves nothing a reader sees.

How the rows reach Spark (``source``): ``"parquet"`` (default) has pyarrow write the hand-off
table as an uncompressed Parquet file in the executor's scratch directory and Spark read it,
which is faster here than ``"arrow"``, ``spark.createDataFrame(pyarrow.Table)`` (see
docs/connectors.md for the numbers). Without Spark (a pool with ``with_spark=False``, or an
in-process test runner) pyarrow writes the files itself.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

FORMATS = ("parquet", "orc", "json", "csv")

#: Codecs per format that this Spark build writes (checked on Spark 4.1 with its bundled
#: libraries; brotli, and lzo for Parquet, need extra jars; zstd needs Hadoop native code for
#: the text formats). ``""`` means the format's Spark default.
COMPRESSION: dict[str, tuple[str, ...]] = {
    "parquet": ("none", "uncompressed", "snappy", "gzip", "lz4", "lz4_raw", "zstd"),
    "orc": ("none", "uncompressed", "snappy", "zlib", "lzo", "lz4", "zstd"),
    "json": ("none", "uncompressed", "bzip2", "gzip", "lz4", "snappy", "deflate"),
    "csv": ("none", "uncompressed", "bzip2", "gzip", "lz4", "snappy", "deflate"),
}

SOURCES = ("parquet", "arrow")


def tidy(final: str) -> str:
    """``part-<commit>-00000.c000.csv`` → ``part-<commit>-00000.csv``: Spark's per-task file
    counter means nothing once the file has its commit's name."""
    return _SPARK_COUNTER.sub(r"\1.", final)


_SPARK_COUNTER = re.compile(r"(-\d{5})\.c\d{3}\.")


def data_files(root: str | os.PathLike[str]) -> list[str]:
    """Data files under ``root``, relative, sorted; names starting with ``_`` or ``.`` (Spark's
    ``_SUCCESS``, ``_temporary/``, ``.crc`` files) are skipped, as every reader skips them."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(("_", "."))]
        rel = Path(dirpath).relative_to(root)
        found += [str(rel / n) for n in filenames if not n.startswith(("_", "."))]
    return sorted(found)


def write_staged(
    spark: Any,
    batch: Any,
    *,
    path: str,
    format: str = "parquet",
    partition_by: Sequence[str] = (),
    compression: str = "",
    source: str = "parquet",
) -> dict[str, Any]:
    """Write ``batch`` (a ``daemon.executor.handoff.Batch``) into the directory ``path`` as
    ``format`` files, partitioned by ``partition_by`` (Hive-style ``col=value/`` directories).

    Returns ``{"files": [...], "rows": n, "seconds": s}``: the data files written, relative to
    ``path``. Raises ``ValueError`` for a format, codec or column that cannot be written.
    """
    began = time.monotonic()
    if format not in FORMATS:
        raise ValueError(f"format {format!r} is not one of {', '.join(FORMATS)}")
    codec = compression.lower()
    if codec and codec not in COMPRESSION[format]:
        allowed = ", ".join(COMPRESSION[format])
        raise ValueError(f"compression {compression!r} is not available for {format}: {allowed}")
    if source not in SOURCES:
        raise ValueError(f"source {source!r} is not one of {', '.join(SOURCES)}")
    rows = 0 if batch is None else int(batch.num_rows)
    if rows:
        columns = list(batch.table.column_names)
        missing = [c for c in partition_by if c not in columns]
        if missing:
            raise ValueError(f"partition column(s) {missing} are not among the columns {columns}")
        if spark is None:
            _write_with_pyarrow(batch.table, path, format, list(partition_by), codec)
        else:
            _write_with_spark(spark, batch, path, format, list(partition_by), codec, source)
    return {"files": data_files(path), "rows": rows, "seconds": time.monotonic() - began}


# --- Spark --------------------------------------------------------------------------------------


def _write_with_spark(
    spark: Any,
    batch: Any,
    path: str,
    format: str,
    partition_by: list[str],
    codec: str,
    source: str,
) -> None:
    scratch = tempfile.mkdtemp(prefix="parquetsink-") if source == "parquet" else None
    try:
        if scratch is not None:
            import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

            staged = os.path.join(scratch, "rows.parquet")
            pq.write_table(batch.table, staged, compression="none")
            df = spark.read.parquet(staged)
        else:
            df = batch.df
        if format == "csv":
            df = _flatten_for_csv(df)
        writer = df.write.mode("append").format(format)
        if format == "csv":
            # A header row names the columns; quotes doubled as RFC 4180 has it (Spark's
            # default backslash escapes are not read correctly by other CSV readers).
            writer = writer.option("header", "true").option("escape", '"')
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        if codec:
            writer = writer.option("compression", codec)
        with micros_timestamps(spark):
            writer.save(path)
    finally:
        if scratch is not None:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def micros_timestamps(spark: Any) -> Iterator[None]:
    """Parquet files written meanwhile hold microsecond timestamps: Spark's default INT96 ones
    read back in other tools as nanoseconds of another calendar; microseconds (Spark's own
    precision) keep every value as it was. The session's setting is restored afterwards (the
    executor's session serves other writes)."""
    key = "spark.sql.parquet.outputTimestampType"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, "TIMESTAMP_MICROS")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def _flatten_for_csv(df: Any) -> Any:
    """CSV holds only flat text: nested columns (``headers``, JSON objects) become JSON text,
    binary columns base64 text."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StructType

    for field in df.schema.fields:
        if isinstance(field.dataType, ArrayType | MapType | StructType):
            df = df.withColumn(field.name, F.to_json(F.col(field.name)))
        elif isinstance(field.dataType, BinaryType):
            df = df.withColumn(field.name, F.base64(F.col(field.name)))
    return df


# --- pyarrow (no Spark) -------------------------------------------------------------------------

_PYARROW_CODECS = {"none": None, "uncompressed": None, "": None}


def _write_with_pyarrow(
    table: Any, path: str, format: str, partition_by: list[str], codec: str
) -> None:
    """The same layout as Spark's, written by pyarrow: for pools without Spark and tests."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]

    if partition_by:
        keys = table.select(partition_by).group_by(partition_by).aggregate([]).to_pylist()
        for n, key in enumerate(keys):
            mask = None
            for col, value in key.items():
                match = (
                    pc.is_null(table.column(col))
                    if value is None
                    else pc.equal(table.column(col), pa.scalar(value, table.schema.field(col).type))
                )
                mask = match if mask is None else pc.and_(mask, match)
            part = table.filter(mask).drop_columns(partition_by)
            subdir = "/".join(f"{c}={_hive_value(v)}" for c, v in key.items())
            _write_one(part, os.path.join(path, subdir), f"part-{n:05d}", format, codec)
    else:
        _write_one(table, path, "part-00000", format, codec)


def _hive_value(value: Any) -> str:
    from urllib.parse import quote

    return "__HIVE_DEFAULT_PARTITION__" if value is None else quote(str(value), safe="")


def _write_one(table: Any, directory: str, stem: str, format: str, codec: str) -> None:
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, f"{stem}.{format}")
    if format == "parquet":
        import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

        pq.write_table(table, target, compression=_PYARROW_CODECS.get(codec, codec) or "none")
    elif format == "orc":
        import pyarrow.orc as po  # type: ignore[import-untyped,unused-ignore]

        po.write_table(
            table, target, compression=_PYARROW_CODECS.get(codec, codec) or "uncompressed"
        )
    else:
        import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

        stream = _TEXT_STREAMS.get(codec, "unsupported")
        if stream == "unsupported":
            raise ValueError(f"without Spark, {format} files can be compressed only with gzip")
        suffix = {"gzip": ".gz"}.get(stream or "", "")
        with pa.output_stream(target + suffix, compression=stream) as out:
            if format == "csv":
                import pyarrow.csv as pcsv  # type: ignore[import-untyped,unused-ignore]

                pcsv.write_csv(_flat_table(table), out)
            else:
                _write_json_lines(table, out)


_TEXT_STREAMS: dict[str, str | None] = {
    "": None,
    "none": None,
    "uncompressed": None,
    "gzip": "gzip",
}


def _flat_table(table: Any) -> Any:
    import base64
    import json

    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    for i, field in enumerate(table.schema):
        if pa.types.is_nested(field.type):
            values = [
                None if v is None else json.dumps(v, default=_json_default)
                for v in table.column(i).to_pylist()
            ]
            table = table.set_column(i, field.name, pa.array(values, pa.string()))
        elif pa.types.is_binary(field.type):
            values = [
                None if v is None else base64.b64encode(v).decode()
                for v in table.column(i).to_pylist()
            ]
            table = table.set_column(i, field.name, pa.array(values, pa.string()))
    return table


def _write_json_lines(table: Any, out: Any) -> None:
    import json

    for row in table.to_pylist():
        clean = {k: v for k, v in row.items() if v is not None}  # as Spark writes JSON
        out.write((json.dumps(clean, default=_json_default) + "\n").encode())


def _json_default(value: Any) -> Any:
    import base64
    import datetime

    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
