"""ParquetSinkTask without Spark: the real write function runs in-process with pyarrow
(``LocalRunner``), the real commit log decides. Exactly-once across incarnations, zombies,
failed and cancelled writes, closing, the offsets hooks."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from daemon.connectors.api import TaskId
from daemon.connectors.parquet.sink import ParquetSinkConnector, ParquetSinkTask
from daemon.connectors.records import TopicPartition
from daemon.connectors.testing import LocalRunner, sample_batch
from daemon.errors import CommitRejected, ConfigError, WriteTimeout
from daemon.runtime.incarnation.context import TaskContext
from daemon.storage.commitlog import CommitLog

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class FailingRunner(LocalRunner):
    """Runs the real write (files land in staging), then reports a killed executor."""

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, **kwargs: Any
    ) -> Any:
        await super().run_in_executor(fn, batch, timeout=timeout, **kwargs)
        raise WriteTimeout("write ran past its deadline; killed its process tree (test)")


class StuckRunner(LocalRunner):
    """A write that never ends; ``entered`` is set once it started."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, **kwargs: Any
    ) -> Any:
        Path(kwargs["path"], "part-0.parquet").write_bytes(b"half a file")
        self.entered.set()
        await asyncio.Event().wait()


async def start_task(
    table: Path,
    epoch: int,
    partitions: tuple[TopicPartition, ...] = (TP0,),
    runner: LocalRunner | None = None,
    **settings: str,
) -> tuple[ParquetSinkTask, TaskContext]:
    # Writes by size and interval only (no linger), unless a test says otherwise: what the
    # tests buffer stays buffered, however slow the machine.
    config = {
        "name": "orders",
        "path": str(table),
        "flush.max.records": "1000",
        "flush.linger.ms": "600000",
    }
    config.update({k.replace("_", "."): v for k, v in settings.items()})
    ctx = TaskContext(TaskId("orders", 0), epoch, config, runner or LocalRunner())
    task = ParquetSinkTask()
    await task.start(config, ctx)
    ctx.set_assignment(partitions)
    await task.open(partitions)
    return task, ctx


async def close_task(task: ParquetSinkTask, ctx: TaskContext, offsets: Mapping[Any, int]) -> Any:
    with ctx.closing():
        durable = await task.pre_commit(offsets)
    await task.close(ctx.assignment())
    await task.stop()
    return durable


def read_table(path: Path, fmt: str = "parquet") -> pa.Table:
    return ds.dataset(str(path), format=fmt, partitioning="hive").to_table()


def offset_list(table: pa.Table) -> list[tuple[int, int]]:
    return sorted(
        zip(table["kafka_partition"].to_pylist(), table["kafka_offset"].to_pylist(), strict=True)
    )


def staging_left(path: Path) -> list[str]:
    return sorted(os.listdir(path / "_connectd" / "staging"))


async def test_records_land_exactly_once_across_incarnations(tmp_path: Path) -> None:
    table = tmp_path / "orders"
    task, ctx = await start_task(table, epoch=1)
    assert ctx.take_seeks() == {}  # nothing committed yet
    await task.put(sample_batch("t", 0, 0, 600))
    await task.put(sample_batch("t", 0, 600, 600))  # 1200 ≥ 1000: due, written beside put
    await task.quiet()
    assert task.commits == 1 and task.committed == {TP0: 1200} and task.buffered == 0
    await task.put(sample_batch("t", 0, 1200, 100))
    assert await close_task(task, ctx, {TP0: 1300}) == {TP0: 1300}

    again, ctx2 = await start_task(table, epoch=2)
    assert ctx2.take_seeks() == {TP0: 1300}
    await again.put(sample_batch("t", 0, 1250, 100))  # a redelivery: 1250..1299 are dropped
    await close_task(again, ctx2, {TP0: 1350})
    rows = read_table(table)
    assert offset_list(rows) == [(0, o) for o in range(1350)]
    assert rows.column("value").to_pylist()[0].startswith("value-0")
    assert staging_left(table) == []


