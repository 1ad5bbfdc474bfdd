"""DeltaSink's executor jobs: every read and commit of a Delta table, through Delta's own
transaction log (``OptimisticTransaction`` through py4j), in killable executors.

Exactly once rests on Delta's application transactions (``SetTransaction``, the mechanism of
the ``txnAppId``/``txnVersion`` writer options), one per Kafka partition and connector:

- app id ``connectd/<connector>/<topic>/<partition>``: per partition, not per task, because a
  rebalance moves partitions between tasks and the fence must follow the partition;
- version ``epoch << 40 | n``: it grows with the incarnation's epoch first, then with each of
  its commits, so a newer owner's versions are above every older owner's;
- every commit reads the versions of its partitions inside its transaction (Delta records the
  read) and writes ``SetTransaction`` actions with the next versions. Delta refuses the commit
  (``ConcurrentTransactionException``) if another commit set one of those app ids after the
  read: a zombie's commit in flight when a newer incarnation fenced never lands. A version
  above this epoch's seen at the read is a newer owner: refused before any data is written;
- ``open_table`` fences: one commit with only ``SetTransaction`` actions at ``epoch << 40``;
- each commit's ``userMetadata`` (commit info, shown by ``DESCRIBE HISTORY`` and delta-rs)
  holds every partition's version and next offset; the read-back finds, per partition, the
  newest commit naming its current version. Checkpoints keep ``txn`` but not commit info, and
  JSON commits expire after ``delta.logRetentionDuration`` (30 days): when a partition's commit
  is gone, its offset is ``max(kafka_offset) + 1`` of its rows (the audit columns).

Data files are written by ``writeFiles`` straight into the table's directory, and become part
of the table only with the commit: a job killed at any instant leaves at most files no Delta
reader sees (``VACUUM`` removes them after ``delta.deletedFileRetentionDuration``).

Errors with a meaning are returned as ``{"error": [class, message]}`` (``parquet.jobs.raise_for``
turns them back): ``ZombieEpoch``, ``OffsetsDiverged``, ``RecordRejected``, ``ConfigError``.
Imports only the standard library and ``daemon`` modules at import time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from daemon import errors
from daemon.connectors.delta import log as dlog
from daemon.connectors.delta.log import EPOCH_SHIFT, app_id, epoch_of, parse_app_id
from daemon.connectors.parquet.jobs import _job
from daemon.connectors.parquet.write import micros_timestamps
from daemon.storage.logstate import OffsetsDiverged, ZombieEpoch

#: Commits that lost a race against another task's schema change or table creation are
#: written again this many times (their files were never part of the table).
RETRIES = 3
dlog.HISTORY_PAGES = (64, 1024, None)
_CONFLICTS = (
    "MetadataChangedException",
    "ProtocolChangedException",
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "DELTA_METADATA_CHANGED",
    "DELTA_PROTOCOL_CHANGED",
)


# ---- jobs ----------------------------------------------------------------------------------


def open_table(
    spark: Any,
    batch: Any,
    *,
    path: str,
    connector: str,
    task: int,
    epoch: int,
    partitions: Sequence[Sequence[Any]],
    table: str = "",
) -> dict[str, Any]:
    """Fence ``partitions`` with ``epoch`` and read their committed offsets (see the module).
    ``table``: a catalog table instead of ``path`` (its location comes from the catalog)."""
    return _job(
        lambda: _open(spark, dlog.location(spark, path, table), connector, task, epoch, partitions)
    )


def commit(
    spark: Any,
    batch: Any,
    *,
    path: str,
    connector: str,
    task: int,
    epoch: int,
    ranges: Sequence[Sequence[Any]],
    state: Mapping[str, int],
    partition_by: Sequence[str] = (),
    merge_schema: bool = False,
    table: str = "",
) -> dict[str, Any]:
    """One Delta commit of ``batch``'s rows and the offsets ``ranges`` end at (into the
    catalog table ``table`` instead of ``path`` if given; created there if missing)."""

    def run() -> dict[str, Any]:
        where = dlog.location(spark, path, table)
        if where is None and batch is not None and batch.num_rows:
            dlog.create_in_catalog(spark, table, batch.df, partition_by)
            where = dlog.location(spark, path, table)
        if where is None:
            return {"state": dict(state), "rows": 0, "files": 0, "seconds": 0.0, "schema": None}
        with micros_timestamps(spark):  # as ParquetSink writes them
            return _commit(
                spark, batch, where, connector, task, epoch, ranges, state, partition_by,
                merge_schema,
            )  # fmt: skip

    return _job(run)


def read_offsets(
    spark: Any, batch: Any, *, path: str, connector: str, table: str = ""
) -> dict[str, Any]:
    """Next offset of every partition ``connector`` has committed into the table."""

    def read() -> dict[str, Any]:
        where = dlog.location(spark, path, table)
        log = None if where is None else dlog.delta_log(spark, where)
        if log is None or where is None or not log.tableExists():
            return {"offsets": []}
        versions = dlog.connector_versions(spark, log, connector)
        found = dlog.committed_offsets(spark, log, where, versions)
        return {"offsets": [[*parse_app_id(a, connector), o] for a, o in sorted(found.items())]}  # type: ignore[misc]

    return _job(read)


def alter_offsets(
    spark: Any,
    batch: Any,
    *,
    path: str,
    connector: str,
    offsets: Sequence[Sequence[Any]],
    reset: bool = False,
    table: str = "",
) -> dict[str, Any]:
    """Set partitions' next offsets (``None``: forget them) in one commit; ``reset``: forget
    every partition of ``connector``. The connector is stopped: versions grow by one within
    their epoch, so the next incarnation's fence is still above them."""

    def alter() -> dict[str, Any]:
        where = dlog.location(spark, path, table)
        log = None if where is None else dlog.delta_log(spark, where)
        if log is None or not log.tableExists():
            if reset:
                return {}
            what = f"table: no table {table}" if table else f"path: no Delta table at {path}"
            raise errors.ConfigError(f"{what} yet; nothing to alter")
        txn = log.startTransaction()
        wanted = {app_id(connector, str(t), int(p)): o for t, p, o in offsets}
        if reset:
            current = dlog.connector_versions(spark, log, connector)
            wanted = dict.fromkeys(current)
        entries = {}
        for app, offset in wanted.items():
            version = int(txn.txnVersion(app))
            entries[app] = [version + 1 if version >= 0 else 0, offset]
        if entries:
            meta = _metadata(connector, -1, -1, "alter", entries)
            _commit_actions(spark, txn, [], entries, meta, partition_by=None)
        return {}

    return _job(alter)


