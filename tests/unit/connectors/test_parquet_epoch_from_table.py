"""Issue 13 item 1, unit level: the table's commit log, not the state directory, is the
authority on epochs. A ParquetSink task opening partitions of a table that has seen a newer
epoch of its connector raises its epoch above it through ``context.raise_epoch`` — during
``open`` only (``TaskContext.opening``); anywhere else an older epoch stays older and is refused
as a zombie."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.connectors.parquet import ParquetSinkTask
from daemon.connectors.records import TopicPartition
from daemon.connectors.testing import LocalRunner
from daemon.runtime.incarnation.context import TaskContext
from daemon.storage.commitlog import CommitLog, ZombieEpoch
from daemon.storage.epochs import EpochStore
from daemon.structs import TaskId

TP0 = TopicPartition("t", 0)


def context(table: Path, epoch: int) -> tuple[TaskContext, dict[str, str]]:
    config = {"name": "orders", "path": str(table), "flush.max.records": "1000"}
    ctx = TaskContext(TaskId("orders", 0), epoch, config, LocalRunner())
    ctx.set_assignment([TP0])
    return ctx, config


def claimed(table: Path, epoch: int) -> None:
    with CommitLog(table) as log:
        log.fence("orders", 0, epoch, [TP0])


async def test_open_raises_the_epoch_above_the_tables(tmp_path: Path) -> None:
    table = tmp_path / "t"
    claimed(table, 10)  # an earlier daemon, with another state directory, got to epoch 10
    store = EpochStore(tmp_path / "fresh-state")  # this one's counter starts again
    ctx, config = context(table, store.next_epoch("orders"))

    async def raiser(floor: int) -> int:
        epoch = await store.next_epoch_async("orders", floor=floor)
        ctx.set_epoch(epoch)
        return epoch

    task = ParquetSinkTask()
    await task.start(config, ctx)
    with ctx.opening(raiser):
        await task.open([TP0])
    assert ctx.epoch == 11 and store.current("orders") == 11  # the counter caught up
    with CommitLog(table) as log:
        assert log.last_epoch("orders", TP0) == 11
    await task.stop()


async def test_only_the_opening_path_raises_an_epoch(tmp_path: Path) -> None:
    table = tmp_path / "t"
    claimed(table, 10)
    ctx, config = context(table, 3)
    assert await ctx.raise_epoch(above=10) == 3  # not opening: unchanged

    task = ParquetSinkTask()
    await task.start(config, ctx)
    with pytest.raises(ZombieEpoch, match="epoch 3 may not write t-0: epoch 10 already has"):
        await task.open([TP0])  # no runtime to raise it: refused as a zombie
    await task.stop()


async def test_a_hadoop_table_raises_the_epoch_through_its_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on a Hadoop table, whose log only executor jobs reach: its ``open_table`` job
    reports the table's newer epoch instead of fencing, the task raises its epoch and claims
    again. (The job's log is a local one here: ``LocalRunner`` runs jobs in-process, without a
    JVM.)"""
    from daemon.connectors.parquet import jobs

    local = tmp_path / "t"
    claimed(local, 10)
    monkeypatch.setattr(jobs, "commit_log", lambda spark, table: CommitLog(local).open())
    store = EpochStore(tmp_path / "fresh-state")
    ctx, config = context(local, store.next_epoch("orders"))
    config = {**config, "path": "hdfs://nn/t"}

    async def raiser(floor: int) -> int:
        epoch = await store.next_epoch_async("orders", floor=floor)
        ctx.set_epoch(epoch)
        return epoch

    task = ParquetSinkTask()
    await task.start(config, ctx)
    with ctx.opening(raiser):
        await task.open([TP0])
    assert ctx.epoch == 11 and task.committed == {}
    with CommitLog(local) as log:
        assert log.last_epoch("orders", TP0) == 11
    await task.stop()
