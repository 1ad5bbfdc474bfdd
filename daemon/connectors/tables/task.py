"""The task of a table-format sink (DeltaSink, IcebergSink): Kafka records into tables whose
own transaction log keeps each offset exactly once.

The task side is the same for every format; the format's executor jobs (``jobs`` module, see
``daemon.connectors.delta.jobs``) do every read and commit of its tables:

- ``open``: per table, ``open_table`` fences the partitions with this incarnation's epoch and
  reads their committed offsets back from the table's metadata; the task seeks there. The
  format's opaque per-partition ``state`` (Delta: transaction versions) travels with each
  commit, which the table refuses if anything committed those partitions since.
- ``put``: buffer (ParquetSink's ``RecordBuffer``; its ``Writer`` writes one batch at a time,
  beside the task's reading, when a flush is due); ``reject`` refuses before ``put`` the records
  a table cannot take (a field of another type than its column; a new field without
  ``schema.evolution``), so ``errors.tolerance`` decides about them.
- a flush: one ``commit`` job per table (``${topic}`` tables: one per topic). A failed commit
  (deadline passed and executor killed, executor died, the job raised) may still have landed:
  the task reads the table's offsets again before it raises, and the runtime re-reads Kafka
  from what is committed. A refusal (``ZombieEpoch``: a newer incarnation owns a partition)
  fails the task; nothing of it is in the table.
- upkeep: every ``compaction.interval.ms``, after a commit, the format's ``upkeep`` job
  (compaction and the like) in the same writer coroutine, so it never overlaps a commit of
  this task; a failed upkeep is logged, never fatal.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from daemon.connectors.api import SinkTask, SinkTaskContext
from daemon.connectors.parquet.buffer import RecordBuffer
from daemon.connectors.parquet.jobs import raise_for
from daemon.connectors.parquet.writer import Writer
from daemon.connectors.records import OffsetRange, RecordBatch, TopicPartition
from daemon.connectors.tables.schema import fitted, refused_rows
from daemon.connectors.tables.settings import TableSettings, Target
from daemon.errors import ConfigError, WriteFailed
from daemon.storage.logstate import ZombieEpoch

log = logging.getLogger("connectd.connectors.tables")
#: Seconds ``open`` waits for its jobs inside the rebalance callback (below the consumer's
#: ``session.timeout.ms``, 10 s by default); the rest goes on beside the task.
OPEN_WAIT = 5.0


class FormatSettings(Protocol):
    """A format's parsed configuration, as the shared task needs it."""

    @property
    def table(self) -> TableSettings: ...

    def target(self, topic: str) -> Target: ...


class TableStateUnknown(WriteFailed):
    """A commit failed and the table's offsets could not be read back: written again after
    the task re-reads them (retriable)."""


@dataclass
class _Table:
    target: Target
    state: dict[str, Any] = field(default_factory=dict)  # the format's per-partition state
    schema: list[list[str]] | None = None
    known: bool = True  # False: a commit failed and its outcome was not read back yet
    last_upkeep: float = field(default_factory=time.monotonic)