async def test_pre_commit_returns_only_what_is_durable(tmp_path: Path) -> None:
    task, ctx = await start_task(tmp_path / "t", epoch=1, flush_interval_ms="60000")
    await task.put(sample_batch("t", 0, 0, 5))
    assert await task.pre_commit({TP0: 5}) == {}  # buffered, not written
    assert len(ctx._runner.calls) == 0  # type: ignore[attr-defined]
    assert await close_task(task, ctx, {TP0: 5}) == {TP0: 5}  # closing writes it


async def test_the_interval_is_checked_in_pre_commit(tmp_path: Path) -> None:
    task, ctx = await start_task(tmp_path / "t", epoch=1, flush_interval_ms="0")
    await task.put(sample_batch("t", 0, 0, 0))  # nothing to write
    await task.quiet()
    assert task.commits == 0
    await task.put(sample_batch("t", 0, 0, 3))  # interval 0: every batch is written
    await task.quiet()
    assert task.commits == 1
    await task.put(sample_batch("t", 0, 3, 3))
    await task.quiet()
    assert task.commits == 2 and await task.pre_commit({TP0: 6}) == {TP0: 6}
    await close_task(task, ctx, {TP0: 6})


async def test_a_zombie_cannot_commit_after_a_newer_incarnation_opened(tmp_path: Path) -> None:
    table = tmp_path / "t"
    zombie, zctx = await start_task(table, epoch=1)
    await zombie.put(sample_batch("t", 0, 0, 10))
    live, lctx = await start_task(table, epoch=2)
    await live.put(sample_batch("t", 0, 0, 20))
    with zctx.closing(), pytest.raises(CommitRejected, match="zombie"):
        await zombie.pre_commit({TP0: 10})
    assert staging_left(table) == [] and not list(table.glob("part-*"))
    assert await close_task(live, lctx, {TP0: 20}) == {TP0: 20}
    assert offset_list(read_table(table)) == [(0, o) for o in range(20)]
    await zombie.stop()


async def test_an_older_epoch_cannot_even_open(tmp_path: Path) -> None:
    table = tmp_path / "t"
    task, _ctx = await start_task(table, epoch=5)
    await task.stop()
    with pytest.raises(CommitRejected, match="epoch 5"):
        await start_task(table, epoch=4)


async def test_a_killed_write_leaves_nothing_and_the_retry_lands_once(tmp_path: Path) -> None:
    table = tmp_path / "t"
    task, ctx = await start_task(table, epoch=1, flush_max_records="10")
    await task.put(sample_batch("t", 0, 0, 10))
    ctx.take_seeks()
    await task.quiet()
    ctx._runner = FailingRunner()  # type: ignore[attr-defined]
    await task.put(sample_batch("t", 0, 10, 10))  # due: the write starts beside put, and fails
    await task.put(sample_batch("t", 0, 20, 5))  # buffered while it failed, dropped with it
    with pytest.raises(WriteTimeout):  # the next call raises the failure
        await task.quiet()
    assert staging_left(table) == [] and task.buffered == 0
    assert ctx.take_seeks() == {TP0: 10}  # asks to read again from the committed offset
    assert offset_list(read_table(table)) == [(0, o) for o in range(10)]
    await task.stop()

    retry, rctx = await start_task(table, epoch=2, flush_max_records="10")
    assert rctx.take_seeks() == {TP0: 10}
    await retry.put(sample_batch("t", 0, 10, 10))
    await close_task(retry, rctx, {TP0: 20})
    assert offset_list(read_table(table)) == [(0, o) for o in range(20)]


async def test_a_cancelled_write_is_aborted(tmp_path: Path) -> None:
    """The runtime ends the writer (``TaskContext.end_background``) when the incarnation is
    killed: the write it holds is cancelled, its staged files deleted."""
    table = tmp_path / "t"
    runner = StuckRunner()
    task, ctx = await start_task(table, epoch=1, runner=runner, flush_max_records="5")
    await task.put(sample_batch("t", 0, 0, 5))  # returns: the write runs beside it
    await asyncio.wait_for(runner.entered.wait(), 10)
    assert len(staging_left(table)) == 1
    await asyncio.wait_for(ctx.end_background(), 10)
    assert staging_left(table) == [] and os.listdir(table / "_connectd" / "locks") == []
    assert not list(table.glob("part-*"))
    await task.stop()


