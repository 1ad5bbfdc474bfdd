"""ParquetSink's executor jobs for tables on Hadoop filesystems (``hdfs://``, ``viewfs://`` …).

The commit log of such a table is read and written through the executor's JVM
(``daemon.storage.hadoopfs``), so every step runs here, inside executor jobs the task calls by
name (``context.run_in_executor``), each under a deadline: a hung filesystem call is killed with
its executor like a hung write.

- ``flush``: one job per commit: stage, write (Spark), list the staged files, create the
  commit record exclusively, move the files into place. If anything fails inside the job, the
  staged files are deleted (or the commit finished, if its record was created) before it
  returns. If the executor is killed, the task runs ``abort`` in another executor.
- ``flush`` with ``clean_up_budget``: after the commit landed, the commit log's clean-up
  (``CommitLog.clean_up``, no listing of the log) in the same job, for at most that many
  seconds; the task asks for it once a minute. In the flush, not a job of its own: a job runs
  under the task's id and holds its one write slot either way, and this way it never delays a
  closing flush (which does not ask) nor waits for a free executor. ``clean_up`` alone
  exists for operators and tests.
- ``open_table`` (at partition assignment: roll killed commits forward the first time, fence,
  read the committed offsets and the table's columns, ``parquet.columns``), ``abort``,
  ``skip_offsets`` (a gap left by retention, ``errors.offset.out.of.range=earliest``), and
  the connector's offsets jobs (``read_offsets``, ``alter_offsets``, ``reset_offsets``).

Every job takes its table as ``table``: ``path``, the staging lease (``stale_after``) and the
connector's ``commit.log.*`` settings (``checkpoint_interval``, ``retention_ms``). An opened
``CommitLog`` is cached per table and settings in the executor process; it re-reads
the log before every decision, so another executor's commits are always seen (the filesystem
is the truth). Errors with a meaning (``CommitRejected``, ``StorageCorrupt``, ``ConfigError`` …) are
returned as ``{"error": [class name, message]}`` rather than raised (``tables.jobs``).

Imports only the standard library and ``daemon`` modules that do at import time.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import signal
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from daemon import errors
from daemon.connectors.parquet.columns import read_with_spark, table_columns
from daemon.connectors.records import OffsetRange, TopicPartition
from daemon.connectors.tables.jobs import job, offsets_out
from daemon.storage.commitlog import CommitLog, DataFile

#: A table as every job takes it: ``path``, ``stale_after``, ``checkpoint_interval`` and
#: ``retention_ms`` (``parquet.table.log_job_kwargs``).
LogTable = Mapping[str, Any]
_LOGS: dict[tuple[str, float, int, int], CommitLog] = {}
#: ``commit.log.checkpoint.interval`` and ``commit.log.retention.ms`` when a caller passes none.
INTERVAL, RETENTION_MS = 100, 7 * 24 * 3600 * 1000
_GUARD = threading.Lock()

#: Points at which ``flush(crash_after=...)`` SIGKILLs its own executor, for fault tests:
#: after the staged write, or after the commit record was created (files not moved yet).
CRASH_POINTS = ("write", "publish")


def commit_log(spark: Any, table: LogTable) -> CommitLog:
    """The opened commit log of ``table`` (``path``, the staging lease ``stale_after``, and
    the connector's ``commit.log.*`` settings as ``checkpoint_interval`` and
    ``retention_ms``, which decide when it checkpoints and what its clean-up keeps), cached
    in this process per those."""
    from daemon.storage.hadoopfs import HadoopFs

    path, stale_after = str(table["path"]), float(table["stale_after"])
    checkpoint_interval = int(table.get("checkpoint_interval", INTERVAL))
    retention_ms = int(table.get("retention_ms", RETENTION_MS))
    if spark is None:
        raise errors.ConfigError(
            f"path: {path} is a Hadoop filesystem URI; its commit log needs executors with "
            "Spark (executor.spark.enabled)"
        )
    key = (path, stale_after, checkpoint_interval, retention_ms)
    with _GUARD:
        log = _LOGS.get(key)
        if log is None:
            fs = HadoopFs(spark, path, stale_after=stale_after)
            log = CommitLog(
                path,
                fs=fs,
                stale_after=stale_after,
                checkpoint_interval=checkpoint_interval,
                retention_ms=retention_ms,
            ).open()
            _LOGS[key] = log
        return log


def _tps(items: Iterable[Sequence[Any]]) -> list[TopicPartition]:
    return [TopicPartition(str(t), int(p)) for t, p in items]


def open_table(
    spark: Any,
    batch: Any,
    table: LogTable,
    *,
    connector: str = "",
    task: int = 0,
    epoch: int = 0,
    partitions: Sequence[Sequence[Any]] = (),
    unless_behind: bool = False,
    takeover: Sequence[str] = (),
    recover: bool = False,
    format: str = "",
) -> dict[str, Any]:
    """Open: with ``recover`` (or without ``partitions``) roll killed commits forward and
    clean up; with ``partitions``, fence them with ``epoch`` and return their committed
    offsets as ``{"offsets": [[topic, partition, offset], ...]}``, and, with ``format``, the
    table's columns as ``"columns"`` (``parquet.columns``).

    ``unless_behind``: if the table has seen an epoch of ``connector`` at least ``epoch``
    (a lost state directory), fence nothing and return ``{"behind": that epoch}``; the task
    raises its epoch above it and asks again."""

    def run() -> dict[str, Any]:
        log = commit_log(spark, table)
        tps = _tps(partitions)
        if recover or not tps:
            log.recover()
        if not tps:
            return {"offsets": [], "fs": log.fs.kind}
        if unless_behind:
            last = max((log.last_epoch(connector, tp) for tp in tps), default=0)
            if last >= epoch:
                return {"behind": last, "fs": log.fs.kind}
        log.fence(connector, task, epoch, tps, takeover=tuple(takeover))
        result: dict[str, Any] = {
            "offsets": offsets_out(log.committed_offsets(tps)),
            "fs": log.fs.kind,
        }
        if format:
            result["columns"] = table_columns(log, read_with_spark(spark, format))
        return result

    return job(run)


def _resolve(ref: str) -> Any:
    module, _, name = ref.partition(":")
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    return target


def flush(
    spark: Any,
    batch: Any,
    table: LogTable,
    *,
    ranges: Sequence[Sequence[Any]],
    commit_id: str,
    connector: str,
    task: int,
    epoch: int,
    write_function: str = "daemon.connectors.parquet.write:write_staged",
    write_kwargs: Mapping[str, Any] | None = None,
    crash_after: str | None = None,
    clean_up_budget: float = 0.0,
) -> dict[str, Any]:
    """Write ``batch`` and commit it as covering ``ranges`` ([topic, partition, start, end]),
    in this job. ``{"files": n, "seconds": s, "write_seconds": w}``, or ``{"error": ...}``
    after the staged files were deleted. ``crash_after``: see ``CRASH_POINTS``. With
    ``clean_up_budget`` > 0, then the log's clean-up for at most that long: its report as
    ``"clean_up"`` (or its error as ``"clean_up_error"``: the commit stands either way)."""
    from daemon.connectors.parquet.write import tidy

    began = time.monotonic()
    offsets = [OffsetRange(str(t), int(p), int(s), int(e)) for t, p, s, e in ranges]

    def run() -> dict[str, Any]:
        log = commit_log(spark, table)
        files: list[DataFile] = []
        written: dict[str, Any] = {}
        try:
            if batch is not None and batch.num_rows:
                stage = log.stage(commit_id)
                written = _resolve(write_function)(
                    spark, batch, path=stage, **dict(write_kwargs or {})
                )
                files = [DataFile(f.staged, tidy(f.final)) for f in log.staged_files(commit_id)]
            if crash_after == "write":
                _die()
            if crash_after == "publish":
                log._apply = lambda record: _die()  # type: ignore[method-assign]
            log.commit(connector, task, epoch, offsets, files, commit_id=commit_id)
        except BaseException:
            log.abort(commit_id)
            raise
        result: dict[str, Any] = {
            "files": len(files),
            "seconds": time.monotonic() - began,
            "write_seconds": float(written.get("seconds", 0.0)),
        }
        if clean_up_budget > 0:
            try:
                deadline = time.monotonic() + clean_up_budget
                report = log.clean_up(deadline=deadline, sweep_temps=False)
                result["clean_up"] = dataclasses.asdict(report)
            except Exception as exc:  # the log stays correct; the next one goes on
                result["clean_up_error"] = f"{type(exc).__name__}: {exc}"
        return result

    return job(run)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def abort(
    spark: Any,
    batch: Any,
    table: LogTable,
    *,
    commit_id: str,
) -> dict[str, Any]:
    """Give up ``commit_id`` after its executor died: ``{"landed": True}`` if its record was
    created after all (the commit was finished), else its staged files are deleted."""
    log = functools.partial(commit_log, spark, table)
    return job(lambda: {"landed": log().abort(commit_id)})


def skip_offsets(
    spark: Any,
    batch: Any,
    table: LogTable,
    *,
    connector: str,
    task: int,
    epoch: int,
    partition: Sequence[Any],
    start: int,
    end: int,
    reason: str,
) -> dict[str, Any]:
    """Record that offsets ``start``..``end - 1`` of ``partition`` ([topic, partition]) were
    skipped (``CommitLog.skip``): ``{"seq": n}``, the skip record's sequence number."""
    (tp,) = _tps([partition])

    def run() -> dict[str, Any]:
        log = commit_log(spark, table)
        record = log.skip(connector, task, epoch, tp, int(start), int(end), reason=reason)
        return {"seq": record.seq}

    return job(run)


