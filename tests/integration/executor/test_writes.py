"""Real Spark writes through the pool: a 100k-record Parquet round trip, uvloop, start-up
failures that back off."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import uvloop
from support.spark import ThreadedPool, alive, reap, spark_settings, walk_tree

from daemon.errors import WriteTimeout
from daemon.executor import ExecutorPool
from daemon.executor.testing import table_checksum

pytestmark = pytest.mark.integration

T = "daemon.executor.testing"


def records(n: int, value_bytes: int = 200) -> pa.Table:
    """``n`` Kafka-like records with ``value_bytes``-byte values."""
    pad = "v" * (value_bytes - 12)
    return pa.table(
        {
            "kafka_topic": pa.array(["orders"] * n),
            "kafka_partition": pa.array([i % 3 for i in range(n)], pa.int32()),
            "kafka_offset": pa.array(range(n), pa.int64()),
            "value": pa.array([f"{i:012d}{pad}" for i in range(n)]),
        }
    )


async def test_parquet_write_of_100k_records_reads_back_identical(
    spark_pool: ThreadedPool, tmp_path: Path
) -> None:
    table = records(100_000)
    out = tmp_path / "table"
    began = time.monotonic()
    written = await spark_pool.run(
        "parquet-0", f"{T}:write_parquet", table, timeout=240, kwargs={"path": str(out)}
    )
    took = time.monotonic() - began
    assert written == 100_000
    assert (
        await spark_pool.run(
            "parquet-0", f"{T}:count_parquet", timeout=120, kwargs={"path": str(out)}
        )
        == 100_000
    )
    back = pq.read_table(out).select(table.column_names)
    assert table_checksum(back) == table_checksum(table)
    print(f"\n100k records written by Spark in {took:.2f} s ({100_000 / took:,.0f} records/s)")


async def test_write_function_can_use_the_arrow_file_directly(
    spark_pool: ThreadedPool, tmp_path: Path
) -> None:
    table = records(10_000)
    out, stage = tmp_path / "table", tmp_path / "stage.parquet"
    assert (
        await spark_pool.run(
            "parquet-1",
            f"{T}:write_parquet_via_file",
            table,
            timeout=240,
            kwargs={"path": str(out), "stage": str(stage)},
        )
        == 10_000
    )
    assert table_checksum(pq.read_table(out).select(table.column_names)) == table_checksum(table)


def test_spark_pool_under_uvloop(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, list[int]]:
        settings = spark_settings(spares=0, work_dir=tmp_path / "w", handoff_dir=tmp_path / "s")
        async with ExecutorPool(settings) as pool:
            await pool.wait_ready(1)
            rows = await pool.run("uv-0", f"{T}:count_rows", records(1000), timeout=120)
            marker = tmp_path / "hanging"
            write = asyncio.create_task(
                pool.run("uv-0", f"{T}:hang_in_udf", timeout=8, kwargs={"marker": str(marker)})
            )
            while not marker.exists():
                await asyncio.sleep(0.05)
            pid = pool.current_pid("uv-0")
            assert pid is not None
            tree = walk_tree(pid)
            with pytest.raises(WriteTimeout):
                await write
            left = [s.pid for s in alive(tree.values())]
            reap(tree.values())
            assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
            return rows, left

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        rows, left = runner.run(scenario())
    assert rows == 1000 and left == []


async def test_executors_that_keep_failing_to_start_back_off(
    make_pool: Callable[..., Awaitable[ExecutorPool]],
) -> None:
    # A 1 KB heap: the JVM refuses to start, every time, within a second.
    pool = await make_pool(
        spares=0, spark_conf={"spark.driver.memory": "1k"}, backoff_initial=0.5, cds=False
    )
    deadline = time.monotonic() + 90
    while pool.status().start_failures < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    status = pool.status()
    assert status.start_failures >= 3 and status.failure_streak >= 3
    assert status.problem is not None and "JAVA_GATEWAY_EXITED" in status.problem
    assert "next start in" in status.problem
    assert status.backoff_seconds > 0 or status.starting == 1
    # Failures came at most at the backoff's pace: 0.5 + 1 s between the first three.
    assert time.monotonic() - (deadline - 90) > 1.5