async def test_close_drops_the_closed_partitions_buffer(tmp_path: Path) -> None:
    task, ctx = await start_task(tmp_path / "t", epoch=1, partitions=(TP0, TP1))
    await task.put(sample_batch("t", 0, 0, 4))
    await task.put(sample_batch("t", 1, 0, 3))
    await task.close([TP1])
    ctx.set_assignment([TP0])
    assert task.buffered == 4 and await close_task(task, ctx, {TP0: 4}) == {TP0: 4}
    assert offset_list(read_table(tmp_path / "t")) == [(0, o) for o in range(4)]


async def test_partition_by_writes_hive_directories(tmp_path: Path) -> None:
    table = tmp_path / "t"
    task, ctx = await start_task(table, 1, (TP0, TP1), partition_by="kafka_partition")
    await task.put(sample_batch("t", 0, 0, 4))
    await task.put(sample_batch("t", 1, 0, 3))
    await close_task(task, ctx, {TP0: 4, TP1: 3})
    assert sorted(p.name for p in table.iterdir()) == [
        "_connectd",
        "kafka_partition=0",
        "kafka_partition=1",
    ]
    assert len(offset_list(read_table(table))) == 7


async def test_a_partition_column_the_records_lack_fails_the_put(tmp_path: Path) -> None:
    task, _ctx = await start_task(tmp_path / "t", epoch=1, partition_by="region")
    with pytest.raises(ConfigError, match=r"partition\.by.*region"):
        await task.put(sample_batch("t", 0, 0, 2))
    await task.stop()


@pytest.mark.parametrize("fmt", ["parquet", "orc", "csv", "json"])
async def test_every_format(tmp_path: Path, fmt: str) -> None:
    table = tmp_path / fmt
    task, ctx = await start_task(table, epoch=1, format=fmt)
    await task.put(sample_batch("t", 0, 0, 7))
    await close_task(task, ctx, {TP0: 7})
    (data,) = [p for p in table.iterdir() if p.name.startswith("part-")]
    assert data.name.endswith(f".{fmt}")
    reader = ds.dataset(str(table), format=fmt)
    assert sorted(reader.to_table().column("kafka_offset").to_pylist()) == list(range(7))


async def test_offsets_hooks_read_alter_and_reset_the_commit_log(tmp_path: Path) -> None:
    table = tmp_path / "t"
    config = {"name": "orders", "path": f"file://{table}"}
    connector = ParquetSinkConnector()
    assert await connector.read_offsets(config) == {}
    assert not table.exists()  # reading does not create the table
    task, ctx = await start_task(table, epoch=1, partitions=(TP0, TP1))
    await task.put(sample_batch("t", 0, 0, 5))
    await task.put(sample_batch("t", 1, 0, 2))
    await close_task(task, ctx, {TP0: 5, TP1: 2})
    assert await connector.read_offsets(config) == {TP0: 5, TP1: 2}

    await connector.alter_offsets(config, {TP0: 100, TP1: None})
    assert await connector.read_offsets(config) == {TP0: 100}
    again, ctx2 = await start_task(table, epoch=2, partitions=(TP0, TP1))
    assert ctx2.take_seeks() == {TP0: 100}
    await again.stop()
    with pytest.raises(ConfigError, match="≥ 0"):
        await connector.alter_offsets(config, {TP0: -1})

    await connector.reset_offsets(config)
    assert await connector.read_offsets(config) == {}
    with CommitLog(table) as log:
        kinds = [r.kind for r in log.records()]
    assert kinds == ["fence", "commit", "offsets", "fence", "offsets"]


async def test_a_bad_configuration_fails_start(tmp_path: Path) -> None:
    ctx = TaskContext(TaskId("c", 0), 1, {}, LocalRunner())
    task = ParquetSinkTask()
    with pytest.raises(ConfigError, match="path"):
        await task.start({"path": "relative/t"}, ctx)
    await task.stop()  # the runtime may still call stop: nothing to release
