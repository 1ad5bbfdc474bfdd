"""A table format as the one table sink task holds it: ``TableFormat`` and the ``TableHandle``
it opens per table. ParquetSink (``parquet.format``: a local table's commit log in the daemon,
a Hadoop table's in executor jobs), DeltaSink and IcebergSink (``tables.jobtables`` with their
jobs) provide one; the task (``tables.task``) never subclasses a format, it holds one.

``TableFormat``'s docstring states what every format guarantees the task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from daemon.connectors.protocols import ExecutorCall, SinkTaskContext
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.connectors.tables.jobs import raise_for
from daemon.connectors.tables.schema import Schema
from daemon.connectors.tables.settings import TableSettings, Target
from daemon.errors import ConfigError

#: Partitions' next offsets to set (``None``: forget the partition).
Offsets = Mapping[TopicPartition, int | None]


@dataclass(frozen=True)
class Claim:
    """What claiming partitions found: their committed next offsets (``None``: nothing
    committed), or, for a probe, ``behind``: the newest epoch of the connector the table has
    seen, at least the incarnation's (nothing was fenced)."""

    offsets: Mapping[TopicPartition, int | None]
    behind: int | None = None


@dataclass(frozen=True)
class OffsetsCall:
    """One call of Connect's offsets API on one table: ``connector``'s partitions in
    ``target``; ``run`` is the runtime's executor call (``None`` without a pool)."""

    target: Target
    connector: str
    run: ExecutorCall | None

    async def job(self, fn: str, why: str, **kwargs: Any) -> Mapping[str, Any]:
        """``fn`` (``"module:function"``) run in an executor with ``kwargs``, its result or
        the error it returned raised (``tables.jobs``); ``ConfigError`` naming ``why`` the
        table needs an executor when the runtime passed none."""
        if self.run is None:
            raise ConfigError(f"{why}; this runtime passed no executor to the offsets call")
        return raise_for(await self.run(fn, None, connector=self.connector, **kwargs))


@dataclass(frozen=True)
class Committed:
    """One commit's outcome, for the log."""

    files: int
    seconds: float  # inside the executor (the write, or the whole commit job)


class TableHandle(Protocol):
    """One table as one task incarnation writes it (``TableFormat.open``). It keeps what the
    format needs between calls (a commit log, transaction versions, the table's schema)."""

    @property
    def target(self) -> Target: ...

    @property
    def schema(self) -> Schema | None:
        """The table's columns as ``[[name, Spark type]]`` (type ``""``: any), for ``reject``
        and ``fitted``; ``None`` while unknown (nothing is judged then)."""
        ...

    async def claim(self, partitions: Sequence[TopicPartition], *, probe: bool) -> Claim:
        """Fence ``partitions`` with the incarnation's epoch and read their committed offsets
        (the first claim also opens the table: rolls a killed commit forward, reads its
        schema). See the module docstring for ``probe``."""
        ...

    async def commit(self, rows: pa.Table, ranges: tuple[OffsetRange, ...]) -> Committed:
        """Write ``rows`` (may be empty) and commit them as covering ``ranges``."""
        ...

    async def read_back(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The committed next offsets of ``partitions`` as the table has them, after a commit
        of this handle raised."""
        ...

    async def skip(self, tp: TopicPartition, start: int, end: int, reason: str) -> None:
        """Record that offsets ``start``..``end - 1`` of ``tp`` were skipped, for ``reason``;
        ``tp``'s committed offset is ``end`` afterwards. Refused like a commit."""
        ...

    async def upkeep(self) -> None:
        """After a commit (not a closing one): the table's upkeep if due (Parquet: the commit
        log's clean-up; Delta, Iceberg: compaction and the like). Never raises."""
        ...

    async def close(self) -> None:
        """Release what the handle holds (threads, open logs); the incarnation ends."""
        ...


class Layout(Protocol):
    """A format's parsed configuration as the task needs it: the settings every table sink
    shares, and which table a topic's records go to."""

    @property
    def table(self) -> TableSettings: ...

    @property
    def template(self) -> str:
        """The configured location (may hold ``${topic}``)."""
        ...

    def target(self, topic: str) -> Target:
        """The table ``topic``'s records go to."""
        ...


class TableFormat(Protocol):
    """A table format: its parsed configuration, its handles for a task, Connect's offsets
    API and the pre-creation check answered from its tables. Held by the one table sink task
    and its connector, never subclassed into them. What a format guarantees, whatever the
    table:

    - A table's own storage is the only source of truth for progress: committed offsets, the
      epochs that wrote them, and which connector owns a partition. Every commit records, with
      its data and atomically, the offsets it covers and the incarnation's epoch.
    - ``claim`` fences: once it returned, no commit of an older epoch of the connector (a zombie)
      can land on those partitions, not even one already in flight; and it refuses partitions
      another connector owns in the table (``PartitionsOwned``) unless that one is in
      ``takeover`` (then this connector continues from its offsets and it can write no more).
      With ``probe`` a table that has seen an epoch of the connector at least as large as the
      incarnation's is fenced by nothing: it says so (``Claim.behind``), the task raises its
      epoch above it (``context.raise_epoch``: the table, not the daemon's state directory, is
      the authority) and claims again.
    - ``commit`` lands all of its rows and offsets or none; a commit that does not continue
      exactly where a partition's offsets are, or comes from a fenced epoch, is refused
      (``OffsetsDiverged``, ``ZombieEpoch``) and leaves the table as it was. Killed at any instant
      it leaves nothing a reader sees. When it raised otherwise (deadline, executor died) it may
      still have landed: ``read_back`` says what the table holds.
    - ``skip`` records, fenced like a commit, that offsets were skipped (with the reason), and
      moves the partition past them.
    - Everything that blocks runs in a thread or an executor job under a deadline. An executor
      job that a cancelled method awaited is killed and reaped before the cancellation ends; a
      thread's step (a local commit log) runs to its end, and leaves the log consistent.
    - ``owners`` and the offsets API answer for the partitions a connector owns, from the same
      storage the claims and commits use.

    Methods of a handle are called by one task, one at a time, from its writer or its callbacks.
    """

    @property
    def settings(self) -> Layout: ...

    def open(self, target: Target, context: SinkTaskContext) -> TableHandle:
        """A handle on ``target`` for the task with ``context`` (no I/O: ``claim`` opens)."""
        ...

    async def read_offsets(self, call: OffsetsCall) -> dict[TopicPartition, int]:
        """The committed next offset of every partition the connector owns in the table."""
        ...

    async def alter_offsets(self, call: OffsetsCall, offsets: Offsets) -> None:
        """Set (``None``: forget) partitions' next offsets; epochs keep their rank."""
        ...

    async def reset_offsets(self, call: OffsetsCall) -> None:
        """Forget every partition's offset the connector owns in the table (rows stay)."""
        ...

    @property
    def location_key(self) -> str:
        """The setting that names the tables (``path``, ``table``), for problems."""
        ...

    def owners(self, target: Target) -> Mapping[TopicPartition, str] | None:
        """Which connector owns each partition of ``target`` (the one that claimed or
        committed it last), read in the daemon without Spark; ``None`` where the daemon
        cannot read the table (the claim refuses a second connector there). For
        ``SinkConnector.check_existing``: in a thread, under a deadline; blocks on files."""
        ...


#: How a sink's task and connector build their format from a configuration.
FormatFactory = Callable[[Mapping[str, str]], TableFormat]
