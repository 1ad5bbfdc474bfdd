"""Reading a Delta table's state through its log, in an executor: connectd's application
transactions (app ids, versions), the offsets their commits recorded, catalog tables, and the
py4j plumbing the jobs share (``jobs.py`` says what exactly once rests on).

Imports only the standard library and ``daemon`` modules at import time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from daemon.connectors.tables.names import quote

EPOCH_SHIFT = 40
#: How many commits of the history a read-back reads, then more (None: all that are left).
HISTORY_PAGES = (64, 1024, None)


def app_id(connector: str, topic: str, partition: int) -> str:
    return f"connectd/{connector}/{topic}/{partition}"


def parse_app_id(app: str, connector: str) -> tuple[str, int] | None:
    """``(topic, partition)`` of one of ``connector``'s app ids, else None."""
    prefix = f"connectd/{connector}/"
    if not app.startswith(prefix):
        return None
    topic, _, partition = app[len(prefix) :].rpartition("/")
    return (topic, int(partition)) if topic and "/" not in topic and partition.isdigit() else None


def epoch_of(version: int) -> int:
    return version >> EPOCH_SHIFT if version >= 0 else -1


# ---- reading offsets back -----------------------------------------------------------------


def committed_offsets(
    spark: Any, log: Any, path: str, versions: Mapping[str, int]
) -> dict[str, int | None]:
    """Next offset per app id, from the newest commit naming its current version; from the
    rows when that commit is gone (log retention)."""
    found: dict[str, int | None] = {}
    wanted = dict(versions)
    if not wanted:
        return found
    table = spark._jvm.io.delta.tables.DeltaTable.forPath(spark._jsparkSession, path)
    for page in HISTORY_PAGES:
        history = dataframe(spark, table.history(page) if page else table.history())
        for row in history.select("version", "userMetadata").collect():
            meta = parse_metadata(row["userMetadata"])
            for app, (version, offset) in meta.items():
                if wanted.get(app) == version:
                    found[app] = None if offset is None else int(offset)
                    del wanted[app]
            if not wanted:
                return found
        if page is not None and len(history.take(page)) < page:
            break
    for app in wanted:
        found[app] = offset_from_rows(spark, path, app)
    return found


def parse_metadata(user_metadata: str | None) -> dict[str, tuple[int, Any]]:
    if not user_metadata:
        return {}
    try:
        meta = json.loads(user_metadata)
        return {str(a): (int(v[0]), v[1]) for a, v in meta["partitions"].items()}
    except (ValueError, KeyError, TypeError, IndexError):
        return {}  # another writer's metadata


def offset_from_rows(spark: Any, path: str, app: str) -> int | None:
    from pyspark.sql import functions as F

    topic, _, partition = app.rpartition("/")
    topic = topic.rpartition("/")[2]
    rows = spark.read.format("delta").load(path)
    top = (
        rows.filter((F.col("kafka_topic") == topic) & (F.col("kafka_partition") == int(partition)))
        .agg(F.max("kafka_offset"))
        .collect()[0][0]
    )
    return None if top is None else int(top) + 1


def connector_versions(spark: Any, log: Any, connector: str) -> dict[str, int]:
    txns = log.update(False, none(spark), none(spark)).transactions()
    java = spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(txns)
    return {str(a): int(v) for a, v in java.items() if parse_app_id(str(a), connector)}


# ---- catalog tables ------------------------------------------------------------------------


def location(spark: Any, path: str, table: str) -> str | None:
    """The table's location: ``path``, or the catalog table's (None if it does not exist)."""
    if not table:
        return path
    name = quote(table)
    if not spark.catalog.tableExists(name):
        return None
    location = spark.sql(f"DESCRIBE DETAIL {name}").select("location").first()[0]
    return str(location)


def create_in_catalog(spark: Any, table: str, df: Any, partition_by: Sequence[str]) -> None:
    """Create the catalog table ``table`` from ``df``'s schema (a metadata-only commit);
    another task that created it first is fine."""
    writer = df.limit(0).write.format("delta").mode("append")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    database, _, _ = table.rpartition(".")
    try:
        if database:
            spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(database)}")
        writer.saveAsTable(quote(table))
    except Exception:
        if not spark.catalog.tableExists(quote(table)):
            raise


# ---- py4j plumbing ------------------------------------------------------------------------


def delta_log(spark: Any, path: str) -> Any:
    return spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)


def none(spark: Any) -> Any:
    return spark._jvm.scala.Option.empty()


def java_list(jvm: Any, items: Iterable[Any]) -> Any:
    out = jvm.java.util.ArrayList()
    for item in items:
        out.add(item)
    return out


def scala_seq(jvm: Any, items: list[Any]) -> Any:
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(java_list(jvm, items)).toList()


def to_list(scala_seq: Any) -> list[Any]:
    it = scala_seq.iterator()
    out = []
    while it.hasNext():
        out.append(it.next())
    return out


def dataframe(spark: Any, jdf: Any) -> Any:
    from pyspark.sql import DataFrame

    return DataFrame(jdf, spark)


def schema_of_struct(struct: Any) -> list[list[str]]:
    """``[[column, type]]`` of a JVM ``StructType`` (Spark's simple type strings)."""
    return [[str(f.name()), str(f.dataType().simpleString())] for f in struct.fields()]


def schema_of_df(struct: Any) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in struct.fields]
