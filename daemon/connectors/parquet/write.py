"""ParquetSink's executor side: write one commit's rows into its staging directory.

``write_staged`` runs inside an executor process (the task calls it by name through
``context.run_in_executor``), so this module imports only the standard library at import time;
pyarrow and PySpark are imported where they are used. It writes into the staging directory it
is given and nowhere else: the task's commit moves the files into the table, so a write killed
at any instant leaves nothing a reader sees.

Who writes the files (``engine``): ``"spark"``, a Spark job; ``"arrow"``, pyarrow, in this same
executor process with no Spark job, writing the files Spark would write (``arrow_refusal`` says
when it cannot: another format or codec, a column type whose Parquet form or partition
directory name would differ); ``"auto"``, pyarrow wherever it can, Spark otherwise. A small
write costs 0.3-0.6 s of Spark's fixed cost against a few milliseconds with pyarrow, which
is what lets many small connectors share one executor (docs/connectors.md has the numbers).
Without Spark (a pool with ``with_spark=False``, or an in-process test runner) pyarrow writes
every format itself.

How the rows reach Spark (``source``): ``"parquet"`` (default) has pyarrow write the hand-off
table as an uncompressed Parquet file in the executor's scratch directory and Spark read it,
which is faster here than ``"arrow"``, ``spark.createDataFrame(pyarrow.Table)`` (see
docs/connectors.md for the numbers).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

FORMATS = ("parquet", "orc", "json", "csv")

#: ParquetSink's executor write, as the task names it to the executor.
WRITE_STAGED = "daemon.connectors.parquet.write:write_staged"

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
ENGINES = ("auto", "spark", "arrow")

#: Parquet codecs pyarrow writes as Spark does, by the ``compression`` setting (``""``: Spark's
#: default, snappy), with the part Spark puts in each file's name (checked against Spark 4.1's
#: own files; pyarrow's lz4 is not Spark's Hadoop-framed one).
ARROW_CODECS: dict[str, tuple[str, str]] = {
    "": ("snappy", ".snappy"),
    "snappy": ("snappy", ".snappy"),
    "none": ("none", ""),
    "uncompressed": ("none", ""),
    "gzip": ("gzip", ".gz"),
    "zstd": ("zstd", ".zstd"),
}


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
    engine: str = "spark",
) -> dict[str, Any]:
    """Write ``batch`` (a ``daemon.executor.handoff.Batch``) into the directory ``path`` as
    ``format`` files, partitioned by ``partition_by`` (Hive-style ``col=value/`` directories),
    by ``engine`` (module docstring).

    Returns ``{"files": [...], "rows": n, "seconds": s, "engine": "spark" | "arrow"}``: the
    data files written, relative to ``path``. Raises ``ValueError`` for a format, codec or
    column that cannot be written (with ``engine="arrow"``: that pyarrow cannot write as Spark).
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
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r} is not one of {', '.join(ENGINES)}")
    rows = 0 if batch is None else int(batch.num_rows)
    used = "arrow" if spark is None else "spark"
    if rows:
        table, keys = batch.table, list(partition_by)
        columns = list(table.column_names)
        missing = [c for c in keys if c not in columns]
        if missing:
            raise ValueError(f"partition column(s) {missing} are not among the columns {columns}")
        refusal = arrow_refusal(table.schema, format, keys, codec, path)
        if spark is not None and engine == "arrow" and refusal is not None:
            raise ValueError(f"write.engine=arrow cannot write this batch: {refusal}")
        if spark is not None and engine != "spark" and refusal is None:
            used = "arrow"
        if used == "spark":
            _write_with_spark(spark, batch, path, format, keys, codec, source)
        elif refusal is None:
            _write_parquet_as_spark(table, path, keys, codec)
        else:  # no Spark to write it as Spark would: pyarrow's own way
            _write_with_pyarrow(table, path, format, keys, codec)
    return {
        "files": data_files(path),
        "rows": rows,
        "seconds": time.monotonic() - began,
        "engine": used,
    }


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


# --- pyarrow, writing the Parquet files Spark writes -------------------------------------------

