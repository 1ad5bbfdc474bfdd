"""ParquetSink: Kafka records into a file table (Parquet, ORC, JSON or CSV) written by Spark,
each Kafka offset exactly once.

How a task keeps exactly-once (DESIGN.md, "Exactly-once into the sink"):

- ``open``: claim the partitions in the table's commit log with this incarnation's epoch
  (``fence``: from then on an older incarnation's commit is refused, even before ours), read the
  offsets committed with the data and seek there.
- ``put``: buffer the batch (Arrow tables, no per-row Python). When ``flush.max.records`` rows
  are buffered or the oldest buffered record is ``flush.interval.ms`` old, write: Spark writes
  the rows into a staging directory of the table, in a killable executor; then one commit
  record with the offset ranges and the epoch is created exclusively and the files are moved
  into place. A commit that does not continue exactly where the last one ended, or comes from
  an older epoch, is refused and its staged files deleted: a zombie never lands.
- A failed write (deadline passed and executor killed, executor died, write raised) deletes
  its staged files and fails the ``put`` with the executor's (retriable) error: the runtime
  restarts the task, and the new incarnation seeks to the committed offsets again. Buffered
  records are dropped with the failed incarnation; Kafka still has them.
- ``pre_commit``: writes what is buffered when closing (``context.is_closing``) or when the
  interval has passed, and returns the offsets durable in the table; the runtime commits those
  to the consumer group for lag tools only.

The connector also answers Connect's offsets API from the table's commit log
(``read_offsets``, ``alter_offsets``, ``reset_offsets``; see docs/connectors.md).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, ClassVar

from daemon import __version__
from daemon.config.problems import Problem
from daemon.connectors.api import ConfigDef, SinkConnector, SinkTask, SinkTaskContext
from daemon.connectors.parquet_buffer import RecordBuffer
from daemon.connectors.parquet_config import (
    CONFIG_DEF,
    ParquetSettings,
    check_config,
    table_path,
    write_timeout,
)
from daemon.connectors.records import OffsetRange, RecordBatch, TopicPartition
from daemon.errors import ConfigError
from daemon.storage.commitlog import META, CommitLog, DataFile

__all__ = [
    "CONFIG_DEF",
    "ParquetSettings",
    "ParquetSinkConnector",
    "ParquetSinkTask",
    "__version__",
    "check_config",
    "table_path",
    "write_timeout",
]

log = logging.getLogger("connectd.connectors.parquet")


class ParquetSinkConnector(SinkConnector):
    """Writes records into a file table through Spark, exactly once (see the module docs)."""

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[Problem]:
        return check_config(config)

    def task_class(self) -> type[SinkTask]:
        return ParquetSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """``value.fields`` is handed on as the value converter's ``fields`` option."""
        config = dict(self.config)
        if config.get("value.fields", "").strip():
            config.setdefault("value.converter.fields", config["value.fields"])
        return [dict(config) for _ in range(max_tasks)]

    # ---- Connect's offsets API, answered from the table's commit log ----

    async def read_offsets(self, config: Mapping[str, str]) -> dict[TopicPartition, int]:
        """Next offset per partition, as committed with the table's data ({} if none)."""

        def read() -> dict[TopicPartition, int]:
            path = _existing_table(config)
            if path is None:
                return {}
            with CommitLog(path) as commit_log:
                return commit_log.committed_offsets()

        return await asyncio.to_thread(read)

    async def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]
    ) -> None:
        """Set partitions' next offsets in the commit log (``None``: forget the partition; its
        consumer-group offset, or ``auto.offset.reset``, decides where it starts). The
        connector must be stopped; the runtime changes the consumer group's offsets too."""
        bad = {tp: o for tp, o in offsets.items() if o is not None and o < 0}
        if bad:
            raise ConfigError(f"offsets must be ≥ 0 (or null to reset): {bad}")
        path = _table(config)

        def alter() -> None:
            with CommitLog(path) as commit_log:
                commit_log.alter_offsets(offsets, connector=config.get("name", ""))

        await asyncio.to_thread(alter)

    async def reset_offsets(self, config: Mapping[str, str]) -> None:
        """Forget every partition's committed offset (the data stays in the table)."""

        def reset() -> None:
            path = _existing_table(config)
            if path is not None:
                with CommitLog(path) as commit_log:
                    commit_log.reset_offsets(connector=config.get("name", ""))

        await asyncio.to_thread(reset)


def _table(config: Mapping[str, str]) -> Path:
    if "path" not in config:
        raise ConfigError("path: required setting is missing")
    try:
        return table_path(config["path"])
    except ValueError as e:
        raise ConfigError(f"path: {e}") from None


def _existing_table(config: Mapping[str, str]) -> Path | None:
    path = _table(config)
    return path if (path / META).is_dir() else None


