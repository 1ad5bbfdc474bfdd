"""ParquetSink with real Spark executors: a 100k-record round trip (written by Spark, and by
pyarrow under the default write.engine=auto), every format with
partition.by, restart from the commit log, a zombie refused, a killed write that leaves nothing
and lands exactly once on retry."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from support.spark import ThreadedPool, alive, walk_tree

from daemon.connectors.parquet.sink import ParquetSinkTask
from daemon.connectors.records import RecordBatch, TopicPartition
from daemon.connectors.testing import sample_batch
from daemon.errors import CommitRejected, WriteTimeout
from daemon.executor.testing import table_checksum
from daemon.runtime.incarnation.context import TaskContext

pytestmark = pytest.mark.integration

TPS = tuple(TopicPartition("orders", p) for p in range(3))
StartTask = Callable[..., Awaitable[tuple[Any, TaskContext]]]  # the sink_task fixture
COMPARED = ["kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "key", "value"]


class StagedThenHungTask(ParquetSinkTask):
    """Its write stages the files, then blocks until the deadline kills the executor."""

    write_function = "daemon.connectors.testing:write_staged_then_block"


def batches(start: int, per_partition: int, value_size: int = 200) -> list[RecordBatch]:
    return [
        sample_batch(tp.topic, tp.partition, start, per_partition, value_size=value_size)
        for tp in TPS
    ]


def comparable(table: pa.Table) -> pa.Table:
    """The compared columns, timestamps as epoch milliseconds, in (partition, offset) order."""
    table = table.select(COMPARED)
    millis = pc.cast(pc.cast(table["kafka_timestamp"], pa.timestamp("ms", "UTC")), pa.int64())
    table = table.set_column(3, "kafka_timestamp", millis)
    table = table.set_column(1, "kafka_partition", pc.cast(table["kafka_partition"], pa.int32()))
    return table.sort_by([("kafka_partition", "ascending"), ("kafka_offset", "ascending")])


def read_back(path: Path, fmt: str = "parquet") -> pa.Table:
    fmt_obj: str | ds.FileFormat = fmt
    if fmt == "csv":
        fmt_obj = ds.CsvFileFormat()
    return ds.dataset(str(path), format=fmt_obj, partitioning="hive").to_table()


def offsets(table: pa.Table) -> list[tuple[int, int]]:
    parts = table["kafka_partition"].to_pylist()
    return sorted(zip(parts, table["kafka_offset"].to_pylist(), strict=True))


async def close(task: ParquetSinkTask, ctx: TaskContext) -> dict[TopicPartition, int]:
    with ctx.closing():
        durable = dict(await task.pre_commit(dict.fromkeys(ctx.assignment(), 0)))
    await task.close(ctx.assignment())
    return durable


@pytest.mark.parametrize("engine", ["spark", "auto"])
async def test_100k_records_read_back_identical(
    sink_task: StartTask, tmp_path: Path, engine: str
) -> None:
    table = tmp_path / "orders"
    config = {"path": str(table), "flush.max.records": "100000", "write.engine": engine}
    task, _ctx = await sink_task(ParquetSinkTask, config, partitions=TPS)
    sent = batches(0, 33_334)[:2] + batches(0, 33_332)[2:]
    await task.put(sent[0])
    await task.put(sent[1])
    began = time.monotonic()
    await task.put(sent[2])  # the 100,000th record: due, written beside put
    await task.quiet()  # written and committed
    took = time.monotonic() - began
    assert task.commits == 1 and task.buffered == 0
    assert task.committed == {TPS[0]: 33_334, TPS[1]: 33_334, TPS[2]: 33_332}
    back = read_back(table)
    expected = comparable(pa.concat_tables([b.table for b in sent]))
    assert back.num_rows == 100_000
    assert table_checksum(comparable(back)) == table_checksum(expected)
    assert back["headers"].to_pylist()[0] == [{"key": "source", "value": b"sample"}]
    print(
        f"\nParquetSink, write.engine={engine}: 100,000 records written and committed in"
        f" {took:.2f} s"
        f" ({100_000 / took:,.0f} records/s)"
    )


@pytest.mark.parametrize("fmt", ["parquet", "orc", "json", "csv"])
async def test_each_format_partitioned_by_kafka_partition(
    sink_task: StartTask, tmp_path: Path, fmt: str
) -> None:
    table = tmp_path / fmt
    config = {"path": f"file://{table}", "format": fmt, "partition.by": "kafka_partition"}
    if fmt != "csv":
        config["compression"] = {"parquet": "zstd", "orc": "zlib", "json": "gzip"}[fmt]
    task, ctx = await sink_task(ParquetSinkTask, config, partitions=TPS)
    for batch in batches(0, 200, value_size=40):
        await task.put(batch)
    assert await close(task, ctx) == dict.fromkeys(TPS, 200)
    dirs = sorted(p.name for p in table.iterdir())
    assert dirs == ["_connectd", "kafka_partition=0", "kafka_partition=1", "kafka_partition=2"]
    assert all(f.name.startswith("part-") for f in (table / "kafka_partition=1").iterdir())
    back = read_back(table, fmt)
    assert offsets(back) == [(p, o) for p in range(3) for o in range(200)]
    assert sorted(back["key"].to_pylist())[:2] == ["key-0", "key-0"]


async def test_restart_resumes_from_the_commit_log_and_a_zombie_is_refused(
    sink_task: StartTask, tmp_path: Path
) -> None:
    table = tmp_path / "orders"
    # No linger: what is buffered stays buffered until the test says (writes by size only).
    config = {"path": str(table), "flush.max.records": "3000", "flush.linger.ms": "600000"}
    first, ctx1 = await sink_task(ParquetSinkTask, config, epoch=1, partitions=TPS)
    for batch in batches(0, 1000, value_size=40):
        await first.put(batch)  # the third makes 3000: one commit
    await first.quiet()
    assert first.commits == 1
    for batch in batches(1000, 500, value_size=40):
        await first.put(batch)  # buffered only: this incarnation becomes a zombie
    assert first.buffered == 1500

    second, ctx2 = await sink_task(ParquetSinkTask, config, epoch=2, partitions=TPS)
    assert ctx2.take_seeks() == dict.fromkeys(TPS, 1000)  # exactly after the commit
    for batch in batches(1000, 800, value_size=40):
        await second.put(batch)
    assert await close(second, ctx2) == dict.fromkeys(TPS, 1800)

    with pytest.raises(CommitRejected, match="zombie"):
        await close(first, ctx1)
    assert os.listdir(table / "_connectd" / "staging") == []
    assert offsets(read_back(table)) == [(p, o) for p in range(3) for o in range(1800)]


async def test_a_write_killed_after_staging_leaves_nothing_and_the_retry_lands_once(
    sink_task: StartTask, sink_pool: ThreadedPool, tmp_path: Path
) -> None:
    table = tmp_path / "orders"
    config = {
        "path": str(table),
        "flush.max.records": "600",
        "flush.linger.ms": "600000",  # the write starts at 600 records, not before
        "task.write.timeout.ms": "10000",
    }
    hung, ctx = await sink_task(StagedThenHungTask, config, epoch=1, partitions=TPS, task=1)
    first, second, third = batches(0, 200, value_size=40)
    await hung.put(first)
    await hung.put(second)
    put = asyncio.create_task(hung.put(third))  # 600 records: the write starts, then hangs
    await put  # put returns; the write runs beside it
    put = asyncio.create_task(hung.quiet())  # ends with the write's outcome
    staging = table / "_connectd" / "staging"
    deadline = time.monotonic() + 60
    pid = None
    while time.monotonic() < deadline and not put.done():
        pid = sink_pool.current_pid("c-1")
        if pid is not None and any(staging.rglob("*.parquet")):
            break
        await asyncio.sleep(0.05)
    assert pid is not None and any(staging.rglob("*.parquet")), "the write never staged files"
    tree = walk_tree(pid)
    with pytest.raises(WriteTimeout, match="deadline"):
        await put
    assert alive(tree.values()) == []  # the executor's tree is gone
    assert os.listdir(staging) == [] and not list(table.rglob("part-*"))
    assert ctx.take_seeks() == {}  # nothing was ever committed: nothing to seek to

    retry, _ctx2 = await sink_task(ParquetSinkTask, config, epoch=2, partitions=TPS, task=1)
    for batch in batches(0, 200, value_size=40):
        await retry.put(batch)
    await retry.quiet()
    assert retry.commits == 1
    assert offsets(read_back(table)) == [(p, o) for p in range(3) for o in range(200)]
