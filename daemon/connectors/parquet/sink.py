"""ParquetSink: Kafka records into a file table (Parquet, ORC, JSON or CSV) written by Spark,
each Kafka offset exactly once.

How a task keeps exactly-once (DESIGN.md, "Exactly-once into the sink"):

- ``open``: claim the partitions in the table's commit log with this incarnation's epoch
  (``fence``: from then on an older incarnation's commit is refused, even before ours), read the
  offsets committed with the data and seek there.
- ``put``: buffer the batch (Arrow tables, no per-row Python). The task's writer
  (``writer.py``: one write in flight, beside the task's reading) writes what is buffered when
  it is due (``flush.max.records``, ``flush.interval.ms``, or ``flush.linger.ms`` without new
  records): Spark writes the rows into a staging directory of the table, in a killable
  executor; then one commit record with the offset ranges and the epoch is created exclusively
  and the files are moved into place. A commit that does not continue exactly where the last
  one ended, or comes from an older epoch, is refused and its staged files deleted: a zombie
  never lands.
- A failed write (deadline passed and executor killed, executor died, write raised) deletes
  its staged files; the next ``put`` (or ``pre_commit``) raises the executor's (retriable)
  error and asks to re-read from the committed offsets: the runtime retries or restarts the
  task, which reads Kafka again from there. Buffered records are dropped; Kafka still has them.
- ``offsets_skipped`` (retention deleted offsets before they were written, and
  ``errors.offset.out.of.range=earliest`` skips them): writes what is buffered, then records
  the gap as a ``skip`` record of the commit log, fenced like a commit, so the table's history
  says where the missing offsets went; the partition's committed offset moves past the gap.
- ``pre_commit``: returns the offsets durable in the table (the runtime commits those to the
  consumer group for lag tools only); when closing (``context.is_closing``) it first waits
  until everything buffered is written and committed.

Where the commit log runs (``parquet.table``): for a local table (a path or ``file:`` URI) in
the daemon, in threads; for a table on a Hadoop filesystem (``hdfs://``, ``viewfs://``,
``abfs://``, ``s3a://`` …) inside executor jobs, through the executor's JVM: one job per flush
writes, commits and moves the files, so a hung filesystem call is killed at the write deadline.

The connector also answers Connect's offsets API from the table's commit log
(``read_offsets``, ``alter_offsets``, ``reset_offsets``; see docs/connectors.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from daemon import __version__
from daemon.config.problems import Problem
from daemon.connectors.api import (
    ConfigDef,
    ExecutorCall,
    SinkConnector,
    SinkTask,
    SinkTaskContext,
)
from daemon.connectors.parquet.buffer import RecordBuffer
from daemon.connectors.parquet.jobs import raise_for
from daemon.connectors.parquet.place import owner_problems
from daemon.connectors.parquet.settings import (
    CONFIG_DEF,
    ParquetSettings,
    check_config,
    is_hadoop_uri,
    table_location,
    table_path,
    write_timeout,
)
from daemon.connectors.parquet.table import (
    JOBS,
    LOG_JOB_TIMEOUT,
    TableLog,
    log_job_kwargs,
    table_log,
)
from daemon.connectors.parquet.upkeep import LogUpkeep
from daemon.connectors.parquet.write import tidy
from daemon.connectors.parquet.writer import Writer
from daemon.connectors.records import OffsetRange, RecordBatch, TopicPartition
from daemon.errors import ConfigError
from daemon.storage.commitlog import META, CommitLog

__all__ = [
    "CONFIG_DEF",
    "ParquetSettings",
    "ParquetSinkConnector",
    "ParquetSinkTask",
    "__version__",
    "check_config",
    "table_location",
    "table_path",
    "tidy",
    "write_timeout",
]

log = logging.getLogger("connectd.connectors.parquet")


class ParquetSinkConnector(SinkConnector):
    """Writes records into a file table through Spark, exactly once (see the module docs)."""

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[Problem]:
        return check_config(config)

    def check_existing(self, name: str, config: Mapping[str, str]) -> list[Problem]:
        """Another connector owning partitions of these topics in the table's commit log
        (``parquet.place.owner_problems``). Local tables only: a Hadoop table's log is read
        through an executor, and its first fence refuses the second connector instead."""
        location = _table(config)
        if is_hadoop_uri(location):
            return []
        return owner_problems(Path(location), name, config)

    def task_class(self) -> type[SinkTask]:
        return ParquetSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return task_configs(self.config, max_tasks)

    # ---- Connect's offsets API, answered from the table's commit log ----
    #
    # The runtime passes ``run_in_executor`` (``daemon.runtime.offsets``): a table on a Hadoop
    # filesystem is reached only from an executor's JVM. Local tables are read in a thread.

    async def read_offsets(
        self, config: Mapping[str, str], *, run_in_executor: ExecutorCall | None = None
    ) -> dict[TopicPartition, int]:
        """Next offset per partition this connector owns in the table, as committed with the
        table's data ({} if none): another connector's partitions of a shared table are not
        this one's offsets."""
        location, name = _table(config), config.get("name", "")
        if is_hadoop_uri(location):
            result = await _hadoop_job(config, run_in_executor, "read_offsets", connector=name)
            return {TopicPartition(t, p): o for t, p, o in result["offsets"]}

        def read() -> dict[TopicPartition, int]:
            if not (Path(location) / META).is_dir():
                return {}
            with CommitLog(location) as commit_log:
                return commit_log.committed_offsets(commit_log.owned_by(name) if name else None)

        return await asyncio.to_thread(read)

    async def alter_offsets(
        self,
        config: Mapping[str, str],
        offsets: Mapping[TopicPartition, int | None],
        *,
        run_in_executor: ExecutorCall | None = None,
    ) -> None:
        """Set partitions' next offsets in the commit log (``None``: forget the partition; its
        consumer-group offset, or ``auto.offset.reset``, decides where it starts). The
        connector must be stopped; the runtime changes the consumer group's offsets too."""
        bad = {tp: o for tp, o in offsets.items() if o is not None and o < 0}
        if bad:
            raise ConfigError(f"offsets must be ≥ 0 (or null to reset): {bad}")
        location, name = _table(config), config.get("name", "")
        if is_hadoop_uri(location):
            items = [[tp.topic, tp.partition, o] for tp, o in sorted(offsets.items())]
            await _hadoop_job(
                config, run_in_executor, "alter_offsets", connector=name, offsets=items
            )
            return

        def alter() -> None:
            with CommitLog(location) as commit_log:
                commit_log.alter_offsets(offsets, connector=name)

        await asyncio.to_thread(alter)

    async def reset_offsets(
        self, config: Mapping[str, str], *, run_in_executor: ExecutorCall | None = None
    ) -> None:
        """Forget the committed offset of every partition this connector owns (the data stays
        in the table; another connector's partitions of a shared table are untouched)."""
        location, name = _table(config), config.get("name", "")
        if is_hadoop_uri(location):
            await _hadoop_job(config, run_in_executor, "reset_offsets", connector=name)
            return

        def reset() -> None:
            if (Path(location) / META).is_dir():
                with CommitLog(location) as commit_log:
                    commit_log.reset_offsets(connector=name)

        await asyncio.to_thread(reset)


