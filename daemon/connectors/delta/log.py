"""Reading a Delta table's state through its log, in an executor: connectd's application
transactions (``txns.py``), the offsets their commits recorded, catalog tables, and the py4j
plumbing the jobs share (``jobs.py`` says what exactly once rests on).

Imports only the standard library and ``daemon`` modules at import time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from daemon.connectors.delta.txns import Txn, parse_metadata
from daemon.connectors.tables.names import quote
from daemon.connectors.tables.timeparts import generation_expression

#: How many commits of the history a read-back reads, then more (None: all that are left).
HISTORY_PAGES = (64, 1024, None)


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


def transactions(snapshot: Any) -> list[Txn]:
    """The application transactions of a snapshot (``DeltaLog.update()``, or a transaction's
    ``snapshot()``)."""
    out = []
    for action in to_list(snapshot.setTransactions()):
        updated = action.lastUpdated()
        out.append(
            Txn(
                str(action.appId()),
                int(action.version()),
                int(updated.get()) if updated.isDefined() else 0,
            )
        )
    return out


def latest(spark: Any, log: Any) -> Any:
    """The table's newest snapshot."""
    return log.update(False, none(spark), none(spark))


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


def create_table(
    spark: Any,
    df: Any,
    partition_by: Sequence[str],
    generated: Mapping[str, Sequence[str]],
    *,
    path: str = "",
    table: str = "",
) -> None:
    """Create the Delta table at ``path``, or the catalog table ``table``, from ``df``'s schema
    (a metadata-only commit), partitioned by ``partition_by``. The columns of ``generated``
    (``name → [transform, source]``: ``partition.by``'s time transforms) are declared as Delta
    generated columns (``timeparts.generation_expression``) where their source's type allows;
    Delta then checks every write's values against them, and computes them for a writer that
    leaves them out. Another task that created the table first is fine."""
    database, _, _ = table.rpartition(".")
    if database:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote(database)}")
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    expressions = {
        name: expression
        for name, (transform, source) in generated.items()
        if name in types and source in types
        for expression in [generation_expression(transform, source, types[source])]
        if expression is not None
    }
    try:
        if expressions:
            _build(spark, df, partition_by, expressions, path=path, table=table)
            return
        writer = df.limit(0).write.format("delta").mode("append")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.saveAsTable(quote(table)) if table else writer.save(path)
    except Exception:
        exists = (
            spark.catalog.tableExists(quote(table))
            if table
            else delta_log(spark, path).tableExists()
        )
        if not exists:
            raise


def _build(
    spark: Any,
    df: Any,
    partition_by: Sequence[str],
    expressions: Mapping[str, str],
    *,
    path: str,
    table: str,
) -> None:
    """``create_table`` through Delta's ``DeltaTableBuilder``: the one way to declare
    generated columns without writing the schema as DDL text."""
    jvm, session = spark._jvm, spark._jsparkSession
    tables = jvm.io.delta.tables.DeltaTable
    schema = df._jdf.schema()
    builder = tables.create(session)
    builder = builder.tableName(quote(table)) if table else builder.location(path)
    for field in df.schema.fields:  # in the batch's order
        jfield = schema.apply(field.name)
        if field.name in expressions:
            column = (
                tables.columnBuilder(session, field.name)
                .dataType(jfield.dataType())
                .generatedAlwaysAs(expressions[field.name])
                .nullable(True)
                .build()
            )
            builder = builder.addColumn(column)
        else:
            builder = builder.addColumn(jfield)
    if partition_by:
        builder = builder.partitionedBy(scala_seq(jvm, list(partition_by)))
    builder.execute()


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


def scala_212(jvm: Any) -> bool:
    """The JVM's Scala is 2.12 (Spark 3.5, with Delta 3.x) rather than 2.13 (Spark 4.x)."""
    return str(jvm.scala.util.Properties.versionNumberString()).startswith("2.12.")


def scala_seq(jvm: Any, items: list[Any]) -> Any:
    """``items`` as a Scala immutable ``List``: through ``scala.jdk.javaapi`` on Scala 2.13,
    ``scala.collection.JavaConverters`` on 2.12 (which has no ``scala.jdk``)."""
    java = java_list(jvm, items)
    if scala_212(jvm):
        return jvm.scala.collection.JavaConverters.asScalaBufferConverter(java).asScala().toList()
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(java).toList()


def commit_actions(
    spark: Any,
    txn: Any,
    files: list[Any],
    sets: Mapping[str, tuple[int, int]],
    meta: str,
    partition_by: Sequence[str] | None,
) -> int:
    """Commit ``txn`` with ``files`` (``AddFile`` actions) and one ``SetTransaction`` per app
    id of ``sets`` (``(version, lastUpdated)``), ``meta`` as the commit's ``userMetadata``;
    the table's version it became."""
    jvm = spark._jvm
    actions = [
        jvm.org.apache.spark.sql.delta.actions.SetTransaction.apply(
            app, int(version), jvm.scala.Some(int(updated))
        )
        for app, (version, updated) in sets.items()
    ]
    seq = scala_seq(jvm, [*files, *actions])
    nothing = none(spark)
    parts = nothing if partition_by is None else jvm.scala.Some(scala_seq(jvm, list(partition_by)))
    # Write(mode, partitionBy, predicate, userMetadata, ...): Delta 3.x (Spark 3.5) has those
    # four, Delta 4.x five more options, all left empty here.
    more = () if scala_212(jvm) else (nothing,) * 5
    operation = jvm.org.apache.spark.sql.delta.DeltaOperations.Write(
        jvm.org.apache.spark.sql.SaveMode.Append, parts, nothing, jvm.scala.Some(meta), *more
    )
    return int(txn.commit(seq, operation))


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
    return [[str(f.name()), str(f.dataType().catalogString())] for f in struct.fields()]


def schema_of_df(struct: Any) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in struct.fields]  # Python's: never cut