class TableSinkTask(SinkTask):
    """One task of a table sink; a format subclasses it with ``format``, ``jobs`` and
    ``load_settings``."""

    #: The executor session's table format (``daemon.executor.formats``).
    format: ClassVar[str]
    #: The module of the format's executor jobs.
    jobs: ClassVar[str]

    def load_settings(self, config: Mapping[str, str]) -> FormatSettings:
        raise NotImplementedError

    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.settings = self.load_settings(config)
        self.context = context
        self.connector = context.task_id.connector
        self._buffer = RecordBuffer()
        self._committed: dict[TopicPartition, int] = {}
        self._tables: dict[str, _Table] = {}
        self._opening: dict[asyncio.Task[None], frozenset[TopicPartition]] = {}
        self.commits = 0
        self.rows_written = 0
        self.upkeeps = 0
        self._writer = Writer(self._buffer, self.settings.table.flush_policy, self._flush)
        self._writing = context.start_background(self._writer.run(), "writer")

    # ---- the lifecycle ----

    async def open(self, partitions: Collection[TopicPartition]) -> None:
        """Fence the partitions and read their offsets (``open_table`` per table), waiting at
        most ``OPEN_WAIT`` seconds: ``open`` runs inside the consumer's rebalance callback,
        where no heartbeat is sent, and the first job of a cold start waits for an executor
        (a JVM start, 10-40 s here), past ``session.timeout.ms``. What is not done by then
        goes on beside the task; ``put`` waits for it, seeks its partitions to their
        committed offsets and leaves out their records until the seek."""
        tps = frozenset(partitions)
        if not tps:
            return
        opening = self.context.start_background(self._open_all(tps), "open")
        self._opening[opening] = tps
        await asyncio.wait([opening], timeout=OPEN_WAIT)
        if opening.done():
            self._opened(opening)
        else:
            log.info(
                "%s: opening %s goes on beside the rebalance (waiting for an executor)",
                self.context.task_id,
                ", ".join(map(str, sorted(tps))),
            )

    async def _open_all(self, tps: frozenset[TopicPartition]) -> None:
        for target, group in self._by_table(tps).values():
            await self._open_table(target, group, first=True)
        committed = {tp: self._committed[tp] for tp in tps if tp in self._committed}
        log.info(
            "%s: opened %s at committed offsets %s (epoch %d)",
            self.context.task_id,
            ", ".join(map(str, sorted(tps))),
            {str(k): v for k, v in sorted(committed.items())} or "none",
            self.context.epoch,
        )

    def _opened(
        self, opening: asyncio.Task[None], closing: Collection[TopicPartition] = ()
    ) -> dict[TopicPartition, int]:
        """The seeks of a finished opening (requested here, none for ``closing`` partitions);
        raises its failure."""
        tps = self._opening.pop(opening) - set(closing)
        opening.result()
        seeks = {tp: self._committed[tp] for tp in tps if tp in self._committed}
        seeks = {tp: o for tp, o in seeks.items() if tp in self.context.assignment()}
        if seeks:
            self.context.offset(seeks)
        return seeks

    async def _finish_opening(self, batch: RecordBatch) -> RecordBatch:
        """Wait for openings still going on; ``batch`` without the records of the partitions
        they seek (those come again from the committed offset)."""
        sought: set[TopicPartition] = set()
        for opening in list(self._opening):
            await asyncio.wait([opening])
            sought |= set(self._opened(opening))
        if not sought:
            return batch
        keep = [r for r in batch.ranges if r.tp not in sought]
        table = batch.table
        if table.num_rows:
            mine = pc.is_in(
                pc.binary_join_element_wise(
                    table.column("kafka_topic"),
                    pc.cast(table.column("kafka_partition"), pa.string()),
                    "/",
                ),
                value_set=pa.array([f"{tp.topic}/{tp.partition}" for tp in sought], pa.string()),
            )
            table = table.filter(pc.invert(mine))
        return dataclasses.replace(batch, table=table, ranges=tuple(keep))

    async def reject(self, batch: RecordBatch) -> Mapping[int, BaseException]:
        table = batch.table
        if not table.num_rows:
            return {}
        new_columns = self.settings.table.merge_schema
        topics = pc.unique(table.column("kafka_topic")).to_pylist()
        refused: dict[int, BaseException] = {}
        for topic in topics:
            known = self._tables.get(self.settings.target(str(topic)).name)
            if known is None or known.schema is None:
                continue
            rows = None if len(topics) == 1 else pc.equal(table.column("kafka_topic"), topic)
            refused.update(refused_rows(table, known.schema, new_columns=new_columns, rows=rows))
        return refused

    async def put(self, batch: RecordBatch) -> None:
        """Buffer ``batch`` for the writer; waits only while the buffer is full. Raises the
        failure of a write that failed since the last call."""
        self._raise_failure()
        if self._opening:
            batch = await self._finish_opening(batch)
        if len(batch):
            self._check_partition_columns(batch)
            topics = pc.unique(batch.table.column("kafka_topic")).to_pylist()
            if len(topics) == 1:
                known = self._tables.get(self.settings.target(str(topics[0])).name)
                table = fitted(batch.table, None if known is None else known.schema)
                if table is not batch.table:
                    batch = dataclasses.replace(batch, table=table)
        self._buffer.add(batch, self._writer.continues_after(self._committed))
        self._writer.poke()
        await self._writer.make_room()
        self._raise_failure()

    async def pre_commit(
        self, offsets: Mapping[TopicPartition, int]
    ) -> Mapping[TopicPartition, int]:
        """What is committed in the tables; when closing, everything buffered is first."""
        for opening in [o for o in self._opening if o.done()]:
            self._opened(opening)
        if self.context.is_closing:
            await self._writer.drain()
        self._raise_failure()
        return {tp: self._committed[tp] for tp in offsets if tp in self._committed}

    async def close(self, partitions: Collection[TopicPartition]) -> None:
        closing = set(partitions)
        for opening, tps in list(self._opening.items()):
            if tps <= closing:
                opening.cancel()  # its job's executor is killed and reaped first
                await asyncio.wait([opening])
                del self._opening[opening]
            elif tps & closing:  # it opens partitions that stay too: let it finish
                await asyncio.wait([opening])
                self._opened(opening, closing)
        await self._writer.settle()
        self._buffer.drop(partitions)
        for tp in partitions:
            self._committed.pop(tp, None)

    async def stop(self) -> None:
        writing = getattr(self, "_writing", None)  # None if start failed
        if writing is not None:
            writing.cancel()  # a write in flight (none after a closing pre_commit) is killed
            await asyncio.wait([writing])

    @property
    def committed(self) -> dict[TopicPartition, int]:
        """Next offset per open partition, durable in the tables."""
        return dict(self._committed)

    @property
    def buffered(self) -> int:
        """Rows buffered, not yet written."""
        return self._buffer.rows

    async def quiet(self) -> None:
        """Until no write is in flight or due now; raises a failed write's error."""
        await self._writer.quiet()
        self._raise_failure()

    # ---- jobs ----

    async def _job(
        self, fn: str, target: Target, batch: pa.Table | None = None, **kwargs: Any
    ) -> Mapping[str, Any]:
        result = await self.context.run_in_executor(
            f"{self.jobs}:{fn}",
            batch,
            timeout=self.settings.table.write_timeout,
            formats=(self.format,),
            **target.kwargs,
            **kwargs,
        )
        return raise_for(result)

    async def _open_table(
        self, target: Target, tps: Sequence[TopicPartition], *, first: bool = False
    ) -> None:
        """Fence ``tps`` in ``target`` and read their offsets. ``first``: at assignment, where
        a table that has seen this connector's epoch (or a newer one) makes the incarnation
        raise its epoch above it (``context.raise_epoch``): the table, not the daemon's state
        directory, is the authority, so the newest starter always wins."""
        ctx = self.context
        for _ in range(2):
            result = await self._job(
                "open_table",
                target,
                connector=self.connector,
                task=ctx.task_id.task,
                epoch=ctx.epoch,
                partitions=[[tp.topic, tp.partition] for tp in tps],
            )
            newest = int(result["newest_epoch"])
            if not first or newest < ctx.epoch:
                break
            before = ctx.epoch
            if await ctx.raise_epoch(above=newest) == before:
                break  # no epoch source: the fence refuses this incarnation as a zombie
            log.info(
                "%s: %s has seen epoch %d of %s; took epoch %d (was %d)",
                *(ctx.task_id, target.name, newest, self.connector, ctx.epoch, before),
            )
        if "state" not in result:  # a newer epoch holds one of the partitions
            raise ZombieEpoch(
                f"task {ctx.task_id}: a newer incarnation (epoch {result['newest_epoch']}) owns "
                f"partitions of {target.name}; this one has epoch {ctx.epoch}"
            )
        table = self._tables.setdefault(target.name, _Table(target))
        table.state.update(result["state"])
        table.schema = result["schema"]
        table.known = True
        for topic, partition, offset in result["offsets"]:
            tp = TopicPartition(str(topic), int(partition))
            if offset is None:
                self._committed.pop(tp, None)
            else:
                self._committed[tp] = int(offset)

    async def _flush(self, table: pa.Table, ranges: tuple[OffsetRange, ...]) -> None:
        """Commit one batch: one commit per table (the writer's ``WriteBatch``)."""
        by_table: dict[str, list[OffsetRange]] = {}
        targets: dict[str, Target] = {}
        for r in ranges:
            target = self.settings.target(r.topic)
            targets[target.name] = target
            by_table.setdefault(target.name, []).append(r)
        for name, target_ranges in by_table.items():
            rows = table
            if len(by_table) > 1 and table.num_rows:
                topics = pa.array(sorted({r.topic for r in target_ranges}), pa.string())
                rows = table.filter(pc.is_in(table.column("kafka_topic"), value_set=topics))
            await self._commit(targets[name], rows, tuple(target_ranges))

    async def _commit(
        self, target: Target, rows: pa.Table, ranges: tuple[OffsetRange, ...]
    ) -> None:
        ctx = self.context
        table = self._tables.setdefault(target.name, _Table(target))
        if not table.known:
            moved = await self._reread(table, ranges)
            if moved:
                raise TableStateUnknown(
                    f"task {ctx.task_id}: {target.name}'s committed offsets are {moved} after a "
                    "commit that failed earlier; reading Kafka again from there"
                )
        began = time.monotonic()
        try:
            result = await self._job(
                "commit",
                target,
                rows if rows.num_rows else None,
                connector=self.connector,
                task=ctx.task_id.task,
                epoch=ctx.epoch,
                ranges=[[r.topic, r.partition, r.start, r.end] for r in ranges],
                state={k: v for k, v in table.state.items()},
                partition_by=list(self.settings.table.partition_by),
                merge_schema=self.settings.table.merge_schema,
            )
        except asyncio.CancelledError:
            table.known = False
            raise
        except Exception as exc:
            table.known = False
            log.warning(
                "%s: commit of %d records (%s) into %s failed: %s: %s",
                *(ctx.task_id, rows.num_rows, _describe(ranges), target.name),
                type(exc).__name__,
                str(exc).splitlines()[0] if str(exc) else "",
            )
            # It may have landed before the failure: the offsets the task seeks to come
            # from the table, not from what the task believed.
            try:
                moved = await self._reread(table, ranges)
            except Exception as again:
                log.warning("%s: reading %s back failed too: %s", ctx.task_id, target.name, again)
            else:
                if moved:
                    log.warning("%s: the commit landed after all: %s", ctx.task_id, moved)
            raise
        table.state.update(result["state"])
        if result.get("schema") is not None:
            table.schema = result["schema"]
        for r in ranges:
            self._committed[r.tp] = r.end
        self.commits += 1
        self.rows_written += rows.num_rows
        log.info(
            "%s: committed %d records (%s) into %s, %.2f s (job %.2f s)",
            *(ctx.task_id, rows.num_rows, _describe(ranges), target.name),
            time.monotonic() - began,
            float(result.get("seconds", 0.0)),
        )
        await self._maybe_upkeep(table)

    async def _reread(self, table: _Table, ranges: Sequence[OffsetRange]) -> dict[str, Any]:
        """Read the committed offsets of ``ranges``' partitions back from the table (this
        incarnation's fence holds them already); those that moved from what the task held."""
        before = {r.tp: self._committed.get(r.tp) for r in ranges}
        await self._open_table(table.target, sorted({r.tp for r in ranges}))
        return {
            str(tp): self._committed.get(tp)
            for tp, offset in before.items()
            if self._committed.get(tp) != offset
        }

    async def _maybe_upkeep(self, table: _Table) -> None:
        settings = self.settings.table
        if settings.compaction_min_files <= 0 or self.context.is_closing:
            return
        if time.monotonic() - table.last_upkeep < settings.upkeep_interval:
            return
        table.last_upkeep = time.monotonic()
        try:
            result = await self._job(
                "upkeep",
                table.target,
                min_files=settings.compaction_min_files,
                small_bytes=settings.compaction_small_bytes,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning(
                "%s: upkeep of %s failed (the table is as it was): %s",
                self.context.task_id,
                table.target.name,
                exc,
            )
            return
        self.upkeeps += 1
        if result.get("compacted"):
            log.info(
                "%s: compacted %d partition(s) of %s: %d -> %d files, %.2f s",
                *(self.context.task_id, result["compacted"], table.target.name),
                result["files_before"],
                result["files_after"],
                result["seconds"],
            )

    # ---- helpers ----

    def _by_table(
        self, partitions: Collection[TopicPartition]
    ) -> dict[str, tuple[Target, list[TopicPartition]]]:
        out: dict[str, tuple[Target, list[TopicPartition]]] = {}
        for tp in sorted(partitions):
            target = self.settings.target(tp.topic)
            out.setdefault(target.name, (target, []))[1].append(tp)
        return out

    def _check_partition_columns(self, batch: RecordBatch) -> None:
        columns = batch.table.column_names
        missing = [c for c in self.settings.table.partition_by if c not in columns]
        if missing:
            raise ConfigError(
                f"partition.by: {missing} are not columns of the records ({columns}); a value's "
                "fields are columns only with value.fields or value.converter.mode=infer"
            )

    def _raise_failure(self) -> None:
        self._writer.raise_failure(self._committed, self.context)


def _describe(ranges: Collection[OffsetRange]) -> str:
    return ", ".join(f"{r.tp}@{r.start}..{r.end}" for r in ranges)
