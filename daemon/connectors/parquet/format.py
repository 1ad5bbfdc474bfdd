"""ParquetSink's table format: file tables (Parquet, ORC, JSON, CSV) whose commit log keeps each
Kafka offset exactly once (``daemon.storage.commitlog``), held by the one table sink task.

How a table keeps exactly-once (DESIGN.md, "Exactly-once into the sink"):

- ``claim``: fence the partitions in the table's commit log with the incarnation's epoch (from
  then on an older incarnation's commit is refused, even one in flight), read the offsets
  committed with the data, and the table's columns (``parquet.columns``);
- ``commit``: Spark writes the rows into a staging directory of the table, in a killable
  executor; then one commit record with the offset ranges and the epoch is created
  exclusively and the files move into place. A commit that does not continue exactly where
  the last one ended, or comes from an older epoch, is refused and its staged files deleted:
  a zombie never lands. A failed write (deadline passed and executor killed, executor died,
  write raised) deletes its staged files; a record created before the failure finishes the
  commit instead (``abort`` says which): the handle knows what the table holds;
- ``skip``: a ``skip`` record, fenced like a commit, so the table's history says where the
  missing offsets went;
- ``upkeep``: the commit log's clean-up (``parquet.upkeep``).

Where the commit log runs (``parquet.table``): for a local table (a path or ``file:`` URI) in
the daemon, in threads; for a table on a Hadoop filesystem (``hdfs://``, ``viewfs://``,
``abfs://``, ``s3a://`` …) inside executor jobs, through the executor's JVM: one job per flush
writes, commits and moves the files, so a hung filesystem call is killed at the write deadline.
The offsets API reads and writes the same logs (an ``offsets`` record; epochs are kept).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from daemon.connectors.parquet.place import table_owners
from daemon.connectors.parquet.settings import TYPED, ParquetSettings
from daemon.connectors.parquet.table import (
    JOBS,
    LOG_JOB_TIMEOUT,
    TableLog,
    log_job_kwargs,
    table_log,
)
from daemon.connectors.parquet.upkeep import LogUpkeep
from daemon.connectors.parquet.write import WRITE_STAGED
from daemon.connectors.protocols import SinkTaskContext
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.connectors.tables.format import Claim, Committed, Offsets, OffsetsCall
from daemon.connectors.tables.jobs import offsets_in, offsets_out
from daemon.connectors.tables.schema import merged
from daemon.connectors.tables.settings import Target
from daemon.storage.commitlog import META, CleanUp, CommitLog


class ParquetFormat:
    """ParquetSink's ``TableFormat``. ``write_function`` (an executor function with
    ``write_staged``'s signature) and ``crash_after`` (a point of the next flush job of a
    Hadoop table at which its executor SIGKILLs itself, ``parquet.jobs.CRASH_POINTS``) are
    tests' hooks: a test task passes its own."""

    def __init__(
        self,
        config: Mapping[str, str],
        *,
        write_function: str = WRITE_STAGED,
        crash_after: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.settings = ParquetSettings.from_config(config)
        self.write_function = write_function
        self.crash_after = crash_after

    def open(self, target: Target, context: SinkTaskContext) -> ParquetTable:
        return ParquetTable(self, target, context)

    # ---- Connect's offsets API, answered from the commit logs ----

    async def read_offsets(self, call: OffsetsCall) -> dict[TopicPartition, int]:
        if self.settings.hadoop:
            return offsets_in((await self._job(call, "read_offsets"))["offsets"])

        def read() -> dict[TopicPartition, int]:
            if not (Path(call.target.name) / META).is_dir():
                return {}
            with CommitLog(call.target.name) as log:
                owned = log.owned_by(call.connector) if call.connector else None
                return log.committed_offsets(owned)

        return await asyncio.to_thread(read)

    async def alter_offsets(self, call: OffsetsCall, offsets: Offsets) -> None:
        if self.settings.hadoop:
            await self._job(call, "alter_offsets", offsets=offsets_out(offsets))
            return

        def alter() -> None:
            with CommitLog(call.target.name) as log:
                log.alter_offsets(offsets, connector=call.connector)

        await asyncio.to_thread(alter)

    async def reset_offsets(self, call: OffsetsCall) -> None:
        if self.settings.hadoop:
            await self._job(call, "reset_offsets")
            return

        def reset() -> None:
            if (Path(call.target.name) / META).is_dir():
                with CommitLog(call.target.name) as log:
                    log.reset_offsets(connector=call.connector)

        await asyncio.to_thread(reset)

    location_key = "path"

    def owners(self, target: Target) -> Mapping[TopicPartition, str] | None:
        """Local tables only: a Hadoop table's log is read through an executor, and its first
        claim refuses the second connector instead."""
        return None if self.settings.hadoop else table_owners(Path(target.name))

    async def _job(self, call: OffsetsCall, fn: str, **kwargs: Any) -> Mapping[str, Any]:
        return await call.job(
            f"{JOBS}:{fn}",
            f"path: {call.target.name} is on a Hadoop filesystem, reached only through an executor",
            timeout=LOG_JOB_TIMEOUT,
            **log_job_kwargs(self.settings, call.target.name),
            **kwargs,
        )


class ParquetTable:
    """One ParquetSink table as one task incarnation writes it: its commit log's site, the
    clean-up schedule, what the table has committed for the task's partitions, its columns."""

    def __init__(self, fmt: ParquetFormat, target: Target, context: SinkTaskContext) -> None:
        self._format, self.target, self._context = fmt, target, context
        self._log: TableLog = table_log(target.name, fmt.settings, context, fmt.write_function)
        self._upkeep = LogUpkeep(self._log, context.task_id, fmt.settings.cleanup_interval)
        self._offsets: dict[TopicPartition, int | None] = {}
        self.schema: list[list[str]] | None = None
        self._cleaned: CleanUp | str | None = None  # the last flush job's clean-up (Hadoop)

    async def claim(self, partitions: Sequence[TopicPartition], *, probe: bool) -> Claim:
        claim = await self._log.claim(partitions, probe=probe)
        self._offsets.update(claim.offsets)
        if self.schema is None and self._format.settings.format in TYPED:
            self.schema = self._log.columns
        return claim

    async def commit(self, rows: pa.Table, ranges: tuple[OffsetRange, ...]) -> Committed:
        log, closing = self._log, self._context.is_closing
        commit_id = CommitLog.new_commit_id()
        budget = self._upkeep.flush_budget(closing)
        try:
            written = await log.write(
                rows, ranges, commit_id, self._format.crash_after(), clean_up_budget=budget
            )
        except BaseException:
            # The executor (if any) is gone by now: the pool reaps it before raising. The
            # abort runs to its end even when the write was cancelled: no staged files stay.
            if await asyncio.shield(asyncio.ensure_future(log.abort(commit_id))):
                self._landed(rows, ranges)  # the record was created after all: it stands
            raise
        self._landed(rows, ranges)
        self._cleaned = written.clean_up
        return Committed(written.files, written.write_seconds)

    def _landed(self, rows: pa.Table, ranges: tuple[OffsetRange, ...]) -> None:
        for r in ranges:
            self._offsets[r.tp] = r.end
        if rows.num_rows and self._format.settings.format in TYPED:
            parts = self._format.settings.table.partition_by
            schema = merged(self.schema, rows.drop_columns(list(parts)))
            self.schema = schema + [[c, ""] for c in parts if c not in {n for n, _ in schema}]

    async def read_back(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        # This incarnation's fence holds them, and the abort said whether the failed commit
        # landed: nothing else can have moved them.
        return {tp: self._offsets.get(tp) for tp in partitions}

    async def skip(self, tp: TopicPartition, start: int, end: int, reason: str) -> None:
        await self._log.skip(tp, start, end, reason)
        self._offsets[tp] = end

    async def upkeep(self) -> None:
        cleaned, self._cleaned = self._cleaned, None
        self._upkeep.committed(cleaned, closing=False)

    async def close(self) -> None:
        await self._upkeep.stop()
        await self._log.close()
