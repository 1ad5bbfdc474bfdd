"""Real Spark writes through the pool: a 100k-record Parquet round trip, uvloop, start-up
failures that back off."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import uvloop
from support.daemon import wait_until
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
            await wait_until(marker.exists, 120, "the UDF hanging in a PySpark worker")
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


SPAWNED = re.compile(r"executor (\d+) started: pid (\d+)")
FAILED = re.compile(r"failure (\d+) in a row; next start in ([\d.]+) s")


async def test_executors_that_keep_failing_to_start_back_off(
    make_pool: Callable[..., Awaitable[ExecutorPool]], caplog: pytest.LogCaptureFixture
) -> None:
    """Each start failure waits ``0.5 * 2**(n-1)`` s before the next spawn: measured between
    the pool's own log records of the failure and of the next spawn (their timestamps)."""
    caplog.set_level(logging.INFO, logger="connectd.executor")
    # A 1 KB heap: the JVM refuses to start, every time, within a second.
    pool = await make_pool(
        spares=0, spark_conf={"spark.driver.memory": "1k"}, backoff_initial=0.5, cds=False
    )

    def events() -> list[tuple[str, int, float]]:
        """("spawn", executor id, t) and ("fail", streak, t), in the order they happened."""
        out = []
        for r in caplog.records:
            if r.name != "connectd.executor":
                continue
            message = r.getMessage()
            if m := SPAWNED.search(message):
                out.append(("spawn", int(m[1]), r.created))
            elif m := FAILED.search(message):
                out.append(("fail", int(m[1]), r.created))
        return out

    # Four spawns: three waits to measure (0.5, 1 and 2 s).
    await wait_until(
        lambda: sum(kind == "spawn" for kind, _, _ in events()) >= 4, 120, "a fourth start"
    )
    got = events()[:7]
    assert [(kind, n) for kind, n, _ in got] == [
        ("spawn", 1), ("fail", 1), ("spawn", 2), ("fail", 2), ("spawn", 3), ("fail", 3),
        ("spawn", 4),
    ]  # fmt: skip
    failures = [r.getMessage() for r in caplog.records if FAILED.search(r.getMessage())][:3]
    assert [m.split("next start in ")[1] for m in failures] == ["0.5 s)", "1 s)", "2 s)"]
    assert all("JAVA_GATEWAY_EXITED" in m for m in failures), failures
    # The measured wait from each failure to the next spawn: at least the backoff (less a
    # little clock granularity), and not much more (2 shared cores: up to 1 s of slack).
    waits = [got[i + 1][2] - got[i][2] for i in (1, 3, 5)]
    for expected, measured in zip((0.5, 1.0, 2.0), waits, strict=True):
        assert expected - 0.05 <= measured <= expected + 1.0, (expected, waits)
    print(f"\nwaits between a failure and the next start: {[round(w, 3) for w in waits]} s")
    assert waits[0] < waits[1] < waits[2], waits  # the waits grow
    status = pool.status()
    assert status.start_failures >= 3 and status.failure_streak >= 3
    assert status.problem is not None and "JAVA_GATEWAY_EXITED" in status.problem
