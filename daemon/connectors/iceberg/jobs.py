"""IcebergSink's executor jobs (the interface of the table-format sinks: ``open_table``,
``commit``, ``read_offsets``, ``alter_offsets``, ``upkeep``), called by name through
``context.run_in_executor("daemon.connectors.iceberg.jobs:<fn>", ...)``.

Every job takes the table's location as ``catalog`` (the connector's ``catalog.*`` settings,
keys as written: ``{"catalog.type": "hadoop", "catalog.warehouse": "/data/wh"}``) and
``table`` (``namespace.name``); it declares that catalog in the executor's session itself
(``catalog.declare``), so the executor needs only the Iceberg jar and extensions at start.

Offsets and epochs live in the table's snapshot summaries (``state``); every change of them
is published by compare-and-set (``table.publish``), which is what refuses a zombie, also one
whose commit was under way when it was fenced. Errors with a meaning (``ZombieEpoch``,
``OffsetsDiverged``, ``ConfigError``) are returned as ``{"error": [class, message]}``:
``daemon.connectors.parquet.jobs.raise_for`` raises them again on the task's side.

Imports only the standard library and ``daemon`` modules that do at import time.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from daemon import errors
from daemon.connectors.iceberg import state as state_module
from daemon.connectors.iceberg import table as table_module
from daemon.connectors.iceberg.catalog import Catalog, declare
from daemon.connectors.parquet.jobs import _job

#: Upkeep's defaults: snapshots younger than this stay (readers in progress, time travel), and
#: a branch of the sink older than this was left by a killed commit.
RETAIN_MS = 24 * 3600 * 1000
BRANCH_TTL_MS = 3600 * 1000


def _where(catalog: Catalog, connector: str, task: int) -> str:
    return f"Iceberg table {catalog.in_catalog} ({connector} task {task})"


def _schema(spark: Any, table: Any) -> list[list[str]]:
    struct = spark._jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(table.schema())
    return [[f.name(), f.dataType().simpleString()] for f in struct.fields()]


def _partition_by(table: Any) -> list[str]:
    out = []
    for field in table.spec().fields():
        column = table.schema().findColumnName(field.sourceId())
        transform = field.transform()
        out.append(column if transform.isIdentity() else f"{transform.toString()}({column})")
    return out


def open_table(
    spark: Any,
    batch: Any,
    *,
    catalog: Mapping[str, Any],
    table: str,
    connector: str,
    task: int = 0,
    epoch: int = 0,
    partitions: Sequence[Sequence[Any]] = (),
) -> dict[str, Any]:
    """Fence ``partitions`` with ``epoch`` and read their committed offsets (see the
    interface). A table that does not exist yet is not created (its columns come with the
    first batch): nothing to fence, every offset ``None``."""

    def run() -> dict[str, Any]:
        cat = declare(spark, {**catalog, "table": table})
        tbl = table_module.load(spark, cat)
        if tbl is None:
            offsets = state_module.offsets_out({}, partitions)
            return {
                "newest_epoch": -1,
                "fenced": False,
                "exists": False,
                "offsets": offsets,
                "state": {},
                "schema": None,
                "partition_by": None,
            }
        current, _ = table_module.read_state(tbl, connector)
        mine = [state_module.as_tp(p) for p in partitions]
        newest = max((current[tp].epoch for tp in mine if tp in current), default=-1)
        if newest > epoch:
            # A newer incarnation, or this daemon lost its epochs: the task decides.
            return {"newest_epoch": newest, "fenced": False}
        fenced = False
        if mine and any(current.get(tp, state_module.Entry(None, 0)).epoch != epoch for tp in mine):
            where = _where(cat, connector, task)
            table_module.publish(
                spark,
                cat,
                tbl,
                connector=connector,
                task=task,
                epoch=epoch,
                decide=lambda s: state_module.fence(s, epoch, partitions, where),
            )
            fenced = True
            current, _ = table_module.read_state(tbl, connector)
        return {
            "newest_epoch": newest,
            "fenced": fenced,
            "exists": True,
            "offsets": state_module.offsets_out(current, partitions),
            "state": {"snapshot": int(tbl.currentSnapshot().snapshotId())},
            "schema": _schema(spark, tbl),
            "partition_by": _partition_by(tbl),
        }

    return _job(run)


def commit(
    spark: Any,
    batch: Any,
    *,
    catalog: Mapping[str, Any],
    table: str,
    connector: str,
    task: int,
    epoch: int,
    ranges: Sequence[Sequence[Any]],
    state: Mapping[str, Any] | None = None,
    partition_by: Sequence[str] = (),
    merge_schema: bool = False,
    before_publish: Mapping[str, Any] | None = None,
    crash_after: str | None = None,
) -> dict[str, Any]:
    """One atomic commit of ``batch``'s rows covering ``ranges`` (see the interface).
    For fault tests: ``before_publish``, ``open_table`` kwargs run inside this commit just
    before its first swap, as a newer incarnation fencing at the worst instant would;
    ``crash_after="write"`` SIGKILLs this executor at that instant (rows written, not
    published)."""
    began = time.monotonic()

    def run() -> dict[str, Any]:
        cat = declare(spark, {**catalog, "table": table})
        rows = 0 if batch is None else int(batch.num_rows)
        tbl = table_module.load(spark, cat)
        if tbl is None:
            if not rows:
                # Nothing to write and no table to hold the offsets: they stay in the task
                # (the records they cover are read and left out again after a restart).
                return {"state": dict(state or {}), "rows": 0, "files": 0, "seconds": 0.0}
            tbl = table_module.create(spark, cat, batch.df, list(partition_by))
        where = _where(cat, connector, task)
        hook: Callable[[], object] | None = None
        if crash_after == "write":
            hook = _die
        elif before_publish is not None:
            fence_kwargs = dict(before_publish)
            hook = lambda: open_table(spark, None, **fence_kwargs)  # noqa: E731
        result = table_module.publish(
            spark,
            cat,
            tbl,
            connector=connector,
            task=task,
            epoch=epoch,
            decide=lambda s: state_module.commit(s, epoch, ranges, where),
            df=batch.df if rows else None,
            merge_schema=merge_schema,
            hook=hook,
        )
        return {
            "state": {"snapshot": result["snapshot"]},
            "rows": rows,
            "files": result["files"],
            "seconds": time.monotonic() - began,
            "schema": _schema(spark, tbl),
            "snapshot": result["snapshot"],
            "attempts": result["attempts"],
        }

    return _job(run)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def read_offsets(
    spark: Any, batch: Any, *, catalog: Mapping[str, Any], table: str, connector: str
) -> dict[str, Any]:
    """Every partition's committed next offset in ``connector``'s state (none: no table)."""

    def run() -> dict[str, Any]:
        cat = declare(spark, {**catalog, "table": table})
        tbl = table_module.load(spark, cat)
        if tbl is None:
            return {"offsets": []}
        current, _ = table_module.read_state(tbl, connector)
        return {"offsets": state_module.offsets_out(current)}

    return _job(run)


def alter_offsets(
    spark: Any,
    batch: Any,
    *,
    catalog: Mapping[str, Any],
    table: str,
    connector: str,
    offsets: Sequence[Sequence[Any]],
    epoch: int | None = None,
    reset: bool = False,
) -> dict[str, Any]:
    """Set ([topic, partition, offset]) or forget ([topic, partition, None]) offsets, in one
    snapshot published like a commit; ``reset``: forget every partition of ``connector``.
    The offsets API calls it with the connector stopped and no ``epoch``: each partition
    keeps the newest epoch the table has for the connector, so the next incarnation's fence
    still ranks above it (given an ``epoch``, a newer one's partitions are refused)."""

    def run() -> dict[str, Any]:
        cat = declare(spark, {**catalog, "table": table})
        tbl = table_module.load(spark, cat)
        if tbl is None:
            if not reset and any(o is not None for _, _, o in offsets):
                raise errors.ConfigError(
                    f"table: {cat.in_catalog} does not exist: no offsets can be set in it"
                )
            return {}
        where = _where(cat, connector, -1)
        current, _ = table_module.read_state(tbl, connector)
        newest = max((e.epoch for e in current.values()), default=0)
        by = newest if epoch is None else epoch
        changes = [[t, p, None] for t, p in sorted(current)] if reset else list(offsets)
        if not changes:
            return {}
        table_module.publish(
            spark,
            cat,
            tbl,
            connector=connector,
            task=-1,
            epoch=by,
            decide=lambda s: state_module.alter(s, by, changes, where),
        )
        return {}

    return _job(run)


def upkeep(
    spark: Any,
    batch: Any,
    *,
    catalog: Mapping[str, Any],
    table: str,
    min_files: int,
    small_bytes: int = 32 << 20,
    retain_ms: int = RETAIN_MS,
    branch_ttl_ms: int = BRANCH_TTL_MS,
) -> dict[str, Any]:
    """Compact partitions with at least ``min_files`` data files (``rewrite_data_files``),
    drop branches left by killed commits, and expire snapshots older than ``retain_ms``
    except the newest one carrying each connector's state and everything after it (counted
    and by commit time: ``state_carriers``).
    Killed at any instant: each step is one catalog commit, so the table is as before or
    after that step; the rows never change."""
    began = time.monotonic()

    def run() -> dict[str, Any]:
        cat = declare(spark, {**catalog, "table": table})
        tbl = table_module.load(spark, cat)
        report: dict[str, Any] = {
            "compacted": 0,
            "files_before": 0,
            "files_after": 0,
            "branches_dropped": 0,
            "snapshots_expired": 0,
        }
        if tbl is None or tbl.currentSnapshot() is None:
            return {**report, "seconds": time.monotonic() - began}
        report["files_before"] = _data_files(tbl)
        counts = spark.sql(
            f"SELECT count(*) FROM {cat.table}.files WHERE file_size_in_bytes < {int(small_bytes)}"
            " GROUP BY partition"
        ).collect()
        report["compacted"] = sum(1 for r in counts if int(r[0]) > max(1, min_files))
        if report["compacted"]:
            options = {
                "min-input-files": str(max(2, int(min_files))),
                "min-file-size-bytes": str(int(small_bytes)),
            }
            pairs = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
            spark.sql(
                f"CALL {cat.name}.system.rewrite_data_files(table => '{cat.in_catalog}', "
                f"options => map({pairs}))"
            ).collect()
            tbl.refresh()
        report["files_after"] = _data_files(tbl)
        for name in table_module.stale_branches(tbl, branch_ttl_ms):
            try:
                tbl.manageSnapshots().removeBranch(name).commit()
                report["branches_dropped"] += 1
            except Exception:  # raced with another commit: the next upkeep drops it
                tbl.refresh()
        before = _snapshot_count(tbl)
        carriers = table_module.state_carriers(tbl).values()
        keep = max((depth for depth, _ in carriers), default=0) + 1
        # Never older than a state carrier: a commit or a compaction by another task landing
        # after the depths were counted pushes a carrier deeper than ``keep``, not later in time.
        cutoff = min(
            int(time.time() * 1000) - int(retain_ms),
            min((at for _, at in carriers), default=2**62),
        )
        tbl.expireSnapshots().expireOlderThan(cutoff).retainLast(keep).commit()
        tbl.refresh()
        report["snapshots_expired"] = before - _snapshot_count(tbl)
        return {**report, "seconds": time.monotonic() - began}

    return _job(run)


def _data_files(table: Any) -> int:
    snap = table.currentSnapshot()
    return 0 if snap is None else int(snap.summary().get("total-data-files") or 0)


def _snapshot_count(table: Any) -> int:
    return sum(1 for _ in table.snapshots())
