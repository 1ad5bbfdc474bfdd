"""Hung writes killed in a row: never more than size + spares executors or JVMs alive, none
left after shutdown. 4 in the default run (alternating Python and UDF hangs); 50 under
``make soak``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from support.spark import ExecutorCensus, alive, walk_tree

from daemon.errors import WriteTimeout
from daemon.executor import ExecutorPool

pytestmark = pytest.mark.integration

T = "daemon.executor.testing"


@pytest.mark.parametrize(
    "count", [3, pytest.param(50, marks=[pytest.mark.soak, pytest.mark.timeout(3600)])]
)
async def test_consecutive_hung_writes_never_exceed_the_pool(
    count: int, make_pool: Callable[..., Awaitable[ExecutorPool]], tmp_path: Path
) -> None:
    work = tmp_path / "work"
    began = time.monotonic()
    with ExecutorCensus(str(work)) as census:
        pool = await make_pool(work_dir=work, handoff_dir=tmp_path / "shm")
        await pool.wait_ready(2)
        ready = time.monotonic()
        for i in range(count):
            fn = "hang_in_python" if i % 2 else "hang_in_udf"
            with pytest.raises(WriteTimeout):
                await pool.run(f"soak-{i % 3}", f"{T}:{fn}", timeout=2.0)
        kills = pool.status().kills
        await pool.close()
        after = census.count()
    took = time.monotonic() - ready
    print(
        f"\n{count} hung writes killed in {took:.1f} s ({took / count:.1f} s each;"
        f" {ready - began:.1f} s to start); max {census.max_executors} executors,"
        f" {census.max_jvms} JVMs alive at once over {census.samples} samples"
    )
    assert kills == count
    assert census.samples > 10
    assert census.max_executors <= 2 and census.max_jvms <= 2, census.max_seen
    assert after == (0, 0)


@pytest.mark.soak
async def test_pyspark_worker_daemon_outlives_idle_task_threads(
    make_pool: Callable[..., Awaitable[ExecutorPool]],
) -> None:
    """Spark retires task threads idle for 60 s; the Python worker daemon (started by one of
    them) must not die with its thread, as it would with a thread-bound parent-death signal."""
    pool = await make_pool(spares=0)
    await pool.wait_ready(1)
    (executor,) = pool.snapshot()
    tree = walk_tree(executor.pid)
    daemons = [s for p, s in tree.items() if s.comm.startswith("python") and s.pgid == p]
    assert daemons, "no PySpark worker daemon after the warm-up"
    await asyncio.sleep(75)  # a duration under test (Spark's 60 s keep-alive), not a wait
    assert alive(daemons) == daemons
    assert await pool.run("idle-0", f"{T}:python_job", timeout=60) == 10
    assert alive(daemons) == daemons  # served by the same daemon, not a restarted one
