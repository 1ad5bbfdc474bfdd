"""DeltaSink's executor jobs: every read and commit of a Delta table, through Delta's own
transaction log (``OptimisticTransaction`` through py4j), in killable executors.

Exactly once rests on Delta's application transactions (``SetTransaction``, the mechanism of
the ``txnAppId``/``txnVersion`` writer options), one per Kafka partition and connector
(``txns.py``: app ids, versions ``epoch << 40 | n``, and the stamps that say which connector
owns a partition):

- every commit reads the transactions of its partitions inside its transaction (Delta records
  the read: every connector's of those partitions) and writes ``SetTransaction`` actions with
  the next versions. Delta refuses the commit (``ConcurrentTransactionException``) if another
  commit set one of those app ids after the read: a zombie's commit in flight when a newer
  incarnation fenced never lands, nor one of a connector another took the partition from. A
  version above this epoch's seen at the read is a newer owner, a partition another
  connector owns is not this one's (``PartitionsOwned``): refused before any data is written;
- ``open_table`` fences: one commit with only ``SetTransaction`` actions at ``epoch << 40``;
  a partition another connector owns is refused unless that one is in ``takeover``: then the
  fence continues from its offsets and sets its transaction again (so its commit in flight
  is refused), and it owns the partition no more;
- a skip is a commit without rows (``reason``) that moves a partition past offsets retention
  deleted, its gap and reason in ``userMetadata``;
- each commit's ``userMetadata`` (commit info, shown by ``DESCRIBE HISTORY`` and delta-rs)
  holds every partition's version and next offset; the read-back finds, per partition, the
  newest commit naming its current version. Checkpoints keep ``txn`` but not commit info, and
  JSON commits expire after ``delta.logRetentionDuration`` (30 days): when a partition's commit
  is gone, its offset is ``max(kafka_offset) + 1`` of its rows (the audit columns).

Data files are written by ``writeFiles`` straight into the table's directory, and become part
of the table only with the commit: a job killed at any instant leaves at most files no Delta
reader sees (``VACUUM`` removes them after ``delta.deletedFileRetentionDuration``).

Errors with a meaning are returned as ``{"error": [class, message]}`` (``tables.jobs``):
``ZombieEpoch``, ``OffsetsDiverged``, ``PartitionsOwned``, ``RecordRejected``, ``ConfigError``.
Imports only the standard library and ``daemon`` modules at import time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from daemon import errors
from daemon.connectors.delta import log as dlog
from daemon.connectors.delta import txns as dtxns
from daemon.connectors.delta.commit import (
    again_on_conflict,
    claim,
    commit_rows,
    fence,
    now_ms,
    owned,
)
from daemon.connectors.delta.txns import app_id, parse_app_id
from daemon.connectors.parquet.write import micros_timestamps
from daemon.connectors.tables.jobs import job

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
    takeover: Sequence[str] = (),
) -> dict[str, Any]:
    """Fence ``partitions`` with ``epoch`` and read their committed offsets (see the module).
    ``table``: a catalog table instead of ``path`` (its location comes from the catalog)."""

    def run() -> dict[str, Any]:
        where = dlog.location(spark, path, table)
        return fence(spark, where, connector, task, epoch, partitions, takeover)

    return job(lambda: again_on_conflict(run))


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
    reason: str = "",
    generated: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """One Delta commit of ``batch``'s rows and the offsets ``ranges`` end at (into the
    catalog table ``table`` instead of ``path`` if given; created there if missing).
    ``reason``: a skip, no rows: ``ranges`` were deleted from Kafka before they were
    written; the commit's ``userMetadata`` records them (``skipped``) and ``reason``.
    ``generated``: the time columns a new table declares as generated (``create_table``)."""
    made = dict(generated or {})

    def run() -> dict[str, Any]:
        where = dlog.location(spark, path, table)
        if where is None and batch is not None and batch.num_rows:
            dlog.create_table(spark, batch.df, partition_by, made, table=table)
            where = dlog.location(spark, path, table)
        if where is None:
            return {"state": dict(state), "rows": 0, "files": 0, "seconds": 0.0, "schema": None}
        kind, extra = ("skip", {"skipped": ranges, "reason": reason}) if reason else ("write", {})
        with micros_timestamps(spark):  # as ParquetSink writes them
            return commit_rows(
                spark, batch, where, connector, task, epoch, ranges, state, partition_by,
                merge_schema, kind, extra, made,
            )  # fmt: skip

    return job(run)


def read_offsets(
    spark: Any, batch: Any, *, path: str, connector: str, table: str = ""
) -> dict[str, Any]:
    """Next offset of every partition ``connector`` owns in the table."""

    def read() -> dict[str, Any]:
        where = dlog.location(spark, path, table)
        log = None if where is None else dlog.delta_log(spark, where)
        if log is None or where is None or not log.tableExists():
            return {"offsets": []}
        versions = owned(dlog.transactions(dlog.latest(spark, log)), connector)
        found = dlog.committed_offsets(spark, log, where, versions)
        return {"offsets": [[*parse_app_id(a, connector), o] for a, o in sorted(found.items())]}  # type: ignore[misc]

    return job(read)


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
    every partition ``connector`` owns. The connector is stopped: versions grow by one within
    their epoch, so the next incarnation's fence is still above them. A partition another
    connector owns is refused (``PartitionsOwned``)."""

    def alter() -> dict[str, Any]:
        where = dlog.location(spark, path, table)
        log = None if where is None else dlog.delta_log(spark, where)
        if where is None or log is None or not log.tableExists():
            if reset:
                return {}
            what = f"table: no table {table}" if table else f"path: no Delta table at {path}"
            raise errors.ConfigError(f"{what} yet; nothing to alter")
        txn = log.startTransaction()
        txns = dlog.transactions(txn.snapshot())
        wanted = {(str(t), int(p)): o for t, p, o in offsets}
        if reset:
            wanted = dict.fromkeys(parse_app_id(a, connector) for a in owned(txns, connector))  # type: ignore[misc]
        claimed = claim(txn, txns, connector, wanted, (), where)
        entries = {}
        for (t, p), offset in wanted.items():
            app = app_id(connector, t, p)
            version = int(txn.txnVersion(app))
            entries[app] = [version + 1 if version >= 0 else 0, offset]
        if entries:
            when = dtxns.stamp(txns, wanted, now_ms())
            meta = dtxns.metadata(connector, -1, -1, "alter", entries)
            sets = {**{a: (int(v), when) for a, (v, _) in entries.items()}, **claimed.sets(when)}
            dlog.commit_actions(spark, txn, [], sets, meta, partition_by=None)
        return {}

    return job(alter)


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
        snapshot = dlog.latest(spark, log)
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
        after = dlog.latest(spark, log).allFiles().count() if targets else before
        return {
            "compacted": len(targets),
            "files_before": int(before),
            "files_after": int(after),
            "seconds": time.monotonic() - began,
        }

    return job(run)


def _partition_predicate(values: Mapping[str, Any]) -> str:
    def literal(v: Any) -> str:
        return "NULL" if v is None else "'" + str(v).replace("'", "''") + "'"

    return " AND ".join(
        f"`{k.replace('`', '``')}` {'IS' if v is None else '='} {literal(v)}"
        for k, v in sorted(values.items())
    )