def clean_up(
    spark: Any,
    batch: Any,
    table: LogTable,
    *,
    budget: float,
) -> dict[str, Any]:
    """Delete commit records no opener needs (``CommitLog.clean_up``) for ``budget`` s."""

    def run() -> dict[str, Any]:
        log = commit_log(spark, table)
        report = log.clean_up(deadline=time.monotonic() + budget)
        return {"report": dataclasses.asdict(report)}

    return job(run)


def read_offsets(
    spark: Any,
    batch: Any,
    table: LogTable,
    *,
    connector: str = "",
) -> dict[str, Any]:
    """The committed next offset of every partition ``connector`` owns (all without it)."""

    def run() -> dict[str, Any]:
        log = commit_log(spark, table)
        tps = log.owned_by(connector) if connector else None
        return {"offsets": offsets_out(log.committed_offsets(tps))}

    return job(run)


def alter_offsets(
    spark: Any,
    batch: Any,
    table: LogTable,
    *,
    connector: str,
    offsets: Sequence[Sequence[Any]],
) -> dict[str, Any]:
    """Set ([topic, partition, offset]) or forget ([topic, partition, None]) offsets."""
    wanted = {
        TopicPartition(str(t), int(p)): (None if o is None else int(o)) for t, p, o in offsets
    }

    def run() -> dict[str, Any]:
        log = commit_log(spark, table)
        log.alter_offsets(wanted, connector=connector)
        return {}

    return job(run)


def reset_offsets(
    spark: Any,
    batch: Any,
    table: LogTable,
    *,
    connector: str,
) -> dict[str, Any]:
    """Forget every partition's committed offset."""

    def run() -> dict[str, Any]:
        log = commit_log(spark, table)
        log.reset_offsets(connector=connector)
        return {}

    return job(run)
