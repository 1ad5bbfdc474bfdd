"""A ``TableFormat`` whose every read and commit is an executor job of one interface: DeltaSink
(``delta.jobs``) and IcebergSink (``iceberg.jobs``). A format names its jobs module, the
executor session's table format and how the daemon reads its tables' owners (``JobKind``).

The jobs (each takes the table's location as the target's kwargs, returns errors with a
meaning through ``tables.jobs.job``):

- ``open_table(connector, task, epoch, partitions, takeover)``: fence and read back:
  ``{"newest_epoch", "state", "offsets": [[topic, partition, offset]], "schema"}``, without
  ``state`` (nothing fenced) when a newer epoch holds a partition; ``PartitionsOwned`` when
  another connector, not in ``takeover``, owns one;
- ``commit(connector, task, epoch, ranges, state, partition_by, merge_schema, reason)``: one
  atomic commit: ``{"state", "files", "seconds", "schema"}``; ``state`` is the format's opaque
  per-partition state (Delta: transaction versions), which the table refuses if anything
  committed those partitions since. With ``reason``, a skip: no rows, and the commit's
  metadata records the ranges as skipped and why;
- ``read_offsets(connector)``, ``alter_offsets(connector, offsets, reset)``;
- ``upkeep(min_files, small_bytes)``: compaction and the like, killable at any instant.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from daemon.connectors.protocols import SinkTaskContext
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.connectors.tables.format import Claim, Committed, Layout, Offsets, OffsetsCall
from daemon.connectors.tables.jobs import offsets_in, offsets_out, raise_for
from daemon.connectors.tables.settings import Compaction, Target
from daemon.storage.logstate import ZombieEpoch

log = logging.getLogger("connectd.connectors.tables")

#: Deadline of an offsets job (reading a table's history can take a while on a big table).
OFFSETS_TIMEOUT = 120.0


class JobSettings(Layout, Protocol):
    """A job format's parsed configuration."""

    @property
    def compaction(self) -> Compaction: ...


@dataclass(frozen=True)
class JobKind:
    """What tells one job format from another."""

    format: str  # the executor session's table format (``daemon.executor.formats``)
    jobs: str  # the module of its executor jobs
    key: str  # the setting naming the table, for check_existing's problems
    #: The owners of a table's partitions read without Spark (``TableFormat.owners``).
    owners: Callable[[Target], Mapping[TopicPartition, str] | None]


class JobFormat:
    """A format reached through executor jobs (module docstring)."""

    def __init__(self, kind: JobKind, settings: JobSettings) -> None:
        self.kind = kind
        self.settings = settings

    def open(self, target: Target, context: SinkTaskContext) -> JobTable:
        return JobTable(self, target, context)

    async def read_offsets(self, call: OffsetsCall) -> dict[TopicPartition, int]:
        return offsets_in((await self._call(call, "read_offsets"))["offsets"])

    async def alter_offsets(self, call: OffsetsCall, offsets: Offsets) -> None:
        await self._call(call, "alter_offsets", offsets=offsets_out(offsets))

    async def reset_offsets(self, call: OffsetsCall) -> None:
        await self._call(call, "alter_offsets", offsets=[], reset=True)

    @property
    def location_key(self) -> str:
        return self.kind.key

    def owners(self, target: Target) -> Mapping[TopicPartition, str] | None:
        return self.kind.owners(target)

    async def _call(self, call: OffsetsCall, fn: str, **kwargs: Any) -> Mapping[str, Any]:
        return await call.job(
            f"{self.kind.jobs}:{fn}",
            f"{self.kind.format} tables are read through an executor",
            timeout=OFFSETS_TIMEOUT,
            formats=(self.kind.format,),
            **call.target.kwargs,
            **kwargs,
        )