def upkeep(
    spark: Any,
    batch: Any,
    *,
    path: str,
    min_files: int,
    small_bytes: int,
    table: str = "",
) -> dict[str, Any]:
    """Compact (``OPTIMIZE``) each table partition holding more than ``min_files`` files
    smaller than ``small_bytes``. OPTIMIZE commits with ``dataChange=false`` and never
    conflicts with appends; killed, it commits nothing. Delta writes log checkpoints itself
    (every ``delta.checkpointInterval`` commits, inside a commit job)."""

    def run() -> dict[str, Any]:
        began = time.monotonic()
        where = dlog.location(spark, path, table)
        log = None if where is None else dlog.delta_log(spark, where)
        if log is None or where is None or not log.tableExists():
            return {"compacted": 0, "files_before": 0, "files_after": 0, "seconds": 0.0}
        snapshot = log.update(False, dlog.none(spark), dlog.none(spark))
        partition_columns = list(dlog.to_list(snapshot.metadata().partitionColumns()))
        files = dlog.dataframe(spark, snapshot.allFiles().toDF())
        before = files.count()
        small = files.filter(files.size < small_bytes)
        if partition_columns:
            counts = small.groupBy("partitionValues").count().filter(f"count > {min_files}")
            targets = [row["partitionValues"] for row in counts.collect()]
        else:
            targets = [{}] if small.count() > min_files else []
        delta = spark._jvm.io.delta.tables.DeltaTable.forPath(spark._jsparkSession, where)
        with micros_timestamps(spark):  # the rewritten files as the commits wrote them
            for values in targets:
                builder = delta.optimize()
                predicate = _partition_predicate(values)
                if predicate:
                    builder = builder.where(predicate)
                builder.executeCompaction()
        after = (
            log.update(False, dlog.none(spark), dlog.none(spark)).allFiles().count()
            if targets
            else before
        )
        return {
            "compacted": len(targets),
            "files_before": int(before),
            "files_after": int(after),
            "seconds": time.monotonic() - began,
        }

    return _job(run)


# ---- open and commit ----------------------------------------------------------------------