def task_configs(config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
    """One config per task; ``value.fields`` is handed on as the value converter's ``fields``
    option."""
    out = dict(config)
    if out.get("value.fields", "").strip():
        out.setdefault("value.converter.fields", out["value.fields"])
    return [dict(out) for _ in range(max_tasks)]


def _table(config: Mapping[str, str]) -> str:
    if "path" not in config:
        raise ConfigError("path: required setting is missing")
    try:
        return table_location(config["path"])
    except ValueError as e:
        raise ConfigError(f"path: {e}") from None


async def _hadoop_job(
    config: Mapping[str, str], run: ExecutorCall | None, fn: str, **kwargs: Any
) -> Mapping[str, Any]:
    if run is None:
        raise ConfigError(
            f"path: {config['path']} is on a Hadoop filesystem, reached only through an "
            "executor; this runtime passed none to the offsets call"
        )
    settings = ParquetSettings.from_config(config)
    result = await run(
        f"{JOBS}:{fn}", None, timeout=LOG_JOB_TIMEOUT, **log_job_kwargs(settings), **kwargs
    )
    return raise_for(result)


class ParquetSinkTask(SinkTask):
    """One task of a ParquetSink. Subclasses may point ``write_function`` at another executor
    function with ``write_staged``'s signature (tests do, to hang a write on purpose)."""

    write_function: ClassVar[str] = "daemon.connectors.parquet.write:write_staged"

    def crash_after(self) -> str | None:
        """Fault injection for tests (Hadoop tables): a point of the next flush job at which
        its executor SIGKILLs itself (``parquet.jobs.CRASH_POINTS``); ``None`` in production."""
        return None

    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        self.settings = ParquetSettings.from_config(config)
        self.context = context
        self._buffer = RecordBuffer()
        self._committed: dict[TopicPartition, int] = {}
        self._log: TableLog = table_log(self.settings, context, self.write_function)
        await self._log.open()
        self.commits = 0
        self.rows_written = 0
        self._upkeep = LogUpkeep(self._log, context.task_id)
        self._writer = Writer(self._buffer, self.settings.flush_policy, self._flush)
        self._writing = context.start_background(self._writer.run(), "writer")

    async def open(self, partitions: Collection[TopicPartition]) -> None:
        tps = sorted(partitions)
        if not tps:
            return
        ctx = self.context
        # Claim first, then read: whatever was committed before the claim is seen, and no
        # older incarnation can commit after it.
        committed = await self._log.claim(tps)
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
        """Buffer ``batch`` for the writer (``writer.py``); waits only while the buffer is full.
        Raises the failure of a write that failed since the last call."""
        self._raise_failure()
        if self.settings.partition_by and len(batch):
            self._check_partition_columns(batch)
        self._buffer.add(batch, self._writer.continues_after(self._committed))
        self._writer.poke()
        await self._writer.make_room()
        self._raise_failure()

    async def offsets_skipped(self, tp: TopicPartition, start: int, end: int) -> None:
        """Record the gap ``start``..``end - 1`` of ``tp`` in the commit log (a ``skip``
        record): first what is buffered is written, so the skip continues the partition's
        committed offsets exactly."""
        await self._drain()
        # The gap starts where the table's offsets end: the consumer's position may already
        # be past a transaction marker or a compacted batch's end that no record stands for.
        start = min(start, self._committed.get(tp, start))
        reason = (
            f"errors.offset.out.of.range=earliest: offsets {start}..{end - 1} of {tp} were"
            f" deleted from Kafka (retention) before they were written; the log started at {end}"
        )
        await self._log.skip(tp, start, end, reason)
        self._committed[tp] = end
        log.warning(
            "%s: recorded skip of offsets %d..%d of %s in the table's commit log (epoch %d)",
            *(self.context.task_id, start, end - 1, tp, self.context.epoch),
        )

    async def pre_commit(
        self, offsets: Mapping[TopicPartition, int]
    ) -> Mapping[TopicPartition, int]:
        """What is committed in the table; when closing, everything buffered is first."""
        if self.context.is_closing:
            await self._drain()
        self._raise_failure()
        return {tp: self._committed[tp] for tp in offsets if tp in self._committed}

    async def close(self, partitions: Collection[TopicPartition]) -> None:
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
        upkeep = getattr(self, "_upkeep", None)  # None if start failed
        if upkeep is not None:
            await upkeep.stop()
        commit_log = getattr(self, "_log", None)  # None if start failed
        if commit_log is not None:
            await commit_log.close()

    @property
    def committed(self) -> dict[TopicPartition, int]:
        """Next offset per open partition, durable in the table."""
        return dict(self._committed)

    async def quiet(self) -> None:
        """Until no write is in flight or due now; raises a failed write's error. For tests
        and benchmarks that observe the writer (``put`` does not wait for writes)."""
        await self._writer.quiet()
        self._raise_failure()

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

    async def _drain(self) -> None:
        await self._writer.drain()
        self._raise_failure()

    def _raise_failure(self) -> None:
        self._writer.raise_failure(self._committed, self.context)

    async def _flush(self, table: pa.Table, ranges: tuple[OffsetRange, ...]) -> None:
        """Write and commit one batch (the writer's ``WriteBatch``); on any failure, delete the
        staged files and re-raise."""
        ctx, commit_log = self.context, self._log
        commit_id = CommitLog.new_commit_id()
        began = time.monotonic()
        budget = self._upkeep.flush_budget(self.context.is_closing)
        try:
            written = await commit_log.write(
                table, ranges, commit_id, self.crash_after(), clean_up_budget=budget
            )
        except BaseException as exc:
            # The executor (if any) is gone by now: the pool reaps it before raising.
            abort = asyncio.ensure_future(commit_log.abort(commit_id))
            landed = await asyncio.shield(abort)
            if landed:  # the record was created after all: the commit stands
                self._landed(ranges)
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
        self._upkeep.committed(written.clean_up, self.context.is_closing)
        self.rows_written += table.num_rows
        log.info(
            "%s: committed %d records (%s) in %d files, %.2f s (write %.2f s)",
            ctx.task_id,
            table.num_rows,
            _describe(ranges),
            written.files,
            time.monotonic() - began,
            written.write_seconds,
        )

    def _landed(self, ranges: Collection[OffsetRange]) -> None:
        for r in ranges:
            self._committed[r.tp] = r.end


def _describe(ranges: Collection[OffsetRange]) -> str:
    return ", ".join(f"{r.tp}@{r.start}..{r.end}" for r in ranges)


# Their public home is the package (see its ``__init__``).
ParquetSinkConnector.__module__ = ParquetSinkTask.__module__ = "daemon.connectors.parquet"
