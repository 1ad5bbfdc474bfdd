"""Hung, cancelled and crashed writes on real Spark executors: the whole tree dies, is reaped,
and a warm spare takes the next write at once.

Every check of "gone" reads /proc (``support.spark.alive``), never the pool's bookkeeping; the
trees are recorded during the hang by walking /proc from the executor's pid.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from support import procs
from support.spark import ThreadedPool, alive, reap, spark_settings, walk_tree

from daemon.errors import ExecutorDied, WriteFailed, WriteTimeout
from daemon.executor import ExecutorState, handoff
from daemon.executor.process import ProcStat

pytestmark = [pytest.mark.integration, pytest.mark.spark_line]

T = "daemon.executor.testing"
DEADLINE = 6.0  # long enough for the UDF's Spark job to start on a busy 2-core machine


@pytest.fixture(scope="module")
def kill_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedPool]:
    """A private pool (1 + 1 spare) for this module: its executors get killed on purpose."""
    scratch = tmp_path_factory.mktemp("kill-pool")
    pool = ThreadedPool(spark_settings(work_dir=scratch / "work", handoff_dir=scratch / "shm"))
    unregister = procs.register_session_owner(pool.pids)
    try:
        pool.start()
        yield pool
    finally:
        pool.close()
        unregister()


async def _wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout} s")
        await asyncio.sleep(0.02)


def _idle_pids(pool: ThreadedPool) -> set[int]:
    return {e.pid for e in pool.snapshot() if e.state is ExecutorState.IDLE}


def _describe(tree: dict[int, ProcStat]) -> str:
    return ", ".join(f"{p}:{s.comm}(pgid {s.pgid})" for p, s in sorted(tree.items()))


async def _hang_then_check(pool: ThreadedPool, fn: str, tmp_path: Path, task: str) -> None:
    pool.wait_ready(2)
    spares = _idle_pids(pool)
    marker = tmp_path / "hanging"
    batch = pa.table({"kafka_offset": list(range(1000)), "value": ["x" * 200] * 1000})
    started = time.monotonic()
    write = asyncio.create_task(
        pool.run(task, f"{T}:{fn}", batch, timeout=DEADLINE, kwargs={"marker": str(marker)})
    )
    await _wait_for(marker, DEADLINE)
    pid = pool.current_pid(task)
    assert pid is not None and pid in spares
    hung = walk_tree(pid)
    comms = [s.comm for s in hung.values()]
    assert "java" in comms, _describe(hung)
    if fn == "hang_in_udf":
        worker = int(marker.read_text())
        assert worker in hung, f"UDF worker {worker} not in the tree: {_describe(hung)}"
        assert len({s.pgid for s in hung.values()}) >= 2  # PySpark's daemon has its own group
    shm = pool.settings.handoff_dir
    assert shm is not None and list(handoff.iter_files(shm))  # the batch, handed over

    with pytest.raises(WriteTimeout) as err:
        await write
    gone_at = time.monotonic()
    left = alive(hung.values())
    reap(hung.values())
    assert left == [], f"still running after the kill: {_describe({s.pid: s for s in left})}"
    late = gone_at - (started + DEADLINE)  # the real deadline (from the ack) is a bit later
    assert late < 1.0, f"tree gone {late:.2f} s after the deadline"
    assert task in str(err.value) and f"{DEADLINE:g} s" in str(err.value)
    assert str(pid) in str(err.value)
    assert list(handoff.iter_files(shm)) == []  # removed with the kill

    # The next write goes to the warm spare, without waiting for a JVM to start.
    took = time.monotonic()
    got = await pool.run(task, f"{T}:whoami", timeout=10, acquire_timeout=2.0)
    assert got["pid"] in spares - {pid}
    takeover = time.monotonic() - took
    assert takeover < 1.0
    print(f"\n{fn}: {len(hung)} processes gone {late:+.3f} s after the deadline;", end=" ")
    print(f"spare took the next write in {takeover:.3f} s")


async def test_hung_udf_is_killed_at_its_deadline(kill_pool: ThreadedPool, tmp_path: Path) -> None:
    await _hang_then_check(kill_pool, "hang_in_udf", tmp_path, "hang-udf-0")


async def test_block_before_spark_is_killed_at_its_deadline(
    kill_pool: ThreadedPool, tmp_path: Path
) -> None:
    await _hang_then_check(kill_pool, "hang_in_python", tmp_path, "hang-python-0")


async def test_jvm_killed_from_outside_fails_the_write_with_executor_died(
    kill_pool: ThreadedPool, tmp_path: Path
) -> None:
    kill_pool.wait_ready(2)
    marker = tmp_path / "hanging"
    write = asyncio.create_task(
        kill_pool.run("jvm-0", f"{T}:hang_in_udf", timeout=120, kwargs={"marker": str(marker)})
    )
    await _wait_for(marker, 60)
    pid = kill_pool.current_pid("jvm-0")
    assert pid is not None
    tree = walk_tree(pid)
    (java,) = [p for p, s in tree.items() if s.comm == "java"]
    os.kill(java, signal.SIGKILL)
    with pytest.raises(ExecutorDied, match=f"JVM \\(pid {java}\\) died: killed by signal 9"):
        await write
    assert alive(tree.values()) == []
    reap(tree.values())
    assert kill_pool.status().deaths >= 1
    kill_pool.wait_ready(2)  # the replacement started and came up
    got = await kill_pool.run("jvm-0", f"{T}:count_rows", pa.table({"x": [1, 2, 3]}), timeout=60)
    assert got == 3


async def test_cancelling_the_await_kills_the_tree(kill_pool: ThreadedPool, tmp_path: Path) -> None:
    """Through the lease the runtime gets (``submit``, here across the pool's thread): it says
    which executor took the write and that it was killed."""
    kill_pool.wait_ready(2)
    marker = tmp_path / "hanging"
    lease = kill_pool.submit(
        "cancel-0", f"{T}:hang_in_udf", timeout=120, kwargs={"marker": str(marker)}
    )
    write = asyncio.create_task(lease.result())
    await _wait_for(marker, 60)
    pid = kill_pool.current_pid("cancel-0")
    assert pid is not None
    accepted = await asyncio.wait_for(lease.accepted(), 10)
    assert accepted.pid == pid and not lease.killed
    tree = walk_tree(pid)
    began = time.monotonic()
    write.cancel()
    with pytest.raises(asyncio.CancelledError):
        await write
    assert alive(tree.values()) == []  # gone before the cancellation was reported
    assert time.monotonic() - began < 1.0
    assert lease.killed
    reap(tree.values())
    assert kill_pool.current_pid("cancel-0") is None


async def test_a_failing_spark_write_keeps_its_executor(
    kill_pool: ThreadedPool, tmp_path: Path
) -> None:
    kill_pool.wait_ready(2)
    before = {e.pid for e in kill_pool.snapshot()}
    status = kill_pool.status()
    with pytest.raises(WriteFailed, match="PATH_NOT_FOUND"):
        await kill_pool.run(
            "fail-0", f"{T}:count_parquet", timeout=60, kwargs={"path": str(tmp_path / "nope")}
        )
    after = kill_pool.status()
    assert (after.kills, after.deaths) == (status.kills, status.deaths)
    assert {e.pid for e in kill_pool.snapshot()} == before