#: Characters Spark escapes as ``%XX`` in a partition directory's name (``ExternalCatalogUtils``;
#: checked by writing every character from 1 to 255 with Spark 4.1).
_SPARK_ESCAPES = frozenset([*map(chr, range(1, 0x20)), *"\"#%'*/:=?[\\]^{", "\x7f"])
#: Spark's directory name for a null or empty partition value.
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def arrow_refusal(
    schema: Any, format: str, partition_by: Sequence[str], codec: str, path: str = ""
) -> str | None:
    """Why pyarrow cannot write these rows into ``path`` as the files Spark would write (None:
    it can): Parquet only, a codec of ``ARROW_CODECS``, a local directory, columns of types
    both write alike, partition columns whose values Spark and this module name directories
    alike (text, signed integers, booleans, dates). ``schema`` None: the settings alone."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    if "://" in path and not path.startswith("file:"):
        return "the table is on a Hadoop filesystem (written by Spark)"
    if format != "parquet":
        return f"format {format} files are written by Spark (pyarrow writes parquet only)"
    if codec not in ARROW_CODECS:
        codecs = ", ".join(c for c in ARROW_CODECS if c)
        return f"compression {codec} is written by Spark (pyarrow writes {codecs})"
    for field in () if schema is None else schema:
        if field.name in partition_by:
            t = field.type
            if not (
                pa.types.is_string(t)
                or pa.types.is_large_string(t)
                or pa.types.is_signed_integer(t)
                or pa.types.is_boolean(t)
                or pa.types.is_date32(t)
            ):
                return f"partition column {field.name} is {t} (pyarrow names text, signed "
                "integer, boolean and date partitions as Spark does)"
        elif not _same_in_parquet(field.type):
            return f"column {field.name} is {field.type}, which Spark would write otherwise"
    return None


def spark_writes(
    engine: str, schema: Any, format: str, partition_by: Sequence[str], codec: str, path: str
) -> bool:
    """Whether ``write_staged`` needs its executor's SparkSession for rows of ``schema`` (None:
    for the settings alone) under ``engine``: ``spark``, or anything ``arrow_refusal`` refuses
    (with ``engine=arrow`` too: the write then fails as it does with a session)."""
    return engine == "spark" or arrow_refusal(schema, format, partition_by, codec, path) is not None


def _same_in_parquet(t: Any) -> bool:
    """pyarrow writes ``t`` with the Parquet type Spark gives the column it reads it as."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    if (
        pa.types.is_boolean(t)
        or pa.types.is_signed_integer(t)
        or pa.types.is_float32(t)
        or pa.types.is_float64(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_date32(t)
        or pa.types.is_decimal128(t)
    ):
        return True
    if pa.types.is_timestamp(t):
        return t.unit in ("s", "ms", "us")  # Spark writes microseconds; nanoseconds it refuses
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _same_in_parquet(t.value_type)
    if pa.types.is_struct(t):
        return t.num_fields > 0 and all(
            _same_in_parquet(t.field(i).type) for i in range(t.num_fields)
        )
    if pa.types.is_map(t):
        return _same_in_parquet(t.key_type) and _same_in_parquet(t.item_type)
    return False


def _write_parquet_as_spark(table: Any, path: str, partition_by: list[str], codec: str) -> None:
    """Parquet files as Spark's write of ``table`` makes them: every column nullable,
    timestamps in microseconds, decimals of up to 18 digits as integers, Spark's default codec
    (snappy) and its names, one file per partition directory named as Spark names it."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    compression, extension = ARROW_CODECS.get(codec, ("snappy", ".snappy"))
    table = table.cast(pa.schema([_nullable(f) for f in table.schema]))

    def write(part: Any, directory: str, n: int) -> None:
        os.makedirs(directory, exist_ok=True)
        pq.write_table(
            part,
            os.path.join(directory, f"part-{n:05d}{extension}.parquet"),
            compression=compression,
            coerce_timestamps="us",
            store_decimal_as_integer=True,
            store_schema=False,
        )

    if not partition_by:
        write(table, path, 0)
        return
    for n, (subdir, part) in enumerate(
        _partitions(table, partition_by, spark_escape, spark_partition_value)
    ):
        write(part, os.path.join(path, subdir), n)


def _partitions(
    table: Any,
    partition_by: list[str],
    name: Callable[[str], str],
    value: Callable[[Any], str],
) -> list[tuple[str, Any]]:
    """``table``'s rows by Hive-style directory (``name(col)=value(v)/...``), without the
    partition columns: one entry per directory, so keys that name the same directory (Spark's
    null and empty text) share it."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]

    masks: dict[str, Any] = {}
    for key in table.select(partition_by).group_by(partition_by).aggregate([]).to_pylist():
        mask = None
        for col, v in key.items():
            match = (
                pc.is_null(table.column(col))
                if v is None
                else pc.fill_null(
                    pc.equal(table.column(col), pa.scalar(v, table.schema.field(col).type)),
                    False,
                )
            )
            mask = match if mask is None else pc.and_(mask, match)
        subdir = "/".join(f"{name(c)}={value(v)}" for c, v in key.items())
        masks[subdir] = mask if subdir not in masks else pc.or_(masks[subdir], mask)
    return [(d, table.filter(m).drop_columns(partition_by)) for d, m in masks.items()]


def _nullable(field: Any) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    t = field.type
    if pa.types.is_struct(t):
        t = pa.struct([_nullable(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_list(t):
        t = pa.list_(_nullable(t.value_field))
    elif pa.types.is_large_list(t):
        t = pa.large_list(_nullable(t.value_field))
    return field.with_type(t).with_nullable(True)


def spark_escape(text: str) -> str:
    """``text`` as Spark writes it in a partition directory's name."""
    return "".join(f"%{ord(c):02X}" if c in _SPARK_ESCAPES else c for c in text)


def spark_partition_value(value: Any) -> str:
    """A partition value as Spark names its directory: null and empty text are the default
    partition, booleans ``true``/``false``, dates ISO, text escaped."""
    if value is None or value == "":
        return DEFAULT_PARTITION
    if isinstance(value, bool):
        return "true" if value else "false"
    return spark_escape(str(value))


# --- pyarrow (no Spark) -------------------------------------------------------------------------

_PYARROW_CODECS = {"none": None, "uncompressed": None, "": None}


def _write_with_pyarrow(
    table: Any, path: str, format: str, partition_by: list[str], codec: str
) -> None:
    """The same layout as Spark's, written by pyarrow: for pools without Spark and tests."""
    if partition_by:
        for n, (subdir, part) in enumerate(_partitions(table, partition_by, str, _hive_value)):
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