def _open(
    spark: Any,
    path: str | None,
    connector: str,
    task: int,
    epoch: int,
    partitions: Sequence[Sequence[Any]],
) -> dict[str, Any]:
    apps = {app_id(connector, str(t), int(p)): (str(t), int(p)) for t, p in partitions}
    log = None if path is None else dlog.delta_log(spark, path)
    if log is None or path is None or not log.tableExists():
        return {
            "newest_epoch": -1,
            "fenced": False,
            "exists": False,
            "offsets": [[t, p, None] for t, p in apps.values()],
            "state": dict.fromkeys(apps, -1),
            "schema": None,
            "partition_by": None,
        }
    txn = log.startTransaction()
    versions = {app: int(txn.txnVersion(app)) for app in apps}
    newest = max((epoch_of(v) for v in versions.values()), default=-1)
    if newest > epoch:
        return {"newest_epoch": newest, "fenced": False}
    offsets = dlog.committed_offsets(
        spark, log, path, {a: v for a, v in versions.items() if v >= 0}
    )
    fenced = {a: v if epoch_of(v) == epoch else epoch << EPOCH_SHIFT for a, v in versions.items()}
    changed = {a: [fenced[a], offsets.get(a)] for a in apps if fenced[a] != versions[a]}
    if changed:
        meta = _metadata(connector, task, epoch, "fence", changed)
        _commit_actions(spark, txn, [], changed, meta, partition_by=None)
    metadata = txn.metadata()
    return {
        "newest_epoch": newest,
        "fenced": bool(changed),
        "exists": True,
        "offsets": [[t, p, offsets.get(a)] for a, (t, p) in apps.items()],
        "state": fenced,
        "schema": dlog.schema_of_struct(metadata.schema()),
        "partition_by": list(dlog.to_list(metadata.partitionColumns())),
    }


def _commit(
    spark: Any,
    batch: Any,
    path: str,
    connector: str,
    task: int,
    epoch: int,
    ranges: Sequence[Sequence[Any]],
    state: Mapping[str, int],
    partition_by: Sequence[str],
    merge_schema: bool,
) -> dict[str, Any]:
    began = time.monotonic()
    apps = {app_id(connector, str(t), int(p)): (str(t), int(p), int(e)) for t, p, _, e in ranges}
    rows = 0 if batch is None else int(batch.num_rows)
    df = batch.df if rows else None
    for attempt in range(RETRIES + 1):
        log = dlog.delta_log(spark, path)
        if df is not None:
            _create_or_evolve(spark, log, path, df, partition_by, merge_schema)
            log = dlog.delta_log(spark, path)
        elif not log.tableExists():
            # Nothing to write and no table to hold the offsets: they stay in the task only
            # (the records they cover are read and left out again after a restart).
            return {"state": dict(state), "rows": 0, "files": 0, "seconds": 0.0, "schema": None}
        txn = log.startTransaction()
        versions = {app: int(txn.txnVersion(app)) for app in apps}
        _refuse_newer(versions, epoch, {a: v[:2] for a, v in apps.items()})
        for app, version in versions.items():
            if version != int(state.get(app, -1)):
                t, p, _ = apps[app]
                raise OffsetsDiverged(
                    f"{t}-{p}: the Delta table's transaction for this partition is at version "
                    f"{version}, this task expected {state.get(app, -1)}: another commit landed "
                    "since the task read the table; it must read its offsets again"
                )
        new = {a: _next_version(v, epoch) for a, v in versions.items()}
        entries = {a: [new[a], apps[a][2]] for a in apps}
        meta = _metadata(connector, task, epoch, "write", entries)
        try:
            actions = [] if df is None else dlog.to_list(txn.writeFiles(_aligned(spark, df, txn)))
            version = _commit_actions(spark, txn, actions, entries, meta, partition_by=partition_by)
        except Exception as exc:
            text = str(exc)
            if "ConcurrentTransactionException" in text or "DELTA_CONCURRENT_TRANSACTION" in text:
                raise ZombieEpoch(
                    f"{_names(apps)}: another incarnation committed these partitions while this "
                    f"commit (epoch {epoch}) was in flight; refused"
                ) from None
            if attempt < RETRIES and any(c in text for c in _CONFLICTS):
                continue
            raise
        return {
            "state": {**state, **new},
            "rows": rows,
            "files": sum(1 for a in actions if a.dataChange()),
            "seconds": time.monotonic() - began,
            "schema": dlog.schema_of_struct(txn.metadata().schema()),
            "snapshot": int(version),
        }
    raise AssertionError("unreachable")  # pragma: no cover


def _next_version(version: int, epoch: int) -> int:
    if epoch_of(version) == epoch:
        return version + 1
    return (epoch << EPOCH_SHIFT) + 1


