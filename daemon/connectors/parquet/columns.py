"""A ParquetSink table's columns and their types, read back from its newest data files, so the
task can refuse a record whose field has another type than the table's column (files of two
types for one column are files readers cannot merge).

The commit log names each commit's files; Parquet and ORC files carry their columns' types
(Spark records its own schema in them). ``table_columns`` reads one file of each of the
newest commits that wrote files (the newest first: a column keeps the type it has there,
with the fields an older file's struct adds: ``sparktypes.widened``), and adds the
Hive-style partition columns their paths name with the type ``""`` (any: their values are
directory names). After each commit the task adds the columns it wrote
(``tables.schema.merged``). JSON and CSV files carry no types: nothing is read back, nothing
judged.

Where the files are read: a local table's by pyarrow in the daemon (a thread:
``read_local``), a Hadoop table's by Spark inside the claim job (``read_with_spark``).
Executor processes import this module: standard library and ``daemon.storage`` at import time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from daemon.connectors.tables import sparktypes
from daemon.storage.commitlog import CommitLog

#: Commits with files whose columns are read back, and records looked at, at most.
NEWEST_COMMITS, NEWEST_RECORDS = 8, 200
_SPARK_SCHEMA = b"org.apache.spark.sql.parquet.row.metadata"
_NAMES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}

#: Reads the ``[[column, Spark type]]`` of one data file (a path or URI), None if untyped.
FileColumns = Callable[[str], list[list[str]] | None]


def table_columns(log: CommitLog, read: FileColumns) -> list[list[str]] | None:
    """The table's columns as its newest commits wrote them (module docstring); ``None`` if
    no commit's files say (a new table, or untyped files). Blocks on files."""
    out: list[list[str]] = []
    commits = 0
    for n, record in enumerate(log.newest_records()):
        if commits >= NEWEST_COMMITS or n >= NEWEST_RECORDS:
            break
        if record.kind != "commit" or not record.files:
            continue
        final = record.files[0].final
        try:
            columns = read(log.fs.uri(final))
        except Exception:  # unreadable here (a courtesy, not the commit's check): not judged
            return None
        if columns is None:
            return None
        commits += 1
        parts = [p.split("=", 1)[0] for p in final.split("/")[:-1] if "=" in p]
        known = {c for c, _ in out} | {c for c, _ in columns}
        # A newer file's type stands, with the fields an older file's struct adds.
        out = sparktypes.merged_columns(out, ((c, t) for c, t in columns))
        out += [[c, ""] for c in parts if c not in known]
    return out or None


def spark_simple(kind: Any) -> str | None:
    """Spark's simple type string of a type in Spark's JSON schema form, None if unknown."""
    if isinstance(kind, str):
        return _NAMES.get(kind, kind)
    name = kind.get("type") if isinstance(kind, dict) else None
    if name == "array":
        inner = spark_simple(kind["elementType"])
        return None if inner is None else f"array<{inner}>"
    if name == "map":
        key, value = spark_simple(kind["keyType"]), spark_simple(kind["valueType"])
        return None if key is None or value is None else f"map<{key},{value}>"
    if name == "struct":
        fields = [(f["name"], spark_simple(f["type"])) for f in kind["fields"]]
        if any(t is None for _, t in fields):
            return None
        return "struct<" + ",".join(f"{n}:{t}" for n, t in fields) + ">"
    return None


def read_local(fmt: str) -> FileColumns:
    """A reader of a local table's ``fmt`` files with pyarrow (footers only)."""

    def read(path: str) -> list[list[str]] | None:
        from daemon.connectors.tables.schema import spark_type

        if fmt == "parquet":
            import pyarrow.parquet as pq

            schema = pq.read_schema(path)
            spark = (schema.metadata or {}).get(_SPARK_SCHEMA)
            if spark is not None:  # Spark's own schema, exact
                fields = json.loads(spark)["fields"]
                return [[f["name"], spark_simple(f["type"]) or ""] for f in fields]
        elif fmt == "orc":
            import pyarrow.orc as po

            schema = po.ORCFile(path).schema
        else:
            return None
        out = []
        for field in schema:
            meta = (field.metadata or {}).get(b"spark.sql.catalyst.type")
            # Spark writes its timestamps into ORC without a zone; pyarrow reads them so.
            kind = meta.decode() if meta else spark_type(field.type) or ""
            out.append(
                [field.name, "timestamp" if fmt == "orc" and kind == "timestamp_ntz" else kind]
            )
        return out

    return read


def read_with_spark(spark: Any, fmt: str) -> FileColumns:
    """A reader of ``fmt`` files through the executor's Spark (any Hadoop filesystem)."""

    def read(uri: str) -> list[list[str]] | None:
        if fmt not in ("parquet", "orc"):
            return None
        schema = spark.read.format(fmt).load(uri).schema
        return [[f.name, f.dataType.simpleString()] for f in schema.fields]

    return read
