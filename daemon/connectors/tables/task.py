"""The one sink task of every table format (ParquetSink, DeltaSink, IcebergSink): Kafka records
into tables whose own storage keeps each offset exactly once. It holds the difference, a
``TableFormat`` (``format.py`` states its guarantees), and never asks which one it is.

- ``open``: per table, the format's handle claims the partitions: fences them with this
  incarnation's epoch and reads their committed offsets back; the task seeks there. A table
  that has seen this connector's epoch (or a newer one) makes the task raise its epoch above
  it first (``context.raise_epoch``): the table, not the daemon's state directory, is the
  authority. The claims wait at most ``opening.OPEN_WAIT`` in the partitions' assignment; the
  rest goes on beside the task and ``put`` finishes it (``opening.py``).
- ``put``: buffer (``buffer.py``; ``writer.py`` writes one batch at a time, beside the task's
  reading, when a flush is due). ``reject`` refuses before ``put`` the records a table cannot
  take (a field of another type than its column; a new field without ``schema.evolution``), so
  ``errors.tolerance`` decides about them.
- a flush: one commit per table (``${topic}`` tables: one per topic, routed by the connector's
  RegexRouter if it has one: ``settings.Routes``). A routed record's table row holds the
  routed topic as ``kafka_topic``; its offsets stay with the topic it was read from. A failed commit
  (deadline passed and executor killed, executor died, a job raised) may still have landed:
  the task reads the table's offsets back before it raises, and the runtime re-reads Kafka
  from what is committed. A refusal (``ZombieEpoch``: a newer incarnation owns a partition)
  fails the task; nothing of it is in the table. After a commit, the table's upkeep if due.
- ``offsets_skipped`` (retention deleted offsets before they were written, and
  ``errors.offset.out.of.range=earliest`` skips them): writes what is buffered, then the
  format records the gap in the table, fenced like a commit; the partition moves past it.
- ``pre_commit``: the offsets durable in the tables (the runtime commits those to the
  consumer group for lag tools only); when closing, everything buffered is written first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from daemon.connectors.api import SinkTask, SinkTaskContext
from daemon.connectors.records import OffsetRange, RecordBatch, TopicPartition, routed
from daemon.connectors.tables import timeparts
from daemon.connectors.tables.buffer import RecordBuffer
from daemon.connectors.tables.format import FormatFactory, TableFormat, TableHandle
from daemon.connectors.tables.opening import Openings, without
from daemon.connectors.tables.schema import fitted, refused_rows
from daemon.connectors.tables.settings import MISSING_KEY, Target
from daemon.connectors.tables.writer import Writer
from daemon.errors import ConfigError, ConnectdError, WriteFailed
from daemon.storage.logstate import TableLost

log = logging.getLogger("connectd.connectors.tables")


class TableStateUnknown(WriteFailed):
    """A commit failed and the table's offsets could not be read back: written again after
    the task re-reads them (retriable)."""


class TableOffsetsMissing(ConnectdError):
    """The table has no committed offsets for partitions the consumer group has: its state
    is gone, or it is new to a connector that ran before. Starting it again is the user's
    choice (not retriable: a restart meets the same table)."""

    retriable = False
    not_retried_because = "a restart would meet the same table; where it starts is your choice"


@dataclasses.dataclass
class _Table:
    handle: TableHandle
    known: bool = True  # False: a commit failed and its outcome was not read back yet


class TableSinkTask(SinkTask):
    """One task of a table sink; a sink names its format (``table_format``)."""

    #: Builds the sink's format from the task configuration.
    table_format: ClassVar[FormatFactory]

    def make_format(self, config: Mapping[str, str]) -> TableFormat:
        return type(self).table_format(config)

    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.format = self.make_format(config)
        self.settings = self.format.settings.table
        self.context = context
        self._buffer = RecordBuffer()
        self._committed: dict[TopicPartition, int] = {}
        self._tables: dict[str, _Table] = {}
        self._openings = Openings(context, self._committed)
        self.commits = 0
        self.rows_written = 0
        self._writer = Writer(self._buffer, self.settings.flush_policy, self._flush)
        self._writing = context.start_background(self._writer.run(), "writer")

    # ---- the lifecycle ----

    async def open(self, partitions: Collection[TopicPartition]) -> None:
        tps = frozenset(partitions)
        if tps:
            await self._openings.start(tps, self._claim_all(tps))

    def max_poll_records(self) -> int:
        """A poll at most the buffer's bound (``buffer.max.records``, at least
        ``flush.max.records``): behind a backlog the buffer holds at most about twice it."""
        return self.settings.flush_policy.buffer_records

    async def reject(self, batch: RecordBatch) -> Mapping[int, BaseException]:
        table = batch.table
        if not table.num_rows:
            return {}
        new_columns = self.settings.merge_schema
        topics = pc.unique(table.column("kafka_topic")).to_pylist()
        refused: dict[int, BaseException] = {}
        written = routed(table)  # the columns as they will be written
        for topic in topics:
            schema = self._schema(str(topic))
            if schema is None:
                continue
            rows = None if len(topics) == 1 else pc.equal(table.column("kafka_topic"), topic)
            refused.update(refused_rows(written, schema, new_columns=new_columns, rows=rows))
        return refused

    async def put(self, batch: RecordBatch) -> None:
        """Buffer ``batch`` for the writer; waits only while the buffer is full. Raises the
        failure of a write that failed since the last call."""
        self._raise_failure()
        if self._openings:
            batch = without(batch, await self._openings.finish())
        if len(batch):
            if self.settings.time_columns:
                batch = self._with_time_columns(batch)
            self._check_partition_columns(batch)
            topics = pc.unique(batch.table.column("kafka_topic")).to_pylist()
            if len(topics) == 1:
                table = fitted(batch.table, self._schema(str(topics[0])))
                if table is not batch.table:
                    batch = dataclasses.replace(batch, table=table)
        self._buffer.add(batch, self._writer.continues_after(self._committed))
        self._writer.poke()
        await self._writer.make_room()
        self._raise_failure()

    async def offsets_skipped(self, tp: TopicPartition, start: int, end: int) -> None:
        """Record the gap ``start``..``end - 1`` of ``tp`` in its table: first what is
        buffered is written, so the skip continues the partition's committed offsets."""
        sought = await self._openings.finish()
        await self._drain()
        # The gap starts where the table's offsets end: the consumer's position may already
        # be past a transaction marker or a compacted batch's end that no record stands for.
        start = min(start, self._committed.get(tp, start))
        reason = (
            f"errors.offset.out.of.range=earliest: offsets {start}..{end - 1} of {tp} were"
            f" deleted from Kafka (retention) before they were written; the log started at {end}"
        )
        table = self._table(self.format.settings.target(tp.topic))
        await table.handle.skip(tp, start, end, reason)
        self._committed[tp] = end
        if tp in sought:  # the opening just sought it below the gap
            self.context.offset(tp, end)
        log.warning(
            "%s: recorded skip of offsets %d..%d of %s in %s (epoch %d)",
            *(self.context.task_id, start, end - 1, tp, table.handle.target.name),
            self.context.epoch,
        )

    async def pre_commit(
        self, offsets: Mapping[TopicPartition, int]
    ) -> Mapping[TopicPartition, int]:
        """What is committed in the tables; when closing, everything buffered is first."""
        self._openings.settle_done()
        if self.context.is_closing:
            await self._drain()
        self._raise_failure()
        return {tp: self._committed[tp] for tp in offsets if tp in self._committed}

    async def close(self, partitions: Collection[TopicPartition]) -> None:
        await self._openings.close(partitions)
        # After a closing pre_commit nothing is in flight; after a failure elsewhere the write
        # in flight may still land (it is exactly once either way): it ends before the close.
        await self._writer.settle()
        self._buffer.drop(partitions)
        for tp in partitions:
            self._committed.pop(tp, None)

    async def stop(self) -> None:
        writing = getattr(self, "_writing", None)  # None if start failed
        if writing is not None:
            writing.cancel()  # a write in flight (none after a closing pre_commit) is killed
            await asyncio.wait([writing])
        for table in getattr(self, "_tables", {}).values():
            await table.handle.close()

    @property
    def committed(self) -> dict[TopicPartition, int]:
        """Next offset per open partition, durable in the tables."""
        return dict(self._committed)

    @property
    def buffered(self) -> int:
        """Rows buffered, not yet written."""
        return self._buffer.rows

    async def quiet(self) -> None:
        """Until no write is in flight or due now; raises a failed write's error. For tests
        and benchmarks that observe the writer (``put`` does not wait for writes)."""
        await self._writer.quiet()
        self._raise_failure()

    # ---- claims ----

    async def _claim_all(self, tps: frozenset[TopicPartition]) -> None:
        for target, group in self._by_table(tps).values():
            await self._claim(self._table(target).handle, group)
            await self._check_offsets_kept(target, group)
        committed = {tp: self._committed[tp] for tp in tps if tp in self._committed}
        log.info(
            "%s: opened %s at committed offsets %s (epoch %d)",
            self.context.task_id,
            ", ".join(map(str, sorted(tps))),
            {str(k): v for k, v in sorted(committed.items())} or "none",
            self.context.epoch,
        )

    async def _claim(self, handle: TableHandle, tps: Sequence[TopicPartition]) -> None:
        ctx = self.context
        claim = await handle.claim(tps, probe=True)
        if claim.behind is not None:
            before = ctx.epoch
            after = await ctx.raise_epoch(above=claim.behind)
            if after > before:
                log.info(
                    "%s: table %s has seen epoch %d of %s; took epoch %d (was %d)",
                    *(ctx.task_id, handle.target.name, claim.behind, ctx.task_id.connector),
                    *(after, before),
                )
            # Without an epoch source the epoch stays, and the claim refuses it as a zombie.
            claim = await handle.claim(tps, probe=False)
        self._update(claim.offsets)

    async def _check_offsets_kept(self, target: Target, tps: Sequence[TopicPartition]) -> None:
        """The consumer group's offsets never decide where a table starts unless the user
        says so (``table.offsets.missing=group``): a partition the table has no offsets for
        while the group committed one fails the task, before anything is written."""
        missing = [tp for tp in tps if tp not in self._committed]
        if not missing or self.format.settings.table.start_at_group:
            return
        group = {tp: o for tp, o in (await self.context.group_offsets(missing)).items() if o > 0}
        if not group:
            return
        name = self.context.task_id.connector
        shown = ", ".join(f"{tp}: {o}" for tp, o in sorted(group.items()))
        raise TableOffsetsMissing(
            f"task {self.context.task_id}: table {target.name} has no committed offsets for"
            f" {', '.join(map(str, sorted(group)))}, but the connector's consumer group"
            f" committed {shown}: the table's state is gone (deleted, or its log lost) or the"
            f" table is new to a connector that ran before. Nothing was written. {_choices(name)}"
        )

    def _update(self, offsets: Mapping[TopicPartition, int | None]) -> dict[str, int | None]:
        """Take ``offsets`` read from a table; those that moved from what the task held."""
        moved: dict[str, int | None] = {}
        for tp, offset in offsets.items():
            if self._committed.get(tp) != offset:
                moved[str(tp)] = offset
            if offset is None:
                self._committed.pop(tp, None)
            else:
                self._committed[tp] = offset
        return moved

    # ---- commits ----

    async def _flush(self, table: pa.Table, ranges: tuple[OffsetRange, ...]) -> None:
        """Write and commit one batch: one commit per table (the writer's ``WriteBatch``)."""
        by_table: dict[str, tuple[Target, list[OffsetRange]]] = {}
        for r in ranges:
            target = self.format.settings.target(r.topic)
            by_table.setdefault(target.name, (target, []))[1].append(r)
        for target, target_ranges in by_table.values():
            rows = table
            if len(by_table) > 1 and table.num_rows:
                topics = pa.array(sorted({r.topic for r in target_ranges}), pa.string())
                rows = table.filter(pc.is_in(table.column("kafka_topic"), value_set=topics))
            await self._commit(self._table(target), rows, tuple(target_ranges))

    async def _commit(self, table: _Table, rows: pa.Table, ranges: tuple[OffsetRange, ...]) -> None:
        ctx, handle = self.context, table.handle
        if not table.known:
            moved = await self._read_back(table, ranges)
            if moved:
                raise TableStateUnknown(
                    f"task {ctx.task_id}: {handle.target.name}'s committed offsets are {moved} "
                    "after a commit that failed earlier; reading Kafka again from there"
                )
        began = time.monotonic()
        try:
            done = await handle.commit(routed(rows), ranges)
        except asyncio.CancelledError:
            table.known = False
            raise
        except TableLost as exc:
            # Nothing was committed: the table is not read back (that would find it empty).
            held = {tp: o for tp, o in self._committed.items() if tp in {r.tp for r in ranges}}
            shown = ", ".join(f"{tp}: {o}" for tp, o in sorted(held.items()))
            name = ctx.task_id.connector
            raise TableLost(
                f"task {ctx.task_id}: table {handle.target.name} lost its state under the"
                f" task, whose last committed offsets there were {shown or 'none'}: {exc}."
                f" {_choices(name)}"
            ) from exc
        except Exception as exc:
            table.known = False
            log.warning(
                "%s: commit of %d records (%s) into %s failed: %s: %s",
                *(ctx.task_id, rows.num_rows, _describe(ranges), handle.target.name),
                type(exc).__name__,
                str(exc).splitlines()[0] if str(exc) else "",
            )
            # It may have landed before the failure: the offsets the task seeks to come
            # from the table, not from what the task believed.
            try:
                moved = await self._read_back(table, ranges)
            except Exception as again:
                log.warning("%s: reading %s back failed too: %s", ctx.task_id, handle.target, again)
            else:
                if moved:
                    log.warning("%s: the commit landed after all: %s", ctx.task_id, moved)
            raise
        for r in ranges:
            self._committed[r.tp] = r.end
        self.commits += 1
        self.rows_written += rows.num_rows
        log.info(
            "%s: committed %d records (%s) into %s in %d files, %.2f s (in the executor %.2f s)",
            *(ctx.task_id, rows.num_rows, _describe(ranges), handle.target.name, done.files),
            time.monotonic() - began,
            done.seconds,
        )
        # The runtime's next loop passes the table's new offsets on (``pre_commit``): to the
        # consumer group for lag tools, and to the task's status, where ``--until-caught-up``
        # sees them, at once rather than at the next ``offset.flush.interval.ms``.
        ctx.request_commit()
        if not ctx.is_closing:
            await handle.upkeep()

    async def _read_back(
        self, table: _Table, ranges: Sequence[OffsetRange]
    ) -> dict[str, int | None]:
        found = await table.handle.read_back(sorted({r.tp for r in ranges}))
        table.known = True
        return self._update(found)

    # ---- helpers ----

    def _table(self, target: Target) -> _Table:
        table = self._tables.get(target.name)
        if table is None:
            table = self._tables[target.name] = _Table(self.format.open(target, self.context))
        return table

    def _schema(self, topic: str) -> list[list[str]] | None:
        table = self._tables.get(self.format.settings.target(topic).name)
        schema = None if table is None else table.handle.schema
        return None if schema is None else [list(c) for c in schema]

    def _by_table(
        self, partitions: Collection[TopicPartition]
    ) -> dict[str, tuple[Target, list[TopicPartition]]]:
        out: dict[str, tuple[Target, list[TopicPartition]]] = {}
        for tp in sorted(partitions):
            target = self.format.settings.target(tp.topic)
            out.setdefault(target.name, (target, []))[1].append(tp)
        return out

    def _with_time_columns(self, batch: RecordBatch) -> RecordBatch:
        """``batch`` with partition.by's time transforms and path.format's columns."""
        table = timeparts.derived(batch.table, self.settings.time_columns, int(time.time() * 1000))
        return dataclasses.replace(batch, table=table)

    def _check_partition_columns(self, batch: RecordBatch) -> None:
        partition_by = self.settings.partition_by
        columns = batch.table.column_names
        sources = [(timeparts.transform_of(c) or ("", c))[1] for c in partition_by]
        missing = [c for c in sources if c not in columns]
        timeparts.check_hidden(partition_by, batch.table.schema)
        if missing or (partition_by and len(partition_by) >= len(columns)):
            raise ConfigError(
                f"partition.by: {missing or list(partition_by)} cannot partition records with "
                f"columns {columns} (a value's fields are columns only with value.fields or "
                "value.converter.mode=infer, and at least one column must stay in the files)"
            )

    async def _drain(self) -> None:
        await self._writer.drain()
        self._raise_failure()

    def _raise_failure(self) -> None:
        self._writer.raise_failure(self._committed, self.context)


def _choices(connector: str) -> str:
    """What the user may do about a table without its offsets (``TableLost``,
    ``TableOffsetsMissing``): starting it again is theirs to decide."""
    return (
        f"To write it from Kafka's start, stop the connector and DELETE /connectors/{connector}"
        f"/offsets (or PATCH them to where it should start); to start at the consumer group's"
        f" offsets, set {MISSING_KEY}=group and restart the task."
    )


def _describe(ranges: Collection[OffsetRange]) -> str:
    return ", ".join(f"{r.tp}@{r.start}..{r.end}" for r in ranges)
