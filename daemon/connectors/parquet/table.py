"""Where a ParquetSink table's commit log runs: in the daemon for local tables, in executor
jobs for tables on Hadoop filesystems. Both give the table's handle (``parquet.format``) the
same steps, with the same guarantees (``daemon.storage.commitlog``):

- ``claim(partitions, probe)``: the first claim opens the table (rolls incomplete commits
  forward, deletes killed writes' staging dirs, reads the table's columns back:
  ``parquet.columns``); then fence the partitions with the incarnation's epoch and read their
  committed offsets (claim first, so nothing an older incarnation commits later can be
  missed). With ``probe``, a table that has seen an epoch of the connector at least as large
  fences nothing and says so (``Claim.behind``): the task raises its epoch and claims again;
- ``write(table, ranges, commit_id)``: stage, write through Spark in an executor, commit
  exclusively, move into place. Raises if anything failed; then ``abort(commit_id)`` must run
  (the executor is gone by then) and says whether the commit landed after all.
  ``crash_after`` (Hadoop tables; fault tests only) SIGKILLs the executor at that point of
  the flush job (``parquet.jobs.CRASH_POINTS``);
- ``skip(tp, start, end, reason)``: record that offsets ``start``..``end - 1`` of ``tp`` were
  skipped (deleted from Kafka before they were written: ``errors.offset.out.of.range``), as a
  ``skip`` record of the commit log, fenced by the epoch like a commit; the partition's
  committed offset becomes ``end``.

``LocalTable`` keeps the commit log in the daemon (``asyncio.to_thread``; the executor only
writes the staging dir). ``HadoopTable`` runs every step as an executor job (see
``daemon.connectors.parquet.jobs``): one job per flush does the write and the commit, so a
hung filesystem call is killed at the write deadline like a hung write.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from daemon.connectors.api import SinkTaskContext
from daemon.connectors.parquet.columns import read_local, table_columns
from daemon.connectors.parquet.settings import ParquetSettings
from daemon.connectors.parquet.write import WRITE_STAGED, spark_writes, tidy
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.connectors.tables.format import Claim
from daemon.connectors.tables.jobs import raise_for
from daemon.storage.commitlog import CleanUp, CommitLog, DataFile

log = logging.getLogger("connectd.connectors.parquet")

JOBS = "daemon.connectors.parquet.jobs"
#: Deadline of the small commit-log jobs (open, fence and read, abort, offsets).
LOG_JOB_TIMEOUT = 120.0


@dataclass(frozen=True)
class Written:
    files: int
    write_seconds: float
    #: A Hadoop table's clean-up run in the same job (``clean_up_budget``), or why it failed.
    clean_up: CleanUp | str | None = None


class TableLog(Protocol):
    kind: str
    #: The table's columns as its files say, read by the first claim (``parquet.columns``).
    columns: list[list[str]] | None

    async def claim(self, partitions: Sequence[TopicPartition], *, probe: bool) -> Claim: ...

    async def write(
        self,
        table: pa.Table,
        ranges: Collection[OffsetRange],
        commit_id: str,
        crash_after: str | None = None,
        clean_up_budget: float = 0.0,
    ) -> Written:
        """Write and commit; ``clean_up_budget`` (Hadoop tables): then clean the log up in the
        same executor job for at most that long (a local table cleans up in a thread)."""
        ...

    async def abort(self, commit_id: str) -> bool: ...

    async def skip(self, tp: TopicPartition, start: int, end: int, reason: str) -> None: ...

    async def clean_up(self, budget: float) -> CleanUp:
        """Delete commit records no opener needs (``CommitLog.clean_up``), off the event loop,
        stopping after ``budget`` seconds."""
        ...

    async def close(self) -> None: ...


def table_log(
    location: str, settings: ParquetSettings, ctx: SinkTaskContext, write_function: str
) -> TableLog:
    """The commit log site of the table at ``location``."""
    if settings.hadoop:
        return HadoopTable(location, settings, ctx, write_function)
    return LocalTable(location, settings, ctx, write_function)


def log_job_kwargs(settings: ParquetSettings, location: str) -> dict[str, Any]:
    """Where a Hadoop table's commit-log jobs find the table, and how its log is kept (the
    executor caches one ``CommitLog`` per table and settings: ``parquet.jobs.commit_log``)."""
    table = {
        "path": location,
        "stale_after": settings.staging_lease,
        "checkpoint_interval": settings.checkpoint_interval,
        "retention_ms": settings.retention_ms,
    }
    return {"table": table}


def _write_kwargs(settings: ParquetSettings) -> dict[str, Any]:
    return {
        "format": settings.format,
        "partition_by": list(settings.table.partition_by),
        "compression": settings.compression,
        "engine": settings.engine,
    }


def _claimed(partitions: Sequence[TopicPartition], offsets: Mapping[TopicPartition, int]) -> Claim:
    return Claim({tp: offsets.get(tp) for tp in partitions})


class LocalTable:
    """The commit log in the daemon process; the executor writes the staging dir only."""

    kind = "local"

    def __init__(
        self, location: str, settings: ParquetSettings, ctx: SinkTaskContext, write_function: str
    ):
        self.settings, self.ctx, self.write_function = settings, ctx, write_function
        self.log = CommitLog(
            location,
            checkpoint_interval=settings.checkpoint_interval,
            retention_ms=settings.retention_ms,
        )
        self.columns: list[list[str]] | None = None
        self._opened = False

    def _open(self) -> None:
        self.log.open()
        self._opened = True
        self.columns = table_columns(self.log, read_local(self.settings.format))

    async def claim(self, partitions: Sequence[TopicPartition], *, probe: bool) -> Claim:
        ctx, log = self.ctx, self.log
        if not self._opened:
            await asyncio.to_thread(self._open)
        connector = ctx.task_id.connector
        if probe:
            # Only these partitions matter: a sibling task's newer epoch on its own
            # partitions does not make this one a zombie.
            last = await asyncio.to_thread(
                lambda: max((log.last_epoch(connector, tp) for tp in partitions), default=0)
            )
            if last >= ctx.epoch:
                return Claim({}, behind=last)
        await asyncio.to_thread(
            functools.partial(
                log.fence,
                connector,
                ctx.task_id.task,
                ctx.epoch,
                partitions,
                takeover=self.settings.table.takeover,
            )
        )
        return _claimed(partitions, await asyncio.to_thread(log.committed_offsets, partitions))

    async def write(
        self,
        table: pa.Table,
        ranges: Collection[OffsetRange],
        commit_id: str,
        crash_after: str | None = None,  # Hadoop tables only
        clean_up_budget: float = 0.0,  # Hadoop tables only
    ) -> Written:
        ctx, commit_log = self.ctx, self.log
        files: list[DataFile] = []
        written: Mapping[str, Any] = {}
        if table.num_rows:
            stage = await asyncio.to_thread(commit_log.stage, commit_id)
            written = await ctx.run_in_executor(
                self.write_function,
                table,
                timeout=self.settings.table.write_timeout,
                spark=self._needs_spark(table, stage),
                path=stage,
                **_write_kwargs(self.settings),
            )
            staged = await asyncio.to_thread(commit_log.staged_files, commit_id)
            files = [DataFile(f.staged, tidy(f.final)) for f in staged]
        await asyncio.to_thread(
            commit_log.commit,
            ctx.task_id.connector,
            ctx.task_id.task,
            ctx.epoch,
            ranges,
            files,
            commit_id=commit_id,
        )
        return Written(len(files), float(written.get("seconds", 0.0)))

    def _needs_spark(self, table: pa.Table, stage: str) -> bool:
        """Whether this write needs the executor's SparkSession: False when ``write_staged``
        writes these rows with pyarrow, so an executor without Spark may take it
        (``executor.spark.session=on-demand``)."""
        if self.write_function != WRITE_STAGED:
            return True  # a test's write function: it may use its session
        settings = self.settings
        return spark_writes(
            settings.engine,
            table.schema,
            settings.format,
            settings.table.partition_by,
            settings.compression,
            stage,
        )

    async def abort(self, commit_id: str) -> bool:
        return await asyncio.to_thread(self.log.abort, commit_id)

    async def skip(self, tp: TopicPartition, start: int, end: int, reason: str) -> None:
        ctx = self.ctx
        await asyncio.to_thread(
            functools.partial(
                self.log.skip,
                ctx.task_id.connector,
                ctx.task_id.task,
                ctx.epoch,
                tp,
                start,
                end,
                reason=reason,
            )
        )

    async def clean_up(self, budget: float) -> CleanUp:
        deadline = time.monotonic() + budget
        return await asyncio.to_thread(functools.partial(self.log.clean_up, deadline=deadline))

    async def close(self) -> None:
        await asyncio.to_thread(self.log.close)


class HadoopTable:
    """The commit log in executor jobs (the table is on a Hadoop filesystem)."""

    kind = "hadoop"

    def __init__(
        self, location: str, settings: ParquetSettings, ctx: SinkTaskContext, write_function: str
    ):
        self.settings, self.ctx, self.write_function = settings, ctx, write_function
        self.location = location
        self.columns: list[list[str]] | None = None
        self._opened = False
        self._where = log_job_kwargs(settings, location)

    async def _job(self, fn: str, batch: pa.Table | None = None, **kwargs: Any) -> Any:
        timeout = kwargs.pop("timeout", LOG_JOB_TIMEOUT)
        result = await self.ctx.run_in_executor(
            f"{JOBS}:{fn}", batch, timeout=timeout, **self._where, **kwargs
        )
        return raise_for(result)

    async def claim(self, partitions: Sequence[TopicPartition], *, probe: bool) -> Claim:
        ctx = self.ctx
        first = not self._opened
        result = await self._job(
            "open_table",
            epoch=ctx.epoch,
            unless_behind=probe,
            connector=ctx.task_id.connector,
            task=ctx.task_id.task,
            partitions=[[tp.topic, tp.partition] for tp in partitions],
            takeover=list(self.settings.table.takeover),
            recover=first,  # the first claim opens the table, as a local one's does
            format=self.settings.format if first else "",
        )
        if "behind" in result:  # nothing fenced, no columns read: the next claim does it
            return Claim({}, behind=int(result["behind"]))
        if first:
            log.info("%s: table %s on %s", ctx.task_id, self.location, result.get("fs"))
            self.columns = result.get("columns")
            self._opened = True
        return _claimed(partitions, {TopicPartition(t, p): o for t, p, o in result["offsets"]})

    async def write(
        self,
        table: pa.Table,
        ranges: Collection[OffsetRange],
        commit_id: str,
        crash_after: str | None = None,
        clean_up_budget: float = 0.0,
    ) -> Written:
        ctx = self.ctx
        result = await self._job(
            "flush",
            table if table.num_rows else None,
            timeout=self.settings.table.write_timeout,
            commit_id=commit_id,
            connector=ctx.task_id.connector,
            task=ctx.task_id.task,
            epoch=ctx.epoch,
            ranges=[[r.topic, r.partition, r.start, r.end] for r in ranges],
            write_function=self.write_function,
            write_kwargs=_write_kwargs(self.settings),
            crash_after=crash_after,
            clean_up_budget=clean_up_budget,
        )
        cleaned: CleanUp | str | None = result.get("clean_up_error")
        if "clean_up" in result:
            cleaned = CleanUp(**result["clean_up"])
        return Written(int(result["files"]), float(result["write_seconds"]), cleaned)

    async def abort(self, commit_id: str) -> bool:
        try:
            result = await self._job("abort", commit_id=commit_id)
        except Exception as exc:  # the lease cleans the staging dir up later
            log.warning("%s: abort of commit %s failed: %s", self.ctx.task_id, commit_id, exc)
            return False
        return bool(result["landed"])

    async def skip(self, tp: TopicPartition, start: int, end: int, reason: str) -> None:
        ctx = self.ctx
        await self._job(
            "skip_offsets",
            connector=ctx.task_id.connector,
            task=ctx.task_id.task,
            epoch=ctx.epoch,
            partition=[tp.topic, tp.partition],
            start=start,
            end=end,
            reason=reason,
        )

    async def clean_up(self, budget: float) -> CleanUp:
        result = await self._job("clean_up", budget=budget, timeout=budget + LOG_JOB_TIMEOUT)
        return CleanUp(**result["report"])

    async def close(self) -> None:
        return None  # nothing held in the daemon; the executors' cached logs hold no guards
