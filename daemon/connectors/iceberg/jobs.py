"""IcebergSink's executor jobs (the interface of ``tables.jobtables``: ``open_table``,
``commit``, ``read_offsets``, ``alter_offsets``, ``upkeep``), called by name
through ``context.run_in_executor("daemon.connectors.iceberg.jobs:<fn>", ...)``.

Every job takes the table's location as ``catalog`` (the connector's ``catalog.*`` settings,
keys as written: ``{"catalog.type": "hadoop", "catalog.warehouse": "/data/wh"}``) and
``table`` (``namespace.name``); it declares that catalog in the executor's session itself
(``catalog.declare``), so the executor needs only the Iceberg jar and extensions at start.

Offsets, epochs and which connector owns each partition live in the table's snapshot
summaries (``state``); every change of them is published by compare-and-set
(``table.publish``), decided on ``main``'s head, which is what refuses a zombie, also one
whose commit was under way when it was fenced, and a second connector on the same
partitions (``PartitionsOwned``, unless it names the owner in ``takeover``: then it
continues from the owner's offsets, and the owner can write them no more). Errors with a
meaning (``ZombieEpoch``, ``OffsetsDiverged``, ``PartitionsOwned``, ``ConfigError``) are
returned as ``{"error": [class, message]}`` (``tables.jobs``).

Imports only the standard library and ``daemon`` modules that do at import time.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from daemon import errors
from daemon.connectors.iceberg import state as state_module
from daemon.connectors.iceberg import table as table_module
from daemon.connectors.iceberg.catalog import Catalog, declare
from daemon.connectors.iceberg.state import Entry, State
from daemon.connectors.iceberg.upkeep import upkeep as upkeep  # the interface's, kept apart
from daemon.connectors.tables.jobs import job
from daemon.storage.logstate import TableLost


def _where(catalog: Catalog, connector: str, task: int) -> str:
    return f"Iceberg table {catalog.in_catalog} ({connector} task {task})"


def _schema(spark: Any, table: Any) -> list[list[str]]:
    struct = spark._jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(table.schema())
    return [[f.name(), f.dataType().catalogString()] for f in struct.fields()]


def _partition_by(table: Any) -> list[str]:
    out = []
    for field in table.spec().fields():
        column = table.schema().findColumnName(field.sourceId())
        transform = field.transform()
        out.append(column if transform.isIdentity() else f"{transform.toString()}({column})")
    return out


def _decider(
    connector: str,
    task: int,
    epoch: int,
    where: str,
    partitions: Sequence[Sequence[Any]],
    change: Callable[[State, Mapping[tuple[str, int], int | None]], State],
    *,
    takeover: Collection[str] = (),
    claims: bool = True,
    extra: Mapping[str, str] | None = None,
) -> Callable[[Any], dict[str, str]]:
    """What ``table.publish`` decides on ``main``'s head: ``change`` of ``connector``'s state
    (given the offsets of partitions taken over from a connector in ``takeover``), and, if
    ``claims``, ``partitions`` owned by ``connector``; a partition another connector owns is
    refused."""

    def decide(tbl: Any) -> dict[str, str]:
        owners = table_module.read_owners(tbl)
        taken = state_module.claim(owners, connector, partitions, where, takeover)
        offsets = {
            tp: table_module.read_state(tbl, other)[0].get(tp, Entry(None, 0)).offset
            for tp, other in taken.items()
        }
        new = change(table_module.read_state(tbl, connector)[0], offsets)
        if claims:
            owners = {**owners, **{state_module.as_tp(p): connector for p in partitions}}
        props = state_module.properties(connector, task, epoch, new, owners)
        return {**props, **(extra or {})}

    return decide


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
    takeover: Sequence[str] = (),
) -> dict[str, Any]:
    """Fence ``partitions`` with ``epoch`` and read their committed offsets (see the
    interface); a partition another connector owns is refused unless it is in ``takeover``.
    A table that does not exist yet is not created (its columns come with the first batch):
    nothing to fence, every offset ``None``."""

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
        where = _where(cat, connector, task)
        owners = table_module.read_owners(tbl)
        state_module.claim(owners, connector, partitions, where, takeover)
        current, _ = table_module.read_state(tbl, connector)
        mine = [state_module.as_tp(p) for p in partitions]
        newest = max((current[tp].epoch for tp in mine if tp in current), default=-1)
        if newest > epoch:
            # A newer incarnation, or this daemon lost its epochs: the task decides.
            return {"newest_epoch": newest, "fenced": False}
        fenced = False
        if any(current.get(tp, Entry(None, 0)).epoch != epoch or owners.get(tp) != connector
               for tp in mine):  # fmt: skip
            table_module.publish(
                spark,
                cat,
                tbl,
                decide=_decider(
                    connector,
                    task,
                    epoch,
                    where,
                    partitions,
                    lambda s, taken: state_module.fence(s, epoch, partitions, where, taken),
                    takeover=takeover,
                ),
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

    return job(run)


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
    reason: str = "",
) -> dict[str, Any]:
    """One atomic commit of ``batch``'s rows covering ``ranges`` (see the interface).
    ``reason``: a skip, no rows: ``ranges`` were deleted from Kafka before they were written;
    the snapshot's summary records them and ``reason`` under ``connectd.skipped.<connector>``.
    For fault tests: ``before_publish``, ``open_table`` kwargs run inside this commit just
    before its first swap, as a newer incarnation fencing at the worst instant would;
    ``crash_after="write"`` SIGKILLs this executor at that instant (rows written, not
    published)."""
    began = time.monotonic()

    def run() -> dict[str, Any]:
        cat = declare(spark, {**catalog, "table": table})
        rows = 0 if batch is None else int(batch.num_rows)
        tbl = table_module.load(spark, cat)
        if tbl is None and (state or {}).get("snapshot") is not None:
            raise TableLost(
                f"the Iceberg table {table} is gone (dropped, or its metadata deleted) while"
                " this task had committed to it; creating it again would start it over"
                " silently; nothing was committed"
            )
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
            decide=_decider(
                connector,
                task,
                epoch,
                where,
                [r[:2] for r in ranges],
                lambda s, _: state_module.commit(s, epoch, ranges, where),
                extra=_skipped(connector, ranges, reason),
            ),
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

    return job(run)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _skipped(connector: str, ranges: Sequence[Sequence[Any]], reason: str) -> dict[str, str]:
    if not reason:
        return {}
    gap = {"skipped": [list(r) for r in ranges], "reason": reason}
    return {state_module.SKIPPED_PREFIX + connector: json.dumps(gap)}


def read_offsets(
    spark: Any, batch: Any, *, catalog: Mapping[str, Any], table: str, connector: str
) -> dict[str, Any]:
    """Every partition's committed next offset in ``connector``'s state (none: no table)."""

    def run() -> dict[str, Any]:
        cat = declare(spark, {**catalog, "table": table})
        tbl = table_module.load(spark, cat)
        if tbl is None:
            return {"offsets": []}
        return {"offsets": state_module.offsets_out(_owned(tbl, connector))}

    return job(run)


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
        owned = sorted(_owned(tbl, connector))
        changes = [[t, p, None] for t, p in owned] if reset else list(offsets)
        if not changes:
            return {}
        table_module.publish(
            spark,
            cat,
            tbl,
            decide=_decider(
                connector,
                -1,
                by,
                where,
                [c[:2] for c in changes],
                lambda s, _: state_module.alter(s, by, changes, where),
                claims=False,
            ),
        )
        return {}

    return job(run)


def _owned(table: Any, connector: str) -> State:
    """``connector``'s state of the partitions it owns (not one another took over)."""
    owners = table_module.read_owners(table)
    current, _ = table_module.read_state(table, connector)
    return {tp: e for tp, e in current.items() if owners.get(tp, connector) == connector}