class ParquetSinkTask(SinkTask):
    """One task of a ParquetSink. Subclasses may point ``write_function`` at another executor
    function with ``write_staged``'s signature (tests do, to hang a write on purpose)."""

    write_function: ClassVar[str] = "daemon.connectors.parquet_write:write_staged"

    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.settings = ParquetSettings.from_config(config)
        self.context = context
        self._buffer = RecordBuffer()
        self._committed: dict[TopicPartition, int] = {}
        self._log = await asyncio.to_thread(CommitLog(self.settings.path).open)
        self.commits = 0
        self.rows_written = 0

    async def open(self, partitions: Collection[TopicPartition]) -> None:
        tps = sorted(partitions)
        if not tps:
            return
        ctx = self.context
        # Claim first, then read: whatever was committed before the claim is seen, and no
        # older incarnation can commit after it.
        await asyncio.to_thread(
            self._log.fence, ctx.task_id.connector, ctx.task_id.task, ctx.epoch, tps
        )
        committed = await asyncio.to_thread(self._log.committed_offsets, tps)
        self._committed.update(committed)
        if committed:
            ctx.offset(committed)
        log.info(
            "%s: opened %s at committed offsets %s (epoch %d)",
            ctx.task_id,
            ", ".join(map(str, tps)),
            {str(k): v for k, v in committed.items()} or "none",
            ctx.epoch,
        )

    async def put(self, batch: RecordBatch) -> None:
        if self.settings.partition_by and len(batch):
            self._check_partition_columns(batch)
        self._buffer.add(batch, self._committed)
        if self._buffer.due(self.settings.flush_max_records, self.settings.flush_interval):
            await self._flush()

    async def pre_commit(
        self, offsets: Mapping[TopicPartition, int]
    ) -> Mapping[TopicPartition, int]:
        s = self.settings
        if self.context.is_closing or self._buffer.due(s.flush_max_records, s.flush_interval):
            await self._flush()
        return {tp: self._committed[tp] for tp in offsets if tp in self._committed}

    async def close(self, partitions: Collection[TopicPartition]) -> None:
        self._buffer.drop(partitions)
        for tp in partitions:
            self._committed.pop(tp, None)

    async def stop(self) -> None:
        commit_log = getattr(self, "_log", None)  # None if start failed
        if commit_log is not None:
            await asyncio.to_thread(commit_log.close)

    @property
    def committed(self) -> dict[TopicPartition, int]:
        """Next offset per open partition, durable in the table."""
        return dict(self._committed)

    @property
    def buffered(self) -> int:
        """Rows buffered, not yet written."""
        return self._buffer.rows

    def _check_partition_columns(self, batch: RecordBatch) -> None:
        columns = batch.table.column_names
        missing = [c for c in self.settings.partition_by if c not in columns]
        if missing or len(self.settings.partition_by) >= len(columns):
            raise ConfigError(
                f"partition.by: {missing or list(self.settings.partition_by)} cannot partition "
                f"records with columns {columns} (a value's fields are columns only with "
                "value.fields, and at least one column must stay in the files)"
            )

    async def _flush(self) -> None:
        """Write and commit everything buffered; on any failure, delete the staged files and
        re-raise (the buffer is dropped: the next incarnation reads Kafka again)."""
        table, ranges = self._buffer.take()
        if not ranges:
            return
        ctx, settings, commit_log = self.context, self.settings, self._log
        commit_id = commit_log.new_commit_id()
        began = time.monotonic()
        try:
            files: list[DataFile] = []
            written: dict[str, Any] = {}
            if table.num_rows:
                stage = await asyncio.to_thread(commit_log.stage_dir, commit_id)
                written = await ctx.run_in_executor(
                    self.write_function,
                    table,
                    timeout=settings.write_timeout,
                    path=str(stage),
                    format=settings.format,
                    partition_by=list(settings.partition_by),
                    compression=settings.compression,
                )
                staged = await asyncio.to_thread(commit_log.staged_files, commit_id)
                files = [DataFile(f.staged, _tidy(f.final)) for f in staged]
            await asyncio.to_thread(
                commit_log.commit,
                ctx.task_id.connector,
                ctx.task_id.task,
                ctx.epoch,
                ranges,
                files,
                commit_id=commit_id,
            )
        except BaseException as exc:
            # The executor (if any) is gone by now: the pool reaps it before raising.
            abort = asyncio.ensure_future(asyncio.to_thread(commit_log.abort, commit_id))
            landed = await asyncio.shield(abort)
            if landed:  # the record was created after all: the commit stands
                self._landed(ranges)
            self._reseek()
            log.warning(
                "%s: write of %d records (%s) failed, staged files deleted: %s: %s",
                ctx.task_id,
                table.num_rows,
                _describe(ranges),
                type(exc).__name__,
                str(exc).splitlines()[0] if str(exc) else "",
            )
            raise
        self._landed(ranges)
        self.commits += 1
        self.rows_written += table.num_rows
        log.info(
            "%s: committed %d records (%s) in %d files, %.2f s (write %.2f s)",
            ctx.task_id,
            table.num_rows,
            _describe(ranges),
            len(files),
            time.monotonic() - began,
            written.get("seconds", 0.0),
        )

    def _landed(self, ranges: Collection[OffsetRange]) -> None:
        for r in ranges:
            self._committed[r.tp] = r.end

    def _reseek(self) -> None:
        """After a failed write, ask to re-read from the committed offsets (what a new
        incarnation does too), so no later batch can leave a gap."""
        self._buffer.clear()
        seeks = {tp: o for tp, o in self._committed.items() if tp in self.context.assignment()}
        if seeks:
            self.context.offset(seeks)


def _tidy(final: str) -> str:
    """``part-<commit>-00000.c000.csv`` → ``part-<commit>-00000.csv``: Spark's per-task file
    counter means nothing once the file has its commit's name."""
    return _SPARK_COUNTER.sub(r"\1.", final)


_SPARK_COUNTER = re.compile(r"(-\d{5})\.c\d{3}\.")


def _describe(ranges: Collection[OffsetRange]) -> str:
    return ", ".join(f"{r.tp}@{r.start}..{r.end}" for r in ranges)
