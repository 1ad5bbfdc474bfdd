"""Issue 16 item 3, Hadoop tables: ``HadoopTable.skip`` records a gap through an executor job
(``parquet.jobs.skip_offsets``), the commit log reached through the executor's JVM
(``HadoopFs`` on a ``file://`` URI, as for any Hadoop filesystem), in the session's warm Spark
pool. The skip is fenced like a commit: a zombie epoch is refused, and the partition's offset
moves past the gap. And the next incarnation's first claim reads the table's columns back
from the files Spark wrote (``parquet.columns``, in the claim's job)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.spark import ThreadedPool

from daemon.connectors.api import TaskId
from daemon.connectors.parquet.settings import ParquetSettings
from daemon.connectors.parquet.table import HadoopTable, log_job_kwargs
from daemon.connectors.parquet.write import WRITE_STAGED
from daemon.connectors.records import TopicPartition
from daemon.connectors.tables.jobs import raise_for
from daemon.connectors.testing import sample_batch
from daemon.runtime.incarnation.context import TaskContext
from daemon.storage.commitlog import CommitLog, ZombieEpoch

pytestmark = pytest.mark.integration


class PoolRunner:
    """The runtime's binding of one task id to the pool (``ExecutorRunner``)."""

    def __init__(self, pool: ThreadedPool, task_id: str) -> None:
        self.pool, self.task_id = pool, task_id

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, **kwargs: Any
    ) -> Any:
        return await self.pool.run(self.task_id, fn, batch, timeout=timeout, kwargs=kwargs)


async def test_a_skip_is_recorded_through_an_executor_job(
    sink_pool: ThreadedPool, tmp_path: Path
) -> None:
    table = tmp_path / "table"
    uri = f"file://{table}"
    tp = TopicPartition("orders", 0)
    settings = ParquetSettings.from_config({"path": str(table)})
    runner = PoolRunner(sink_pool, "skip-0")

    def hadoop_table(epoch: int) -> HadoopTable:
        ctx = TaskContext(TaskId("skip", 0), epoch, {"path": uri}, runner)
        return HadoopTable(uri, settings, ctx, WRITE_STAGED)

    live = hadoop_table(2)
    assert (await live.claim([tp], probe=False)).offsets == {tp: None}
    await live.skip(tp, 0, 40, "retention deleted offsets 0..39")
    offsets = raise_for(
        await runner.run_in_executor(
            "daemon.connectors.parquet.jobs:read_offsets",
            None,
            timeout=120.0,
            connector="skip",
            **log_job_kwargs(settings, uri),
        )
    )
    assert offsets["offsets"] == [["orders", 0, 40]]
    with pytest.raises(ZombieEpoch):  # an older incarnation may not record a skip
        await hadoop_table(1).skip(tp, 40, 50, "a zombie")
    with CommitLog(table) as log:
        (skip,) = [r for r in log.records() if r.kind == "skip"]
    assert [(r.start, r.end) for r in skip.ranges] == [(0, 40)]
    assert skip.epoch == 2 and skip.reason == "retention deleted offsets 0..39"

    batch = sample_batch("orders", 0, 40, 10)
    await live.write(batch.table, batch.ranges, CommitLog.new_commit_id())
    after = hadoop_table(3)
    assert (await after.claim([tp], probe=False)).offsets == {tp: 50}
    assert after.columns is not None
    columns = dict(after.columns)
    assert columns["kafka_offset"] == "bigint" and columns["kafka_timestamp"] == "timestamp"
    assert columns["headers"] == "array<struct<key:string,value:binary>>"
