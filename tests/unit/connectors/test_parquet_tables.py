"""ParquetSink as one format of the one table sink task, without Spark (``LocalRunner`` writes
with pyarrow, the real commit log decides): what it has from the table sinks now — a table
per topic (``${topic}`` in ``path``) with its own commit log and offsets; records whose field
has another type than the table's column refused (the columns read back from the table's
files after a restart); the bounded open, for a local table and a Hadoop one."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from daemon.connectors.api import TaskId
from daemon.connectors.parquet import jobs
from daemon.connectors.parquet.sink import ParquetSinkConnector, ParquetSinkTask
from daemon.connectors.records import OffsetRange, RecordBatch, TopicPartition
from daemon.connectors.tables import opening
from daemon.connectors.testing import LocalRunner, sample_batch
from daemon.errors import RecordRejected
from daemon.runtime.incarnation.context import TaskContext
from daemon.storage.commitlog import CommitLog

A0, B0 = TopicPartition("a", 0), TopicPartition("b", 0)


async def started(
    config: dict[str, str], tps: tuple[TopicPartition, ...], epoch: int = 1
) -> tuple[ParquetSinkTask, TaskContext]:
    config = {"name": "orders", "flush.max.records": "1000", "flush.linger.ms": "600000", **config}
    ctx = TaskContext(TaskId("orders", 0), epoch, config, LocalRunner())
    task = ParquetSinkTask()
    await task.start(config, ctx)
    ctx.set_assignment(tps)
    await task.open(tps)
    return task, ctx


async def closed(task: ParquetSinkTask, ctx: TaskContext) -> None:
    with ctx.closing():
        await task.pre_commit(dict.fromkeys(ctx.assignment(), 0))
    await task.close(ctx.assignment())
    await task.stop()


def batch(tp: TopicPartition, start: int, ids: list[Any], id_type: pa.DataType) -> RecordBatch:
    n = len(ids)
    table = pa.table(
        {
            "kafka_topic": [tp.topic] * n,
            "kafka_partition": pa.array([tp.partition] * n, pa.int32()),
            "kafka_offset": pa.array(range(start, start + n), pa.int64()),
            "id": pa.array(ids, id_type),
        }
    )
    return RecordBatch(table, (OffsetRange(tp.topic, tp.partition, start, start + n),))


async def test_a_table_per_topic_with_its_own_log_and_offsets(tmp_path: Path) -> None:
    path = str(tmp_path / "${topic}")
    task, ctx = await started({"path": path}, (A0, B0))
    await task.put(sample_batch("a", 0, 0, 5))
    await task.put(sample_batch("b", 0, 0, 3))
    await closed(task, ctx)
    for topic, n in (("a", 5), ("b", 3)):
        with CommitLog(tmp_path / topic) as log:
            assert log.committed_offsets() == {TopicPartition(topic, 0): n}
            assert {r.kind for r in log.records()} == {"fence", "commit"}

    connector = ParquetSinkConnector()
    config = {"name": "orders", "topics": "a,b", "path": path}
    assert await connector.read_offsets(config) == {A0: 5, B0: 3}
    await connector.alter_offsets(config, {B0: 10})
    assert await connector.read_offsets(config) == {A0: 5, B0: 10}
    again, ctx2 = await started({"path": path}, (A0, B0), epoch=2)
    assert ctx2.take_seeks() == {A0: 5, B0: 10}
    await again.stop()
    await connector.reset_offsets(config)
    assert await connector.read_offsets(config) == {}
    # Another connector on one of the topics' tables is refused before it is created.
    (problem,) = connector.check_existing("other", {"topics": "b,c", "path": path})
    assert problem.key == "path" and "b-0" in str(problem) and "'orders'" in str(problem)


async def test_a_changed_type_is_refused_also_after_a_restart(tmp_path: Path) -> None:
    config = {"path": str(tmp_path / "t"), "partition.by": "kafka_partition"}
    task, ctx = await started(config, (A0,))
    assert await task.reject(batch(A0, 0, [1, 2], pa.int64())) == {}  # nothing known yet
    await task.put(batch(A0, 0, [1, 2], pa.int64()))
    await closed(task, ctx)

    again, ctx2 = await started(config, (A0,), epoch=2)  # columns read back from the files
    mixed = batch(A0, 2, ["three", None], pa.string())
    refused = await again.reject(mixed)
    assert list(refused) == [0] and isinstance(refused[0], RecordRejected)
    assert "field id is string here but the table's column is bigint" in str(refused[0])
    assert await again.reject(batch(A0, 2, [3], pa.int64())) == {}
    # The partition column takes any type (its values are directory names); a new field is
    # a new column (schema.evolution defaults to true for ParquetSink).
    wider = batch(A0, 2, [3], pa.int64()).table.append_column("name", pa.array(["x"]))
    assert await again.reject(RecordBatch(wider, ())) == {}
    left = RecordBatch(mixed.table.slice(1), mixed.ranges)  # what the runtime hands on
    await again.put(left)  # its column holds only nulls of the refused type: left out
    await closed(again, ctx2)

    strict, _ctx3 = await started({**config, "schema.evolution": "false"}, (A0,), epoch=3)
    refused = await strict.reject(RecordBatch(wider, ()))
    assert "not a column of the table and schema.evolution=false" in str(refused[0])
    await strict.stop()


class SlowClaims(LocalRunner):
    """Executor jobs that take ``delay`` seconds to start (a JVM starting)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, **kwargs: Any
    ) -> Any:
        await asyncio.sleep(self.delay)
        return await super().run_in_executor(fn, batch, timeout=timeout, **kwargs)


@pytest.mark.parametrize("where", ["local", "hadoop"])
async def test_a_slow_open_returns_and_put_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A claim that outlasts ``OPEN_WAIT`` (a local log on a slow disk; a Hadoop table's job
    waiting for an executor) does not hold the rebalance callback: ``open`` returns, ``put``
    waits for the claim, seeks to the committed offset, leaves out what was fetched before."""
    monkeypatch.setattr(opening, "OPEN_WAIT", 0.05)
    local = tmp_path / "t"
    with CommitLog(local) as log:
        log.fence("orders", 0, 1, [A0])
        log.commit("orders", 0, 1, [OffsetRange("a", 0, 0, 5)], [], commit_id=log.new_commit_id())
    config = {"name": "orders", "path": str(local), "flush.linger.ms": "0"}
    runner = LocalRunner()
    if where == "hadoop":
        config["path"] = "hdfs://nn/t"
        runner = SlowClaims(0.5)
        monkeypatch.setattr(jobs, "commit_log", lambda spark, table: CommitLog(local).open())
    else:
        fence = CommitLog.fence

        def slow_fence(self: CommitLog, *args: Any, **kwargs: Any) -> Any:
            time.sleep(0.5)
            return fence(self, *args, **kwargs)

        monkeypatch.setattr(CommitLog, "fence", slow_fence)
    ctx = TaskContext(TaskId("orders", 0), 2, config, runner)
    task = ParquetSinkTask()
    await task.start(config, ctx)
    ctx.set_assignment([A0])
    began = time.monotonic()
    await task.open([A0])
    assert time.monotonic() - began < 0.4 and ctx.take_seeks() == {}
    await task.put(sample_batch("a", 0, 0, 8))  # fetched from the group's offset 0
    assert ctx.take_seeks() == {A0: 5} and task.buffered == 0
    await task.put(sample_batch("a", 0, 5, 3))
    await task.quiet()
    assert task.committed == {A0: 8}
    await task.stop()
    with CommitLog(local) as log:
        assert log.committed_offsets() == {A0: 8}