def _refuse_newer(
    versions: Mapping[str, int], epoch: int, apps: Mapping[str, tuple[str, int]]
) -> None:
    newer = {a: epoch_of(v) for a, v in versions.items() if epoch_of(v) > epoch}
    if newer:
        owned = ", ".join(
            f"{apps[a][0]}-{apps[a][1]} (epoch {e})" for a, e in sorted(newer.items())
        )
        raise ZombieEpoch(
            f"a newer incarnation owns {owned} in the Delta table; this one has epoch {epoch}: "
            "refused, the table is unchanged"
        )


def _create_or_evolve(
    spark: Any, log: Any, path: str, df: Any, partition_by: Sequence[str], merge_schema: bool
) -> None:
    """Create the table from the batch's schema, or add the batch's new columns (schema
    evolution on); both are metadata-only commits of an empty write."""
    empty = df.limit(0).write.format("delta").mode("append")
    if not log.tableExists():
        try:
            (empty.partitionBy(*partition_by) if partition_by else empty).save(path)
        except Exception:
            if not dlog.delta_log(spark, path).tableExists():  # another task created it first: fine
                raise
        return
    metadata = log.update(False, dlog.none(spark), dlog.none(spark)).metadata()
    table_parts = list(dlog.to_list(metadata.partitionColumns()))
    if partition_by and list(partition_by) != table_parts:
        raise errors.ConfigError(
            f"partition.by: the Delta table at {path} is partitioned by {table_parts or 'nothing'},"
            f" not {list(partition_by)}; partitioning cannot change"
        )
    table_types = dict(dlog.schema_of_struct(metadata.schema()))
    mismatched = [
        f"{c}: {t} in the batch, {table_types[c]} in the table"
        for c, t in dlog.schema_of_df(df.schema)
        if c in table_types and t != table_types[c]
    ]
    if mismatched:
        raise errors.RecordRejected(
            "column types differ from the Delta table's (a column's type never changes): "
            + "; ".join(mismatched)
        )
    new = [c for c, _ in dlog.schema_of_df(df.schema) if c not in table_types]
    if not new:
        return
    if not merge_schema:
        raise errors.RecordRejected(
            f"columns {new} are not in the Delta table and schema.evolution=false"
        )
    empty.option("mergeSchema", "true").save(path)


def _aligned(spark: Any, df: Any, txn: Any) -> Any:
    """``df`` with the table's columns in the table's order; columns it lacks are null."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    table = StructType.fromJson(json.loads(txn.metadata().schema().json()))
    have = set(df.columns)
    cols = [
        F.col(f.name) if f.name in have else F.lit(None).cast(f.dataType).alias(f.name)
        for f in table.fields
    ]
    return df.select(*cols)._jdf


def _commit_actions(
    spark: Any,
    txn: Any,
    files: list[Any],
    entries: Mapping[str, Sequence[Any]],
    meta: str,
    partition_by: Sequence[str] | None,
) -> int:
    jvm = spark._jvm
    now = jvm.scala.Some(int(time.time() * 1000))
    sets = [
        jvm.org.apache.spark.sql.delta.actions.SetTransaction.apply(app, int(v), now)
        for app, (v, _) in entries.items()
    ]
    actions = jvm.scala.jdk.javaapi.CollectionConverters.asScala(
        dlog.java_list(jvm, [*files, *sets])
    ).toList()
    none = dlog.none(spark)
    parts = (
        none if partition_by is None else jvm.scala.Some(dlog.scala_seq(jvm, list(partition_by)))
    )
    operation = jvm.org.apache.spark.sql.delta.DeltaOperations.Write(
        jvm.org.apache.spark.sql.SaveMode.Append,
        parts,
        none,
        jvm.scala.Some(meta),
        none,
        none,
        none,
        none,
        none,
    )
    return int(txn.commit(actions, operation))


def _metadata(
    connector: str, task: int, epoch: int, kind: str, entries: Mapping[str, Sequence[Any]]
) -> str:
    return json.dumps(
        {
            "connectd": 1,
            "kind": kind,
            "connector": connector,
            "task": task,
            "epoch": epoch,
            "partitions": {a: list(v) for a, v in sorted(entries.items())},
        },
        separators=(",", ":"),
    )


def _names(apps: Mapping[str, Sequence[Any]]) -> str:
    return ", ".join(f"{v[0]}-{v[1]}" for v in apps.values())


def _partition_predicate(values: Mapping[str, Any]) -> str:
    def literal(v: Any) -> str:
        return "NULL" if v is None else "'" + str(v).replace("'", "''") + "'"

    return " AND ".join(
        f"`{k.replace('`', '``')}` {'IS' if v is None else '='} {literal(v)}"
        for k, v in sorted(values.items())
    )