class JobTable:
    """One table of a job format as one task incarnation writes it: the format's state of its
    partitions (travels with each commit), its schema, when it was last kept up."""

    def __init__(self, fmt: JobFormat, target: Target, context: SinkTaskContext) -> None:
        self._format, self.target, self._context = fmt, target, context
        self._state: dict[str, Any] = {}
        self.schema: list[list[str]] | None = None
        self._last_upkeep = time.monotonic()

    async def _job(
        self, fn: str, batch: pa.Table | None = None, **kwargs: Any
    ) -> Mapping[str, Any]:
        ctx = self._context
        result = await ctx.run_in_executor(
            f"{self._format.kind.jobs}:{fn}",
            batch,
            timeout=self._format.settings.table.write_timeout,
            formats=(self._format.kind.format,),
            **self.target.kwargs,
            **kwargs,
        )
        return raise_for(result)

    async def claim(self, partitions: Sequence[TopicPartition], *, probe: bool) -> Claim:
        ctx = self._context
        result = await self._job(
            "open_table",
            connector=ctx.task_id.connector,
            task=ctx.task_id.task,
            epoch=ctx.epoch,
            partitions=[[tp.topic, tp.partition] for tp in partitions],
            takeover=list(self._format.settings.table.takeover),
        )
        newest = int(result["newest_epoch"])
        if probe and newest >= ctx.epoch:
            return Claim({}, behind=newest)
        if "state" not in result:  # a newer epoch holds one of the partitions
            raise ZombieEpoch(
                f"task {ctx.task_id}: a newer incarnation (epoch {newest}) owns partitions of "
                f"{self.target.name}; this one has epoch {ctx.epoch}"
            )
        self._state.update(result["state"])
        self.schema = result["schema"]
        return Claim(
            {TopicPartition(str(t), int(p)): o for t, p, o in result["offsets"]},
        )

    async def commit(self, rows: pa.Table, ranges: tuple[OffsetRange, ...]) -> Committed:
        result = await self._commit(rows if rows.num_rows else None, ranges)
        return Committed(int(result.get("files", 0)), float(result.get("seconds", 0.0)))

    async def _commit(
        self, rows: pa.Table | None, ranges: tuple[OffsetRange, ...], reason: str = ""
    ) -> Mapping[str, Any]:
        ctx, settings = self._context, self._format.settings.table
        result = await self._job(
            "commit",
            rows,
            connector=ctx.task_id.connector,
            task=ctx.task_id.task,
            epoch=ctx.epoch,
            ranges=[[r.topic, r.partition, r.start, r.end] for r in ranges],
            state=dict(self._state),
            partition_by=list(settings.partition_by),
            merge_schema=settings.merge_schema,
            reason=reason,
            # Only Delta's tables declare them (Iceberg's transforms are hidden: none).
            **({"generated": settings.generated} if settings.generated else {}),
        )
        self._state.update(result["state"])
        if result.get("schema") is not None:
            self.schema = result["schema"]
        return result

    async def read_back(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        # This incarnation's fence holds them already: claiming again reads, fences nothing.
        return dict((await self.claim(partitions, probe=False)).offsets)

    async def skip(self, tp: TopicPartition, start: int, end: int, reason: str) -> None:
        await self._commit(None, (OffsetRange(tp.topic, tp.partition, start, end),), reason)

    async def upkeep(self) -> None:
        compaction = self._format.settings.compaction
        if compaction.min_files <= 0:
            return
        if time.monotonic() - self._last_upkeep < compaction.interval:
            return
        self._last_upkeep = time.monotonic()
        ctx = self._context
        try:
            result = await self._job(
                "upkeep", min_files=compaction.min_files, small_bytes=compaction.small_bytes
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning(
                "%s: upkeep of %s failed (the table is as it was): %s",
                *(ctx.task_id, self.target.name, exc),
            )
            return
        if result.get("compacted"):
            log.info(
                "%s: compacted %d partition(s) of %s: %d -> %d files, %.2f s",
                *(ctx.task_id, result["compacted"], self.target.name),
                *(result["files_before"], result["files_after"], result["seconds"]),
            )

    async def close(self) -> None:
        return None  # nothing held in the daemon
